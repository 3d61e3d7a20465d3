"""txretry-mcp driven by the official MCP Python SDK (`mcp` on PyPI): stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

try:  # mcp 2.x
    from mcp import MCPError
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError as MCPError

from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import (
    INITIAL_ACCOUNTS,
    INITIAL_ORDERS,
    SUPPORT_TOKEN,
    TELLER_TOKEN,
    Database,
    run_async,
    server_env,
)

INVALID_PARAMS = -32602


@contextlib.asynccontextmanager
async def stdio_session(binary: str, config: Path, db: Database, log: Path, *flags: str):
    params = StdioServerParameters(
        command=binary,
        args=["serve", "--config", str(config), *flags],
        env=server_env(db),
    )
    with open(log, "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as client:
        async with streamable_http_client(url, http_client=client) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def wire(model) -> dict:
    """A result as it travelled (camelCase keys), whichever SDK version parsed it."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def tools_of(session: ClientSession) -> dict[str, dict]:
    listed = wire(await session.list_tools())
    return {tool["name"]: tool for tool in listed["tools"]}


async def call(session: ClientSession, name: str, arguments: dict) -> dict:
    """A tools/call answered with a result: its structuredContent, checked against isError."""
    result = wire(await session.call_tool(name, arguments))
    structured = result.get("structuredContent")
    assert isinstance(structured, dict), f"{name}: no structuredContent in {result}"
    assert structured["status"] in ("committed", "business_error", "ambiguous", "failed"), structured
    assert isinstance(structured["call_id"], str) and structured["call_id"], structured
    assert isinstance(structured["attempts"], int) and structured["attempts"] >= 1, structured
    assert result.get("isError", False) == (structured["status"] != "committed"), result
    if structured["status"] == "committed":
        assert "result" in structured, structured
    else:
        assert "error" in structured, structured
    return structured


async def refused(session: ClientSession, name: str, arguments: dict) -> MCPError:
    with pytest.raises(MCPError) as raised:
        await session.call_tool(name, arguments)
    return raised.value


def server_log(tmp_path: Path) -> Path:
    return tmp_path / "stdio-server.log"


def test_stdio_tools_per_role(binary, config_path, db, tmp_path):
    log = server_log(tmp_path)

    async def main():
        async with stdio_session(binary, config_path, db, log, "--role", "support") as session:
            tools = await tools_of(session)
            assert "get_order" in tools and "cancel_order" in tools, tools.keys()
            assert "transfer" not in tools, tools.keys()
            cancel = tools["cancel_order"]
            assert cancel["inputSchema"]["type"] == "object"
            assert cancel["inputSchema"]["properties"]["order_id"]["type"] == "integer"
            assert cancel["inputSchema"]["properties"]["order_id"].get("minimum") == 1
            assert cancel["inputSchema"].get("required") == ["order_id"]
            for tool in tools.values():
                schema = tool.get("outputSchema")
                assert schema and schema.get("type") == "object", tool
                assert "status" in schema.get("properties", {}), schema
            get_order = tools["get_order"]
            assert get_order["annotations"]["readOnlyHint"] is True, get_order
            assert cancel.get("annotations", {}).get("readOnlyHint") is not True, cancel
            # A tool this caller is not offered is refused like an unknown one.
            error = await refused(session, "transfer", {"from": 1, "to": 2, "cents": 5, "request_id": "r"})
            assert error.code == INVALID_PARAMS, error

        async with stdio_session(binary, config_path, db, log, "--role", "teller") as session:
            tools = await tools_of(session)
            assert "transfer" in tools and "cancel_order" not in tools, tools.keys()
            schema = tools["transfer"]["inputSchema"]
            assert set(schema["properties"]) == {"from", "to", "cents", "request_id"}, schema
            assert schema["properties"]["cents"]["type"] == "integer"
            assert schema["properties"]["cents"].get("minimum") == 1
            assert schema["properties"]["cents"].get("maximum") == 1000000
            assert schema["properties"]["request_id"]["type"] == "string"
            assert set(schema.get("required", [])) == {"from", "to", "cents", "request_id"}, schema
            assert schema.get("additionalProperties") is False, schema

        async with stdio_session(binary, config_path, db, log, "--role", "support", "--role", "teller", "--toolset", "viewer") as session:
            assert set(await tools_of(session)) == {"get_order"}

        async with stdio_session(binary, config_path, db, log) as session:
            assert set(await tools_of(session)) == {"get_order"}
            got = await call(session, "get_order", {"order_id": 7})
            assert got["status"] == "committed"
            assert got["result"] == {"id": 7, "account": 1, "status": "open", "cents": 2500}, got

    run_async(main())
    assert db.balances() == INITIAL_ACCOUNTS


def test_http_callers_by_token(http_server, db):
    async def main():
        async with http_session(http_server.url, TELLER_TOKEN) as session:
            tools = await tools_of(session)
            assert "transfer" in tools and "get_order" in tools, tools.keys()
            assert "cancel_order" not in tools, tools.keys()
            assert tools["transfer"].get("outputSchema"), tools["transfer"]
            moved = await call(session, "transfer", {"from": 1, "to": 3, "cents": 700, "request_id": "http-1"})
            assert moved["status"] == "committed", moved
            assert moved["result"] == "moved 700 cents from account 1 to account 3", moved

        async with http_session(http_server.url, SUPPORT_TOKEN) as session:
            # The support token speaks as the viewer toolset: get_order only.
            assert set(await tools_of(session)) == {"get_order"}
            error = await refused(session, "cancel_order", {"order_id": 7})
            assert error.code == INVALID_PARAMS, error

        for token in (None, "not-a-known-token-0123456789"):
            async with http_session(http_server.url, token) as session:
                assert await tools_of(session) == {}, token
                for name, arguments in (
                    ("get_order", {"order_id": 7}),
                    ("transfer", {"from": 1, "to": 2, "cents": 5, "request_id": f"anon-{token}"}),
                    ("cancel_order", {"order_id": 8}),
                ):
                    error = await refused(session, name, arguments)
                    assert error.code == INVALID_PARAMS, (token, name, error)

    run_async(main())
    assert db.balances() == {1: 9300, 2: 10000, 3: 10700}
    assert db.ledger() == [("http-1", 1, 3, 700)]
    assert db.orders() == INITIAL_ORDERS


def opposite_transfers(round_no: int, count: int) -> list[dict]:
    transfers = []
    for i in range(count):
        source, target = (1, 2) if i % 2 == 0 else (2, 1)
        transfers.append({"from": source, "to": target, "cents": 100 + 7 * i, "request_id": f"r{round_no}-{i}"})
    return transfers


async def concurrent_rounds(session: ClientSession, db: Database, rounds: int) -> int:
    balances = dict(INITIAL_ACCOUNTS)
    retried = 0
    ledger_rows = 0
    for round_no in range(rounds):
        transfers = opposite_transfers(round_no, 16)
        answers = await asyncio.gather(*(call(session, "transfer", t) for t in transfers))
        # Under this load a transfer can run out of its 20 attempts (Postgres: each deadlock
        # costs up to deadlock_timeout, 1s) or its 10s timeout: `failed` or `ambiguous`. The
        # server's instructions say calling again with the same request_id is then safe; a
        # client does that, and the money must still move exactly once. More than one such
        # answer in a round of 16 fails the test.
        unfinished = [i for i, a in enumerate(answers) if a["status"] != "committed"]
        for i in unfinished:
            answer = answers[i]
            print(f"{db.kind}: not committed at first, called again: {json.dumps(transfers[i])} -> {json.dumps(answer)}")
            assert answer["status"] in ("failed", "ambiguous"), (transfers[i], answer)
            answers[i] = await call(session, "transfer", transfers[i])
        assert len(unfinished) <= 1, [answers[i] for i in unfinished]
        for transfer, answer in zip(transfers, answers):
            assert answer["status"] == "committed", json.dumps([transfer, answer])
            assert answer["result"] == f"moved {transfer['cents']} cents from account {transfer['from']} to account {transfer['to']}", answer
            balances[transfer["from"]] -= transfer["cents"]
            balances[transfer["to"]] += transfer["cents"]
        retried += sum(1 for a in answers if a["attempts"] > 1)
        ledger_rows += len(transfers)
        assert len({a["call_id"] for a in answers}) == len(answers), answers
        retried += len(unfinished)
        read = db.balances()
        assert read == balances, (read, balances)
        assert sum(read.values()) == sum(INITIAL_ACCOUNTS.values())
        assert len(db.ledger()) == ledger_rows
        if retried:
            break
    return retried


def test_concurrent_opposite_transfers(binary, config_path, db, tmp_path):
    """16 transfers 1->2 and 2->1 at once in one session: all commit, the money adds up.

    On Postgres and MariaDB they deadlock for real and are retried inside the call, seen in
    `attempts`; a round without any retry is followed by another (at most 5)."""
    deadlocks = db.kind in ("postgres", "mariadb")
    log = server_log(tmp_path)

    async def main():
        async with stdio_session(binary, config_path, db, log, "--role", "teller") as session:
            return await concurrent_rounds(session, db, 5 if deadlocks else 1)

    retried = run_async(main(), timeout=300)
    print(f"{db.kind}: {retried} calls took more than one attempt")
    if deadlocks:
        assert retried > 0, f"no transfer was retried on {db.kind} in 5 rounds of 16 opposite transfers"
    assert db.balances()[3] == 10000
    assert db.orders() == INITIAL_ORDERS


def test_concurrent_transfers_over_http(http_server, db):
    """The same collision over streamable HTTP: 16 opposite transfers at once."""
    deadlocks = db.kind in ("postgres", "mariadb")

    async def main():
        async with http_session(http_server.url, TELLER_TOKEN) as session:
            return await concurrent_rounds(session, db, 5 if deadlocks else 1)

    retried = run_async(main(), timeout=300)
    print(f"{db.kind} over HTTP: {retried} calls took more than one attempt")
    if deadlocks:
        assert retried > 0, f"no transfer was retried on {db.kind} in 5 rounds over HTTP"


def test_business_errors_come_back_once(binary, config_path, db, tmp_path):
    log = server_log(tmp_path)

    async def main():
        async with stdio_session(binary, config_path, db, log, "--role", "teller", "--role", "support") as session:
            short = await call(session, "transfer", {"from": 3, "to": 1, "cents": 10001, "request_id": "short-1"})
            assert short["status"] == "business_error", short
            assert short["attempts"] == 1, short
            assert "short of 10001 cents" in short["error"], short
            assert "result" not in short, short

            missing = await call(session, "transfer", {"from": 1, "to": 42, "cents": 10, "request_id": "nowhere-1"})
            assert missing["status"] == "business_error", missing
            assert "account 42 not found" in missing["error"], missing

            shipped = await call(session, "cancel_order", {"order_id": 9})
            assert shipped["status"] == "business_error", shipped
            assert shipped["attempts"] == 1, shipped
            assert "order 9 not found or not open" in shipped["error"], shipped

            absent = await call(session, "get_order", {"order_id": 12345})
            assert absent["status"] == "business_error", absent

    run_async(main())
    # Nothing was written, not even the half of the transfer before the missing account.
    assert db.balances() == INITIAL_ACCOUNTS
    assert db.orders() == INITIAL_ORDERS
    assert db.ledger() == []


def test_same_request_id_twice_moves_money_once(binary, config_path, db, tmp_path):
    log = server_log(tmp_path)

    async def main():
        async with stdio_session(binary, config_path, db, log, "--role", "teller", "--role", "support") as session:
            args = {"from": 1, "to": 2, "cents": 250, "request_id": "dup-1"}
            first = await call(session, "transfer", args)
            second = await call(session, "transfer", args)
            assert first["status"] == second["status"] == "committed", (first, second)
            assert second["result"] == first["result"] == "moved 250 cents from account 1 to account 2"

            cancel_first = await call(session, "cancel_order", {"order_id": 7})
            cancel_second = await call(session, "cancel_order", {"order_id": 7})
            assert cancel_first["status"] == cancel_second["status"] == "committed", (cancel_first, cancel_second)
            assert cancel_second["result"] == cancel_first["result"] == "order 7 cancelled: 2500 cents back to account 1"

        # A new session (a new server process) still answers from the record.
        async with stdio_session(binary, config_path, db, log, "--role", "teller") as session:
            again = await call(session, "transfer", {"from": 1, "to": 2, "cents": 250, "request_id": "dup-1"})
            assert again["status"] == "committed" and again["result"] == "moved 250 cents from account 1 to account 2", again
            # Concurrent duplicates: one key, sent 4 times at once.
            args = {"from": 2, "to": 3, "cents": 40, "request_id": "dup-2"}
            answers = await asyncio.gather(*(call(session, "transfer", dict(args)) for _ in range(4)))
            committed = [a for a in answers if a["status"] == "committed"]
            assert committed, answers
            for a in committed:
                assert a["result"] == "moved 40 cents from account 2 to account 3", a

    run_async(main())
    assert db.balances() == {1: 10000 - 250 + 2500, 2: 10000 + 250 - 40, 3: 10040}
    assert db.ledger() == [("dup-1", 1, 2, 250), ("dup-2", 2, 3, 40)]
    orders = db.orders()
    assert orders[7] == (1, "cancelled", 2500), orders


def test_invalid_arguments_never_reach_the_database(binary, config_path, db, tmp_path):
    log = server_log(tmp_path)
    bad_calls = [
        ("transfer", {"from": 1, "to": 2, "cents": "x", "request_id": "bad-1"}),
        ("transfer", {"from": 1, "to": 2, "cents": 0, "request_id": "bad-2"}),
        ("transfer", {"from": 1, "to": 2, "cents": 1000001, "request_id": "bad-3"}),
        ("transfer", {"from": 1, "to": 2, "cents": 5, "request_id": "bad-4", "memo": "extra"}),
        ("transfer", {"from": 1, "to": 2, "cents": 5}),
        ("transfer", {"from": 1, "to": 2, "cents": 5, "request_id": ""}),
        ("transfer", {"from": 1, "to": 2, "cents": 5, "request_id": "x" * 65}),
        ("transfer", {"from": 1.5, "to": 2, "cents": 5, "request_id": "bad-8"}),
        ("transfer", {"from": "1", "to": 2, "cents": 5, "request_id": "bad-9"}),
        ("cancel_order", {"order_id": 0}),
        ("cancel_order", {"order_id": "7"}),
        ("cancel_order", {"order_id": None}),
        ("get_order", {}),
        ("drop_everything", {"order_id": 7}),
    ]

    async def main():
        async with stdio_session(binary, config_path, db, log, "--role", "teller", "--role", "support") as session:
            for name, arguments in bad_calls:
                error = await refused(session, name, arguments)
                assert error.code == INVALID_PARAMS, (name, arguments, error.code, error.message)
            # The session still works afterwards.
            ok = await call(session, "get_order", {"order_id": 8})
            assert ok["status"] == "committed", ok

    run_async(main())
    assert db.balances() == INITIAL_ACCOUNTS
    assert db.orders() == INITIAL_ORDERS
    assert db.ledger() == []
