#!/bin/bash
# Per-GB counters of one uring-fwd variant under a fixed-rate iperf3 load (issue 14):
# CPU s/GB, splices, EAGAINs, io_uring enters, CQEs and context switches (all threads,
# io-wq workers included) per GB, from the engine's SIGUSR1 counters and /proc. A fixed
# rate makes every variant do the same work, so the counters compare wake-ups per byte
# rather than how saturated the proxy was. Loopback only; proxy pinned to CPU 1, load
# to CPU 0, as bench/compare does.
#
#   bench/bulk_counters.sh STREAMS RATE_PER_STREAM [uring-fwd flags...]
#   bench/bulk_counters.sh 8 500M --bulk-park 20ms
set -euo pipefail
streams=$1 rate=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${URING_FWD:-$here/../build-bench/engine/uring-fwd}
tmp=$(mktemp -d)
trap 'kill $proxy $server 2>/dev/null || true; rm -rf "$tmp"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
listen=$(free_port) up=$(free_port)
taskset -c 0 iperf3 -s -p "$up" -1 >/dev/null 2>&1 &
server=$!
taskset -c 1 "$bin" --listen 127.0.0.1:"$listen" --upstream 127.0.0.1:"$up" --shards 1 \
    --log-level info "$@" 2>"$tmp/err" &
proxy=$!
sleep 0.5
taskset -c 0 iperf3 -c 127.0.0.1 -p "$listen" -P "$streams" -t 4 -b "$rate" -J >"$tmp/iperf.json"
ctx=0
for t in /proc/$proxy/task/*; do
    ctx=$((ctx + $(awk '/ctxt_switches/ {n += $2} END {print n + 0}' "$t/status")))
done
cpu=$(awk '{print $14 + $15}' /proc/$proxy/stat)
kill -USR1 $proxy
sleep 0.3
python3 - "$tmp" "$ctx" "$cpu" "$*" <<'PY'
import json, re, sys
tmp, ctx, ticks, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
end = json.load(open(f"{tmp}/iperf.json"))["end"]["sum_received"]
gb = end["bytes"] / 1e9
line = [l for l in open(f"{tmp}/err") if "splices=" in l][-1]
kv = dict(re.findall(r"(\w+)=([\d.]+)", line))
per = lambda k: float(kv.get(k, 0)) / gb
print(f"{flags or '(default)'}: {end['bits_per_second'] / 1e9:.1f} Gbit/s, "
      f"CPU {ticks / 100 / gb:.3f} s/GB, per GB: splices {per('splices'):.0f}, "
      f"EAGAIN {per('eagains'):.0f}, enters {per('enters'):.0f}, CQEs {per('completions'):.0f}, "
      f"context switches {ctx / gb:.0f}")
PY
