#!/usr/bin/env python3
"""Admission across processes (issue 11), measured with txretry-bench run --processes (and
txretry-lab for the single-process cells).

For each server and workload, every configuration below runs REPS times, round-robin (one
round runs every configuration once, so slow spells of a shared machine spread over all of
them), each for DURATION:

  - 4 processes x 8 workers: database (per-key admission + database locks), adaptive
    (the database locks only for keys that collided in the last 10 s), contention
    (per-key admission in each process only), exp-jitter (the same retries, no admission),
    default, none;
  - 1 process: contention at 8, 16 and 32 workers (single-process per-key admission; the
    best of the three is "its best worker count").

Then, with no contention (hot-rows on 100 000 rows, so keys practically never meet;
1 process x 8 workers): database and adaptive against exp-jitter (the same retry policy
without admission), as a percentage of exp-jitter's median.

Prints Markdown tables: goodput (commits/s) median and min-max, retries per commit median
and min-max, and the median's percentage of the best median among the *other*
configurations of the same table (never itself). Usage:

    cargo build --release -p txretry-lab -p txretry-bench
    python3 crates/txretry-bench/scripts/multi-process.py --reps 3 --duration 5s \
        --postgres postgres://postgres@127.0.0.1:5432/test \
        --mysql mysql://root@127.0.0.1:3306/test --raw /tmp/multi-process.json
"""

import argparse
import json
import statistics
import subprocess
import sys

LAB = ["target/release/txretry-lab"]
BENCH_RUN = ["target/release/txretry-bench", "run"]

WORKLOADS = {
    "hot-rows": ["--workload", "hot-rows", "--rows", "4", "--isolation", "repeatable-read"],
    "transfer": ["--workload", "transfer", "--rows", "8"],
}

CONTENDED = [
    ("database, 4 x 8", 4, 8, "database"),
    ("adaptive, 4 x 8", 4, 8, "adaptive"),
    ("contention (per process), 4 x 8", 4, 8, "contention"),
    ("exp-jitter (no admission), 4 x 8", 4, 8, "exp-jitter"),
    ("default, 4 x 8", 4, 8, "default"),
    ("none, 4 x 8", 4, 8, "none"),
    ("contention, 1 x 8", 1, 8, "contention"),
    ("contention, 1 x 16", 1, 16, "contention"),
    ("contention, 1 x 32", 1, 32, "contention"),
]

UNCONTENDED = [
    ("database, 1 x 8", 1, 8, "database"),
    ("adaptive, 1 x 8", 1, 8, "adaptive"),
    ("exp-jitter (no admission), 1 x 8", 1, 8, "exp-jitter"),
]
NO_CONTENTION = ["--workload", "hot-rows", "--rows", "100000"]


def run(url, args, processes, workers, policy, duration):
    # One process: the lab itself; several: the bench's parent and its children.
    place = LAB if processes == 1 else [*BENCH_RUN, "--processes", str(processes)]
    command = [*place, "--db", url, *args, "--workers", str(workers), "--policy", policy,
               "--duration", duration, "--json"]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(command)} exited {out.returncode}:\n{out.stderr}")
    r = json.loads(out.stdout)[0]
    if not r["invariant_ok"]:
        sys.exit(f"invariant FAILED: {r}")
    return r


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def table(title, cells, results, baseline=None):
    """With `baseline` (a configuration's name), the percentage column is of that
    configuration's median instead of the best other one."""
    medians = {name: statistics.median(r["tps"] for r in results[name]) for name, *_ in cells}
    print(f"\n{title}\n")
    column = f"% of {baseline}" if baseline else "% of best other"
    print(f"| configuration | goodput, commits/s: median (min–max) | retries/commit: median (min–max) | {column} | failed (total) |")
    print("|---|---:|---:|---:|---:|")
    for name, *_ in cells:
        runs = results[name]
        others = [medians[baseline]] if baseline else [m for n, m in medians.items() if n != name]
        pct = f"{100 * medians[name] / max(others):.0f}%" if others and max(others) > 0 else "—"
        print(f"| {name} | {spread([r['tps'] for r in runs], lambda v: f'{v:.0f}')} | "
              f"{spread([r['retries_per_commit'] or 0.0 for r in runs], lambda v: f'{v:.2f}')} | "
              f"{pct} | {sum(r['failed'] for r in runs)} |")
    return medians


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--postgres")
    p.add_argument("--mysql")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", default="5s")
    p.add_argument("--raw")
    p.add_argument("--workload", choices=sorted(WORKLOADS), help="only this workload")
    p.add_argument("--cells", nargs="+", help="only these configurations (by name)")
    p.add_argument("--skip-no-contention", action="store_true")
    a = p.parse_args()
    contended = [c for c in CONTENDED if not a.cells or c[0] in a.cells]
    workloads = {w: args for w, args in WORKLOADS.items() if not a.workload or w == a.workload}
    servers = [(name, url) for name, url in (("PostgreSQL", a.postgres), ("MariaDB", a.mysql)) if url]
    raw = []
    for server, url in servers:
        for workload, args in workloads.items():
            results = {name: [] for name, *_ in contended}
            for rep in range(a.reps):
                for name, processes, workers, policy in contended:
                    r = run(url, args, processes, workers, policy, a.duration)
                    results[name].append(r)
                    raw.append({"server": server, "workload": workload, "cell": name, "rep": rep, **r})
                    print(f"{server} {workload} {name} #{rep + 1}: {r['tps']} tx/s, "
                          f"{r['retries_per_commit']} retries/commit", file=sys.stderr)
            table(f"{server}, {workload} ({' '.join(args)}), {a.reps} runs of {a.duration} per cell",
                  contended, results)
        if a.skip_no_contention:
            continue
        results = {name: [] for name, *_ in UNCONTENDED}
        for rep in range(a.reps):
            for name, processes, workers, policy in UNCONTENDED:
                r = run(url, NO_CONTENTION, processes, workers, policy, a.duration)
                results[name].append(r)
                raw.append({"server": server, "workload": "no-contention", "cell": name, "rep": rep, **r})
                print(f"{server} no-contention {name} #{rep + 1}: {r['tps']} tx/s", file=sys.stderr)
        table(f"{server}, no contention ({' '.join(NO_CONTENTION)}), {a.reps} runs of {a.duration} per cell",
              UNCONTENDED, results, baseline=UNCONTENDED[-1][0])
        sys.stdout.flush()
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(raw, f)


if __name__ == "__main__":
    main()
