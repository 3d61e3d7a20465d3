#!/usr/bin/env python3
"""Hot-rows sweep on PostgreSQL: every txretry-lab preset next to pgbench, one table.

The workload is the same on both sides: 4 rows, each transaction (REPEATABLE READ) reads a
random row and increments it; serialization failures are retried (pgbench: --max-tries).
Goodput = committed transactions per second. Usage:

    cargo build --release -p txretry-lab
    python3 scripts/pg-sweep.py --url postgres://postgres@127.0.0.1:5432/test --duration 10

Prints a Markdown table on stdout and writes the raw runs as JSON with --raw FILE. Each cell's
percentage compares it with the best goodput among the *other* cells of the sweep, never with
itself: the best cell shows more than 100% (its lead over the runner-up), and a sweep of one
cell has no comparison ("—"). Tests: python3 scripts/test_pg_sweep.py
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from urllib.parse import urlparse

PGBENCH_TABLE = "txretry_pgbench_hot"
PGBENCH_SCRIPT = f"""\\set id random(1, {{rows}})
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT counter FROM {PGBENCH_TABLE} WHERE id = :id;
UPDATE {PGBENCH_TABLE} SET counter = counter + 1 WHERE id = :id;
END;
"""


def psql(url, sql):
    subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-qc", sql], check=True)


def run_pgbench(url, clients, rows, duration):
    psql(url, f"DROP TABLE IF EXISTS {PGBENCH_TABLE}; "
              f"CREATE TABLE {PGBENCH_TABLE} (id int PRIMARY KEY, counter bigint NOT NULL); "
              f"INSERT INTO {PGBENCH_TABLE} SELECT g, 0 FROM generate_series(1, {rows}) g;")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(PGBENCH_SCRIPT.format(rows=rows))
        script = f.name
    u = urlparse(url)
    args = ["pgbench", "-n", "-M", "prepared", "--max-tries=1000",
            "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
            "-T", str(duration), "-f", script,
            "-h", u.hostname or "127.0.0.1", "-p", str(u.port or 5432),
            "-U", u.username or "postgres", (u.path or "/test").lstrip("/")]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    os.unlink(script)
    processed = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    retries = re.search(r"total number of retries: (\d+)", out)
    retries = int(retries.group(1)) if retries else 0
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))
    psql(url, f"DROP TABLE IF EXISTS {PGBENCH_TABLE}")
    return {"policy": "pgbench", "workers": clients, "committed": processed, "tps": tps,
            "retries_per_commit": retries / processed if processed else 0.0, "invariant_ok": True}


def percent_of_best_other(values):
    """Each value as a percentage of the largest of the *other* values.

    A cell is never compared with itself: the best cell shows how far it is ahead of the
    runner-up (more than 100%), every other cell its share of the best. Returns one entry per
    value, None where there is no comparison (a single value, or the others are all 0).
    """
    result = []
    for i, value in enumerate(values):
        others = values[:i] + values[i + 1:]
        best = max(others, default=0)
        result.append(100 * value / best if best > 0 else None)
    return result


def format_percent(percent):
    return "—" if percent is None else f"{percent:.0f}%"


def run_lab(lab, url, workers, rows, duration):
    out = subprocess.run(
        [lab, "--db", url, "--workload", "hot-rows", "--rows", str(rows),
         "--isolation", "repeatable-read", "--workers", str(workers),
         "--duration", f"{duration}s", "--policy", "all", "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("TXRETRY_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"))
    p.add_argument("--lab", default="target/release/txretry-lab")
    p.add_argument("--workers", default="1,4,8,16,32")
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--duration", type=int, default=10, help="seconds per run")
    p.add_argument("--raw", help="write every run as JSON to this file")
    a = p.parse_args()

    runs = []
    for w in [int(x) for x in a.workers.split(",")]:
        print(f"workers={w}: pgbench", file=sys.stderr)
        runs.append(run_pgbench(a.url, w, a.rows, a.duration))
        print(f"workers={w}: txretry-lab --policy all", file=sys.stderr)
        runs.extend(run_lab(a.lab, a.url, w, a.rows, a.duration))
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(runs, f, indent=1)

    percents = percent_of_best_other([r["tps"] for r in runs])
    policies = list(dict.fromkeys(r["policy"] for r in runs))
    workers = list(dict.fromkeys(r["workers"] for r in runs))
    by = {(r["policy"], r["workers"]): (r, pct) for r, pct in zip(runs, percents)}
    print("Goodput (commits/s) (percentage of the best goodput among the *other* cells of this "
          "sweep: the best cell shows its lead over the runner-up, above 100%), "
          "retries per commit.\n")
    print("| policy | " + " | ".join(f"{w} workers" for w in workers) + " |")
    print("|---|" + "---|" * len(workers))
    for pol in policies:
        cells = []
        for w in workers:
            cell = by.get((pol, w))
            if cell is None:
                cells.append("–")
                continue
            r, pct = cell
            ok = "" if r.get("invariant_ok", True) else " INVARIANT FAILED"
            cells.append(f"{r['tps']:.0f} ({format_percent(pct)}), {r['retries_per_commit']:.2f}{ok}")
        print(f"| {pol} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
