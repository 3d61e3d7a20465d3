#!/usr/bin/env python3
"""Summarises `txretry-bench run --fault … --json` runs (BENCHMARKS.md, "Postgres failover").

Each argument is NAME=FILE: a JSON array such a run printed. For every run (a policy) in it,
one Markdown row: the faults, the write outage the application saw (fault -> first commit
on the new primary), the cluster's own promotion time (fault -> the script's probe write
through the proxy took the new leader), what the application added (their difference, per
fault), the first failure the application saw, and the run's totals (committed,
ambiguous and how many of those landed, failed, lost, doubled). Times: median and range
(min-max) over the faults, in ms; a fault with no commit on the new primary before the
next one counts as `missing`. Usage:

    python3 crates/txretry-bench/scripts/failover-summary.py switchover=/tmp/ha-bench/switchover.json
"""

import json
import statistics
import sys


def spread(values):
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values)}–{max(values)})"


def row(name, run):
    faults = [f for f in run.get("faults", []) if f.get("error") is None]
    errors = len(run.get("faults", [])) - len(faults)
    app = [f["first_commit_on_new_primary_ms"] for f in faults
           if f["first_commit_on_new_primary_ms"] is not None]
    cluster = [f["cluster_writable_ms"] for f in faults]
    extra = [f["extra_ms"] for f in faults if f["extra_ms"] is not None]
    first = [f["first_failure_ms"] for f in faults if f["first_failure_ms"] is not None]
    missing = len(faults) - len(app)
    h = run.get("history") or {}
    retries = {}
    for f in faults:
        for kind, n in f["retries_by_kind"].items():
            retries[kind] = retries.get(kind, 0) + n
    failed = run["failed_by_kind"]
    cells = [
        name,
        run["policy"],
        f"{len(faults)}" + (f" ({errors} failed)" if errors else ""),
        spread(app) + (f", {missing} missing" if missing else ""),
        spread(cluster),
        spread(extra),
        spread(first),
        str(run["committed"]),
        f"{h.get('ambiguous', 0)} ({h.get('ambiguous_landed', 0)} landed)",
        str(run["failed"]) + ("" if not failed else " " + " ".join(f"{k}:{v}" for k, v in sorted(failed.items()))),
        str(h.get("lost", "?")),
        str(h.get("doubled", "?")),
        " ".join(f"{k}:{v}" for k, v in sorted(retries.items())) or "-",
    ]
    return "| " + " | ".join(cells) + " |"


def main(args):
    print("| series | policy | faults | app write outage ms | cluster promotion ms | app adds ms "
          "| first failure ms | committed | ambiguous | failed | lost | doubled | retries in the faults |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
    for arg in args:
        name, _, path = arg.partition("=")
        with open(path) as f:
            for run in json.load(f):
                print(row(name, run))


if __name__ == "__main__":
    main(sys.argv[1:])
