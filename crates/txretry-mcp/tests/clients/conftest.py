"""Fixtures for driving `txretry-mcp` with MCP clients written elsewhere.

The server binary comes from TXRETRY_MCP_BIN (tests/clients.rs passes the one cargo built).
Each test gets a fresh database per backend (SQLite file, a new Postgres database, a new
MariaDB database) loaded from examples/orders.sql, served with examples/orders.yaml plus an
`auth` section of bearer tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import sqlite3
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

CRATE = Path(__file__).resolve().parents[2]
EXAMPLES = CRATE / "examples"
ORDERS_YAML = EXAMPLES / "orders.yaml"
ORDERS_SQL = EXAMPLES / "orders.sql"

TELLER_TOKEN = "teller-token-" + "t" * 24
SUPPORT_TOKEN = "support-token-" + "s" * 24
TOKEN_ENV = {
    "TXRETRY_MCP_TEST_TELLER_TOKEN": TELLER_TOKEN,
    "TXRETRY_MCP_TEST_SUPPORT_TOKEN": SUPPORT_TOKEN,
}
AUTH_SECTION = """
# Added by tests/clients: bearer tokens for the HTTP callers.
auth:
  tokens:
    - { env: TXRETRY_MCP_TEST_TELLER_TOKEN, roles: [teller] }
    - { env: TXRETRY_MCP_TEST_SUPPORT_TOKEN, roles: [support], toolset: viewer }
"""

INITIAL_ACCOUNTS = {1: 10000, 2: 10000, 3: 10000}
INITIAL_ORDERS = {7: (1, "open", 2500), 8: (2, "open", 400), 9: (3, "shipped", 900)}

POSTGRES_URL = os.environ.get("TXRETRY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("TXRETRY_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
REQUIRE_DB = os.environ.get("TXRETRY_REQUIRE_DB", "").lower() in ("1", "true")

_serial = itertools.count()


def server_binary() -> str:
    binary = os.environ.get("TXRETRY_MCP_BIN")
    if not binary:
        pytest.fail("TXRETRY_MCP_BIN is not set: the path of the txretry-mcp binary (tests/clients.rs sets it)")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"TXRETRY_MCP_BIN={binary} is not an executable file")
    return binary


@pytest.fixture(scope="session")
def binary() -> str:
    return server_binary()


@pytest.fixture(scope="session")
def config_path(tmp_path_factory) -> Path:
    text = ORDERS_YAML.read_text()
    assert not re.search(r"^auth:", text, re.M), "orders.yaml grew an auth section; adapt AUTH_SECTION"
    path = tmp_path_factory.mktemp("config") / "orders-with-auth.yaml"
    path.write_text(text + AUTH_SECTION)
    return path


def run(cmd: list[str], *, input: str | None = None, env: dict | None = None) -> str:
    done = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=60, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd!r} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class Database:
    """One fresh database holding the tables of orders.sql."""

    kind: str
    url: str

    def query(self, sql: str) -> list[tuple[str, ...]]:
        raise NotImplementedError

    def drop(self) -> None:
        pass

    # What the tests read back, straight from the database (not through the server).
    def balances(self) -> dict[int, int]:
        return {int(a): int(c) for a, c in self.query("SELECT id, cents FROM accounts ORDER BY id")}

    def orders(self) -> dict[int, tuple[int, str, int]]:
        rows = self.query("SELECT id, account, status, cents FROM orders ORDER BY id")
        return {int(i): (int(a), s, int(c)) for i, a, s, c in rows}

    def ledger(self) -> list[tuple[str, int, int, int]]:
        rows = self.query("SELECT request_id, from_account, to_account, cents FROM ledger ORDER BY request_id")
        return [(r, int(f), int(t), int(c)) for r, f, t, c in rows]


class SqliteDatabase(Database):
    kind = "sqlite"

    def __init__(self, directory: Path):
        self.path = directory / f"orders-{os.getpid()}-{next(_serial)}.db"
        with contextlib.closing(sqlite3.connect(self.path)) as db:
            db.executescript(ORDERS_SQL.read_text())
            db.commit()
        self.url = f"sqlite://{self.path}"

    def query(self, sql: str) -> list[tuple[str, ...]]:
        with contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
            return [tuple(str(v) for v in row) for row in db.execute(sql).fetchall()]


def _fresh_name() -> str:
    return f"mcp_clients_{os.getpid()}_{next(_serial)}"


class PostgresDatabase(Database):
    kind = "postgres"

    def __init__(self):
        base = urllib.parse.urlsplit(POSTGRES_URL)
        self.admin = POSTGRES_URL
        self.name = _fresh_name()
        run(["psql", self.admin, "-v", "ON_ERROR_STOP=1", "-qc", f"CREATE DATABASE {self.name}"])
        self.url = urllib.parse.urlunsplit(base._replace(path="/" + self.name))
        run(["psql", self.url, "-v", "ON_ERROR_STOP=1", "-q", "-f", str(ORDERS_SQL)])

    def query(self, sql: str) -> list[tuple[str, ...]]:
        out = run(["psql", self.url, "-v", "ON_ERROR_STOP=1", "-qAtF", "\t", "-c", sql])
        return [tuple(line.split("\t")) for line in out.splitlines() if line]

    def drop(self) -> None:
        run(["psql", self.admin, "-qc", f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)"])


class MariadbDatabase(Database):
    kind = "mariadb"

    def __init__(self):
        base = urllib.parse.urlsplit(MYSQL_URL)
        self.base = base
        self.name = _fresh_name()
        self.cli(None, f"CREATE DATABASE {self.name}")
        self.url = urllib.parse.urlunsplit(base._replace(path="/" + self.name))
        run(self.args(self.name), input=ORDERS_SQL.read_text())

    def args(self, database: str | None) -> list[str]:
        b = self.base
        args = ["mariadb", "-h", b.hostname or "127.0.0.1", "-P", str(b.port or 3306), "-u", urllib.parse.unquote(b.username or "root")]
        if b.password:
            args.append("-p" + urllib.parse.unquote(b.password))
        args += ["--batch", "--skip-column-names"]
        if database:
            args.append(database)
        return args

    def cli(self, database: str | None, sql: str) -> str:
        return run(self.args(database) + ["-e", sql])

    def query(self, sql: str) -> list[tuple[str, ...]]:
        return [tuple(line.split("\t")) for line in self.cli(self.name, sql).splitlines() if line]

    def drop(self) -> None:
        self.cli(None, f"DROP DATABASE IF EXISTS {self.name}")


def _server_answers(kind: str) -> str | None:
    """None when the backend's server answers, else why not."""
    try:
        if kind == "postgres":
            run(["psql", POSTGRES_URL, "-qAtc", "SELECT 1"])
        elif kind == "mariadb":
            b = urllib.parse.urlsplit(MYSQL_URL)
            args = ["mariadb", "-h", b.hostname or "127.0.0.1", "-P", str(b.port or 3306), "-u", b.username or "root"]
            if b.password:
                args.append("-p" + urllib.parse.unquote(b.password))
            run(args + ["-e", "SELECT 1"])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as why:
        return str(why)
    return None


BACKENDS = ["sqlite", "postgres", "mariadb"]


@pytest.fixture(params=BACKENDS)
def db(request, tmp_path):
    kind = request.param
    why = _server_answers(kind)
    if why is not None:
        if REQUIRE_DB:
            pytest.fail(f"{kind} does not answer and TXRETRY_REQUIRE_DB=1: {why}")
        pytest.skip(f"{kind} does not answer: {why}")
    database = {"sqlite": lambda: SqliteDatabase(tmp_path), "postgres": PostgresDatabase, "mariadb": MariadbDatabase}[kind]()
    try:
        yield database
    finally:
        database.drop()


def server_env(db: Database) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TOKEN_ENV)
    env["ORDERS_DATABASE_URL"] = db.url
    env.setdefault("RUST_BACKTRACE", "1")
    return env


class HttpServer:
    def __init__(self, binary: str, config: Path, db: Database, log: Path):
        self.log = log
        self.errors = open(log, "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--config", str(config), "--http", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=self.errors, text=True, env=server_env(db),
        )
        line = self.process.stdout.readline()
        match = re.match(r"listening on (http://\S+/mcp)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"no 'listening on' line, got {line!r}; stderr: {log.read_text()}")
        self.url = match.group(1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.errors.close()


@pytest.fixture
def http_server(binary, config_path, db, tmp_path):
    server = HttpServer(binary, config_path, db, tmp_path / "http-server.log")
    try:
        yield server
    finally:
        server.stop()


def run_async(coroutine, timeout: float = 120):
    """Runs one test's client code, failing it instead of hanging."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))
