#!/bin/sh
# What an advisory lock costs the server without contention, with no txretry involved:
# pgbench runs the same single-row transaction with and without the statements
# Admission::in_database adds, round-robin, REPS times each (BENCHMARKS.md, section 4).
# Usage: run.sh [REPS] [SECONDS]; PGHOST, PGPORT, PGUSER and PGDATABASE pick the server.
# Creates pgbench's own tables (pgbench -i) in that database.
set -eu
reps=${1:-3}
seconds=${2:-10}
here=$(dirname "$0")
pgbench -i -q -s 1 >/dev/null 2>&1
for rep in $(seq "$reps"); do
    for script in plain select-1 try-lock wait-lock; do
        tps=$(pgbench -n -M simple -c 8 -j 2 -T "$seconds" -f "$here/$script.sql" 2>/dev/null |
            sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        echo "$script #$rep: $tps tx/s"
    done
done
