#!/usr/bin/python3
"""What a client sees during the faults of docker/ha/cluster (the source of ERROR-SHAPES.md).

Run as root on a cluster that is up, with synchronous_mode off:
    /usr/bin/python3 docker/ha/verify-shapes.py [switchover|readonly|sync|failover|postmaster]...
Uses Debian's psycopg2 (libpq). Leaves the cluster up, healthy, synchronous_mode off.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "cluster")
PROXY = 5440


def sh(*args):
    return subprocess.run([CLUSTER, *args], check=True, capture_output=True, text=True).stdout.strip()


def leader():
    name, port = sh("leader").split()
    return name, int(port)


def connect(port, db="test"):
    c = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname=db, connect_timeout=2,
                         application_name="verify-shapes")
    return c


def shape(e):
    """SQLSTATE, severity, first line of the message, of a psycopg2 error."""
    diag = getattr(e, "diag", None)
    sev = diag.severity if diag else None
    msg = (diag.message_primary if diag and diag.message_primary else str(e)).strip().replace("\n", " | ")
    return f"{type(e).__name__} sqlstate={e.pgcode} severity={sev} message={msg!r}"


class Wire:
    """A bare protocol-3 client (trust auth, simple query): what the server really sends,
    independent of a driver's error mapping (psycopg2 2.9 drops a FATAL that precedes EOF)."""

    def __init__(self, port, db="test"):
        import socket
        import struct
        self.struct = struct
        self.s = socket.create_connection(("127.0.0.1", port), timeout=2)
        params = b"user\0postgres\0database\0" + db.encode() + b"\0application_name\0verify-wire\0\0"
        self.s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        self.startup = []
        try:
            for kind, body in self.messages():
                if kind == b"E":
                    self.startup.append("ErrorResponse " + self.fields(body))
                if kind == b"Z":
                    break
        except EOFError:
            raise ConnectionError("; ".join(self.startup + ["EOF"])) from None
        self.s.settimeout(40)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            b = self.s.recv(n - len(buf))
            if not b:
                raise EOFError("EOF")
            buf += b
        return buf

    def messages(self):
        while True:
            head = self.recv_exact(5)
            kind, length = head[:1], self.struct.unpack("!i", head[1:])[0]
            yield kind, self.recv_exact(length - 4)

    @staticmethod
    def fields(body):
        f = {}
        for part in body.split(b"\0"):
            if part:
                f[chr(part[0])] = part[1:].decode()
        return f"{f.get('V')} {f.get('C')} {f.get('M')!r}" + (f" DETAIL {f['D']!r}" if "D" in f else "")

    def until_ready(self):
        out = []
        for kind, body in self.messages():
            if kind in (b"E", b"N"):
                out.append(("ErrorResponse " if kind == b"E" else "NoticeResponse ") + self.fields(body))
            if kind == b"Z":
                return out

    def query(self, sql):
        """Everything the server sends back, until ReadyForQuery or the end of the connection."""
        out = []
        try:
            self.s.sendall(b"Q" + self.struct.pack("!i", 4 + len(sql.encode()) + 1) + sql.encode() + b"\0")
            for kind, body in self.messages():
                if kind in (b"E", b"N"):
                    out.append(("ErrorResponse " if kind == b"E" else "NoticeResponse ") + self.fields(body))
                elif kind == b"D":
                    n = self.struct.unpack("!i", body[2:6])[0]
                    out.append("DataRow " + body[6:6 + n].decode())
                elif kind == b"C":
                    out.append("CommandComplete " + body.rstrip(b"\0").decode())
                elif kind == b"Z":
                    out.append("ReadyForQuery")
                    return out
        except (EOFError, OSError) as e:
            out.append(f"connection ended: {type(e).__name__} {e}")
        return out


def ms():
    return int(time.time() * 1000)


def report(title, what):
    print(f"[{title}] {what}", flush=True)


def setup():
    c = connect(PROXY)
    c.autocommit = True
    c.cursor().execute("CREATE TABLE IF NOT EXISTS shapes_t (id serial PRIMARY KEY, v text)")
    c.close()


def connect_loop(port, stop, seen, t0):
    """New connections to PORT every 20 ms (bare protocol); the first time of each outcome."""
    while not stop.is_set():
        try:
            w = Wire(port)
            out = "connected, pg_is_in_recovery=" + w.query("SELECT pg_is_in_recovery()")[0].split()[1]
            w.s.close()
        except (OSError, EOFError, IndexError) as e:
            out = f"{type(e).__name__}: {e}"
        if out not in seen:
            seen[out] = ms() - t0
        time.sleep(0.02)


def scenario_switchover():
    name, port = leader()
    # (a) idle in transaction on the leader, directly and through the proxy
    sessions = {}
    for via, p in (("direct", port), ("proxy", PROXY)):
        c = connect(p)
        cur = c.cursor()
        cur.execute("INSERT INTO shapes_t (v) VALUES ('in-flight') RETURNING id")
        sessions[via] = c
    wires = {}
    for via, p in (("direct", port), ("proxy", PROXY)):
        w = Wire(p)
        w.query("BEGIN; INSERT INTO shapes_t (v) VALUES ('in-flight')")
        wires[via] = w
    wire_busy = {}
    wb = Wire(port)
    # (b) a statement running on the leader during the switchover
    busy = connect(port)
    busy_result = {}

    def run_busy():
        try:
            busy.cursor().execute("SELECT pg_sleep(30)")
            busy_result["r"] = "returned"
        except psycopg2.Error as e:
            busy_result["r"] = f"after {ms() - t0} ms: " + shape(e)

    stop = threading.Event()
    seen_old, seen_proxy = {}, {}
    t0 = ms()
    threads = [threading.Thread(target=run_busy),
               threading.Thread(target=lambda: wire_busy.setdefault("r", wb.query("SELECT pg_sleep(30)"))),
               threading.Thread(target=connect_loop, args=(port, stop, seen_old, t0)),
               threading.Thread(target=connect_loop, args=(PROXY, stop, seen_proxy, t0))]
    for t in threads:
        t.start()
    time.sleep(0.3)
    out = sh("switchover")
    stop.set()
    for t in threads:
        t.join()
    report("switchover", out)
    report("switchover: running statement on the old leader (psycopg2)", busy_result.get("r"))
    report("switchover: running statement on the old leader (wire)", wire_busy.get("r"))
    for via, w in wires.items():
        report(f"switchover: idle-in-transaction session ({via}), next statement (wire)", w.query("SELECT 1"))
    for via, c in sessions.items():
        try:
            c.cursor().execute("INSERT INTO shapes_t (v) VALUES ('after')")
            c.commit()
            report(f"switchover: idle-in-transaction session ({via}), next statement", "succeeded")
        except psycopg2.Error as e:
            report(f"switchover: idle-in-transaction session ({via}), next statement", shape(e))
    for out, at in sorted(seen_old.items(), key=lambda kv: kv[1]):
        report(f"switchover: new connections to old leader {name}:{port}, first at +{at} ms", out)
    for out, at in sorted(seen_proxy.items(), key=lambda kv: kv[1]):
        report(f"switchover: new connections through the proxy, first at +{at} ms", out)
    return name, port


def scenario_readonly():
    name, port = leader()
    for n in ("pg1", "pg2", "pg3"):
        if n == name:
            continue
        p = 5440 + int(n[2])
        c = connect(p)
        try:
            c.cursor().execute("INSERT INTO shapes_t (v) VALUES ('on a standby')")
            report(f"readonly: INSERT on standby {n}", "succeeded?!")
        except psycopg2.Error as e:
            report(f"readonly: INSERT on standby {n}", shape(e))
        c.rollback()
        report(f"readonly: INSERT on standby {n} (wire)", Wire(p).query("INSERT INTO shapes_t (v) VALUES ('x')"))
        try:
            c.cursor().execute("SELECT 1")
            report(f"readonly: same session afterwards", "usable (SELECT 1 works after ROLLBACK)")
        except psycopg2.Error as e:
            report(f"readonly: same session afterwards", shape(e))
        c.close()
    # A session on the old leader across a switchover: it is cut (FATAL above); reconnecting to
    # the same host now lands on a standby.
    old, old_port = leader()
    sh("switchover")
    c = connect(old_port)
    try:
        c.cursor().execute("INSERT INTO shapes_t (v) VALUES ('on the demoted primary')")
        report(f"readonly: INSERT on the demoted old primary {old}", "succeeded?!")
    except psycopg2.Error as e:
        report(f"readonly: INSERT on the demoted old primary {old}", shape(e))
    c.close()


def walreceiver_pid(node):
    port = 5440 + int(node[2])
    c = connect(port, "postgres")
    cur = c.cursor()
    cur.execute("SELECT pid FROM pg_stat_get_wal_receiver() WHERE pid IS NOT NULL")
    pid = cur.fetchone()[0]
    c.close()
    return pid


def scenario_sync():
    out = sh("sync", "on")
    print(out, flush=True)
    name, port = leader()
    standby = out.split("sync_standby=")[1]
    for how in ("pg_cancel_backend", "pg_terminate_backend"):
        wr = walreceiver_pid(standby)
        # The sync standby stops acknowledging: its WAL receiver is frozen (SIGSTOP). Patroni
        # still sees it streaming (until wal_sender_timeout), so it stays the sync standby.
        os.kill(wr, signal.SIGSTOP)
        try:
            w = Wire(port)
            bpid = int(w.query("SELECT pg_backend_pid()")[0].split()[1])
            w.query("BEGIN; INSERT INTO shapes_t (v) VALUES ('%s')" % how)
            res = {}

            def commit():
                t = ms()
                r = w.query("COMMIT")
                res["r"] = f"after {ms() - t} ms: {r}"

            th = threading.Thread(target=commit)
            th.start()
            time.sleep(1.0)
            admin = connect(port)
            admin.autocommit = True
            acur = admin.cursor()
            acur.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (bpid,))
            report("sync: the committing backend waits on", acur.fetchone()[0])
            acur.execute(f"SELECT {how}(%s)", (bpid,))
            th.join(10)
            report(f"sync: COMMIT waiting for the frozen sync standby, then {how} (wire)", res.get("r", "still waiting"))
            acur.execute("SELECT count(*) FROM shapes_t WHERE v = %s", (how,))
            report(f"sync: {how}: rows committed on the primary", acur.fetchone()[0])
            if how == "pg_terminate_backend":
                report("sync: pg_terminate_backend: the session afterwards (wire)", w.query("SELECT 1"))
            admin.close()
        finally:
            os.kill(wr, signal.SIGCONT)
        time.sleep(0.5)
    # The same through psycopg2, for the driver's view of the WARNING.
    wr = walreceiver_pid(standby)
    os.kill(wr, signal.SIGSTOP)
    try:
        c = connect(port)
        cur = c.cursor()
        cur.execute("SELECT pg_backend_pid()")
        bpid = cur.fetchone()[0]
        cur.execute("INSERT INTO shapes_t (v) VALUES ('psycopg2')")
        th = threading.Thread(target=c.commit)
        th.start()
        time.sleep(1.0)
        admin = connect(port)
        admin.autocommit = True
        admin.cursor().execute("SELECT pg_cancel_backend(%s)", (bpid,))
        th.join(10)
        report("sync: pg_cancel_backend (psycopg2): commit() returned; notices", [n.strip() for n in c.notices])
        admin.close()
    finally:
        os.kill(wr, signal.SIGCONT)
    print(sh("sync", "off"), flush=True)


def scenario_crash(postmaster_only):
    name, port = leader()
    tag = "postmaster kill -9" if postmaster_only else "node crash (kill -9 Patroni + all PostgreSQL processes)"
    sessions = {}
    for via, p in (("direct", port), ("proxy", PROXY)):
        c = connect(p)
        c.cursor().execute("INSERT INTO shapes_t (v) VALUES ('in-flight') RETURNING id")
        sessions[via] = c
    wires = {}
    for via, p in (("direct", port), ("proxy", PROXY)):
        w = Wire(p)
        w.query("BEGIN; INSERT INTO shapes_t (v) VALUES ('in-flight')")
        wires[via] = w
    wire_busy = {}
    wb = Wire(PROXY)
    busy = connect(PROXY)
    busy_result = {}
    t0 = ms()

    def run_busy():
        try:
            busy.cursor().execute("SELECT pg_sleep(30)")
            busy_result["r"] = "returned"
        except psycopg2.Error as e:
            busy_result["r"] = f"after {ms() - t0} ms: " + shape(e)

    stop = threading.Event()
    seen_proxy, seen_old = {}, {}
    threads = [threading.Thread(target=run_busy),
               threading.Thread(target=lambda: wire_busy.setdefault("r", wb.query("SELECT pg_sleep(30)"))),
               threading.Thread(target=connect_loop, args=(PROXY, stop, seen_proxy, t0)),
               threading.Thread(target=connect_loop, args=(port, stop, seen_old, t0))]
    for t in threads:
        t.start()
    time.sleep(0.3)
    out = sh("failover", *(["--postmaster-only"] if postmaster_only else []))
    stop.set()
    for t in threads:
        t.join()
    report(tag, out)
    report(f"{tag}: running statement through the proxy (psycopg2)", busy_result.get("r"))
    report(f"{tag}: running statement through the proxy (wire)", wire_busy.get("r"))
    for via, w in wires.items():
        report(f"{tag}: idle-in-transaction session ({via}), next statement (wire)", w.query("SELECT 1"))
    for via, c in sessions.items():
        try:
            c.cursor().execute("SELECT 1")
            report(f"{tag}: idle-in-transaction session ({via}), next statement", "succeeded?!")
        except psycopg2.Error as e:
            report(f"{tag}: idle-in-transaction session ({via}), next statement", shape(e))
    for out, at in sorted(seen_old.items(), key=lambda kv: kv[1]):
        report(f"{tag}: new connections to {name}:{port}, first at +{at} ms", out)
    for out, at in sorted(seen_proxy.items(), key=lambda kv: kv[1]):
        report(f"{tag}: new connections through the proxy, first at +{at} ms", out)


def main():
    setup()
    which = sys.argv[1:] or ["switchover", "readonly", "sync", "failover", "postmaster"]
    for w in which:
        {"switchover": scenario_switchover, "readonly": scenario_readonly, "sync": scenario_sync,
         "failover": lambda: scenario_crash(False), "postmaster": lambda: scenario_crash(True)}[w]()
    c = connect(PROXY)
    c.autocommit = True
    c.cursor().execute("DROP TABLE IF EXISTS shapes_t")
    c.close()


if __name__ == "__main__":
    main()
