#!/usr/bin/env bash
# Drain throughput of the run queue (docs/fleet.md) on the CPU path: a throw-away PostgreSQL server, RUNS queued
# runs of the CPU reference (one round, one timed call of a small decode workload), drained by 1, 2 and 4
# `kindex worker` processes on this machine, each count on a fresh database. Prints runs/s per worker count, and
# per claimed run where its time goes (the workers log it): the run itself, starting/ending the runner, closing it.
#   benchmarks/cpu/queue_drain.sh [build/bin/kindex] [RUNS]
set -euo pipefail
KINDEX=$(realpath "${1:-build/bin/kindex}")
RUNS=${2:-200}
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
DIR=$(mktemp -d "${TMPDIR:-/tmp}/kindex-queue-drain-XXXXXX")
AS=()
if [ "$(id -u)" = 0 ]; then chown postgres "$DIR"; AS=(runuser -u postgres --); fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${AS[@]}" "$BIN/initdb" -A trust -U postgres --locale=C -E UTF8 -D "$DIR/data" >"$DIR/initdb.log"
"${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -o "-k $DIR -p $PORT -h 127.0.0.1 -F" start >/dev/null
trap '"${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1; rm -rf "$DIR"' EXIT
SEEDS=$(( (RUNS + 9) / 10 ))
for WORKERS in 1 2 4; do
  DB=drain$WORKERS
  "${AS[@]}" "$BIN/psql" -q -h 127.0.0.1 -p "$PORT" -U postgres -c "CREATE DATABASE $DB" postgres
  URI=postgresql://postgres@127.0.0.1:$PORT/$DB
  for SEED in $(seq 1 "$SEEDS"); do  # 10 workloads per seed
    "$KINDEX" queue add --store "$URI" --problem gqa_paged_decode_h32_kv4_d128_ps1 --workloads 0-9 \
      --impl cpu-reference --reference cpu-reference --trials 1 --iterations 1 --warmup 0 --seed "$SEED" >/dev/null
  done
  START=$(date +%s.%N)
  for W in $(seq 1 "$WORKERS"); do
    "$KINDEX" worker --store "$URI" --drain --poll 0.1 --host "w$W" >"$DIR/w$W.log" 2>&1 &
  done
  wait
  END=$(date +%s.%N)
  DONE=$("${AS[@]}" "$BIN/psql" -tA -h 127.0.0.1 -p "$PORT" -U postgres -c \
    "SELECT COUNT(*) FROM run_queue WHERE state = 'done'" "$DB")
  python3 -c "print(f'$WORKERS worker(s): $DONE runs in {$END - $START:.1f} s = {$DONE / ($END - $START):.1f} runs/s')"
  # Per claimed run, from the workers' lines: the bench's wall time, the run's own phases within it, the rest
  # (starting and ending the runner: its worker process, environment, loading) and closing the run in the store.
  cat "$DIR"/w*.log | python3 -c "
import re, statistics, sys
rows = [tuple(map(float, m.groups())) for m in re.finditer(r'bench ([0-9.]+) ms: the run.s phases ([0-9.]+) ms, starting and ending the runner ([0-9.-]+) ms; closing ([0-9.]+) ms', sys.stdin.read())]
if rows:
    med = [statistics.median(c) for c in zip(*rows)]
    print(f'  per run (median of {len(rows)}): bench {med[0]:.1f} ms = the run {med[1]:.1f} ms + starting/ending the runner {med[2]:.1f} ms; closing in the store {med[3]:.1f} ms')
"
done
