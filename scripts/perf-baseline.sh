#!/usr/bin/env bash
# Measures the baseline figures of docs/performance.md: a fresh gregor with
# its data in a temporary directory, `gregor perf produce` and `gregor perf
# consume` of 1 KiB records to 1 and to 8 partitions with acks=1, three runs
# each, then the medians; start-up time and idle memory.
#   scripts/perf-baseline.sh [records]   (default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
records=${1:-1000000}
runs=3
port=19092
work=$(mktemp -d)
trap 'pkill -TERM -f "gregor serve --data-dir $work/data" || true; rm -rf "$work"' EXIT
go build -o "$work/gregor" ./cmd/gregor
bin="$work/gregor"

start() {
  "$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
  for _ in $(seq 100); do grep -q "gregor started" "$work/serve.log" && return; sleep 0.05; done
  echo "gregor did not start" >&2; cat "$work/serve.log" >&2; exit 1
}
stop() { pkill -TERM -f "gregor serve --data-dir $work/data"; while pgrep -f "gregor serve --data-dir $work/data" >/dev/null; do sleep 0.05; done; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

start
grep -o 'startup=[^ ]*' "$work/serve.log" | sed 's/^/empty data dir: /'
pid=$(pgrep -f "gregor serve --data-dir $work/data")
echo "idle RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
for parts in 1 8; do
  : >"$work/p.txt"; : >"$work/c.txt"
  for i in $(seq $runs); do
    "$bin" perf produce --bootstrap 127.0.0.1:$port --topic "p$parts-$i" --partitions $parts \
      --records "$records" --record-size 1024 --acks 1 --json >>"$work/p.txt"
    echo >>"$work/p.txt"
    "$bin" perf consume --bootstrap 127.0.0.1:$port --topic "p$parts-$i" --records "$records" --json >>"$work/c.txt"
    echo >>"$work/c.txt"
  done
  for kind in p c; do
    mb=$(grep . "$work/$kind.txt" | while read -r l; do echo "$l" | field mb_per_sec; done | median)
    rs=$(grep . "$work/$kind.txt" | while read -r l; do echo "$l" | field records_per_sec; done | median)
    name=$([ $kind = p ] && echo produce || echo consume)
    printf '%s %d partition(s): median %.1f MB/s, %.0f records/s\n' "$name" "$parts" "$mb" "$rs"
  done
done
echo "after load RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
# A crash leaves every active segment unflushed: the next start checks
# every batch written since the last recovery point.
kill -9 "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
echo "data dir: $(du -sh "$work/data" | cut -f1)"
start; grep -o 'startup=[^ ]*' "$work/serve.log" | sed 's/^/restart after SIGKILL: /'; stop
start; grep -o 'startup=[^ ]*' "$work/serve.log" | sed 's/^/clean restart: /'; stop
