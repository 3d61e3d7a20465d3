"""txretry-mcp driven by the MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`).

TXRETRY_MCP_INSPECTOR names the inspector: its `mcp-inspector` executable, or the npm prefix
it was installed into (`npm install --prefix DIR @modelcontextprotocol/inspector`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import INITIAL_ORDERS, SUPPORT_TOKEN, TELLER_TOKEN, server_env


def inspector() -> str:
    named = os.environ.get("TXRETRY_MCP_INSPECTOR")
    if not named:
        if os.environ.get("TXRETRY_REQUIRE_CLIENTS", "").lower() in ("1", "true"):
            pytest.fail("TXRETRY_MCP_INSPECTOR is not set and TXRETRY_REQUIRE_CLIENTS=1")
        pytest.skip("TXRETRY_MCP_INSPECTOR is not set: the MCP Inspector CLI checks are skipped")
    path = Path(named)
    if path.is_dir():
        path = path / "node_modules" / ".bin" / "mcp-inspector"
    if not os.access(path, os.X_OK):
        pytest.fail(f"TXRETRY_MCP_INSPECTOR={named}: no executable mcp-inspector at {path}")
    return str(path)


@pytest.fixture(scope="module")
def inspector_bin() -> str:
    return inspector()


def inspect(inspector_bin: str, target: list[str], method: list[str], env: dict) -> tuple[int, dict | None, str]:
    """Runs `mcp-inspector --cli TARGET... --method ...`; its exit code, its JSON answer, its output.

    The server's own `--config` would be taken by the inspector's launcher, which has a
    `--config` flag of its own: the server is given `-c` instead."""
    done = subprocess.run(
        [inspector_bin, "--cli", *target, *method],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    answer = None
    start = done.stdout.find("{")
    if start >= 0:
        try:
            answer = json.loads(done.stdout[start:])
        except json.JSONDecodeError:
            answer = None
    return done.returncode, answer, output


@pytest.fixture
def sqlite_db(tmp_path):
    from conftest import SqliteDatabase

    return SqliteDatabase(tmp_path)


def stdio_target(binary: str, config: Path, *flags: str) -> list[str]:
    return [binary, "serve", "-c", str(config), *flags]


def test_inspector_stdio(inspector_bin, binary, config_path, sqlite_db):
    db = sqlite_db
    env = server_env(db)

    code, answer, output = inspect(inspector_bin, stdio_target(binary, config_path, "--role", "support"), ["--method", "tools/list"], env)
    assert code == 0 and answer, output
    tools = {tool["name"]: tool for tool in answer["tools"]}
    assert set(tools) == {"get_order", "cancel_order"}, output
    assert tools["cancel_order"]["inputSchema"]["properties"]["order_id"]["type"] == "integer"
    assert tools["get_order"]["outputSchema"]["type"] == "object"
    assert tools["get_order"]["annotations"]["readOnlyHint"] is True

    code, answer, output = inspect(
        inspector_bin, stdio_target(binary, config_path),
        ["--method", "tools/call", "--tool-name", "get_order", "--tool-arg", "order_id=7"], env,
    )
    assert code == 0 and answer, output
    assert answer.get("isError") is False, answer
    assert answer["structuredContent"]["status"] == "committed", answer
    assert answer["structuredContent"]["result"] == {"id": 7, "account": 1, "status": "open", "cents": 2500}, answer
    assert json.loads(answer["content"][0]["text"]) == answer["structuredContent"], answer

    code, answer, output = inspect(
        inspector_bin, stdio_target(binary, config_path),
        ["--method", "tools/call", "--tool-name", "get_order", "--tool-arg", "order_id=99"], env,
    )
    assert code == 0 and answer, output
    assert answer["isError"] is True and answer["structuredContent"]["status"] == "business_error", answer

    # Not offered without the role: a JSON-RPC error, the inspector exits non-zero.
    code, answer, output = inspect(
        inspector_bin, stdio_target(binary, config_path, "--role", "support"),
        ["--method", "tools/call", "--tool-name", "transfer", "--tool-arg", "from=1", "to=2", "cents=5", "request_id=insp-0"], env,
    )
    assert code != 0 and "-32602" in output, output

    transfer = ["--method", "tools/call", "--tool-name", "transfer", "--tool-arg", "from=1", "to=2", "cents=5", "request_id=insp-1"]
    for second in (False, True):  # the second answered from the record: the money moves once
        code, answer, output = inspect(inspector_bin, stdio_target(binary, config_path, "--role", "teller"), transfer, env)
        assert code == 0 and answer, output
        assert answer["structuredContent"]["status"] == "committed", answer
        assert answer["structuredContent"]["result"] == "moved 5 cents from account 1 to account 2", answer
        assert answer["structuredContent"].get("replayed") == (True if second else None), answer

    # Out of range: refused before the database.
    code, answer, output = inspect(
        inspector_bin, stdio_target(binary, config_path, "--role", "teller"),
        ["--method", "tools/call", "--tool-name", "transfer", "--tool-arg", "from=1", "to=2", "cents=0", "request_id=insp-2"], env,
    )
    assert code != 0 and "-32602" in output, output

    assert db.balances() == {1: 9995, 2: 10005, 3: 10000}
    assert db.ledger() == [("insp-1", 1, 2, 5)]
    assert db.orders() == INITIAL_ORDERS


def test_inspector_http_tokens(inspector_bin, binary, config_path, sqlite_db, tmp_path):
    from conftest import HttpServer

    db = sqlite_db
    server = HttpServer(binary, config_path, db, tmp_path / "http-server.log")
    try:
        env = dict(os.environ)
        target = [server.url, "--transport", "http"]

        code, answer, output = inspect(
            inspector_bin, target, ["--method", "tools/list", "--header", f"Authorization: Bearer {TELLER_TOKEN}"], env,
        )
        assert code == 0 and answer, output
        assert {tool["name"] for tool in answer["tools"]} == {"get_order", "transfer"}, output

        code, answer, output = inspect(
            inspector_bin, target, ["--method", "tools/list", "--header", f"Authorization: Bearer {SUPPORT_TOKEN}"], env,
        )
        assert code == 0 and answer, output
        assert {tool["name"] for tool in answer["tools"]} == {"get_order"}, output

        code, answer, output = inspect(
            inspector_bin, target,
            ["--method", "tools/call", "--tool-name", "transfer", "--tool-arg", "from=2", "to=3", "cents=33", "request_id=insp-http-1",
             "--header", f"Authorization: Bearer {TELLER_TOKEN}"], env,
        )
        assert code == 0 and answer, output
        assert answer["structuredContent"]["status"] == "committed", answer

        code, answer, output = inspect(inspector_bin, target, ["--method", "tools/list"], env)
        assert code == 0 and answer is not None, output
        assert answer["tools"] == [], output

        code, answer, output = inspect(
            inspector_bin, target,
            ["--method", "tools/call", "--tool-name", "get_order", "--tool-arg", "order_id=7",
             "--header", "Authorization: Bearer wrong-token-0123456789abcdef"], env,
        )
        assert code != 0 and "-32602" in output, output
    finally:
        server.stop()

    assert db.balances() == {1: 10000, 2: 9967, 3: 10033}
    assert db.ledger() == [("insp-http-1", 2, 3, 33)]
