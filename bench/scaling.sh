#!/usr/bin/env bash
# How uring-fwd's throughput and CPU cost change with the number of shards.
#
# For each shard count (and, above one shard, with CPU steering on and off) it runs
# uring-fwd on loopback in front of an iperf3 server and drives 8 parallel streams
# through it with `iperf3 -P 8 -t 10 -J`. It records the aggregate throughput and the
# forwarder's CPU time from /proc/PID/task/*/stat: the shard threads, the io-wq workers
# and the whole process. Configurations are interleaved over several rounds so a slow
# spell on a shared machine hits all of them alike; the table shows medians.
#
# Everything runs on 127.0.0.1. Every run is bounded by `timeout`.
#
#   bench/scaling.sh                          # 1 and 2 shards, 3 rounds, 10 s each
#   bench/scaling.sh --shards-list 1,2,4,8,16 # bigger machines
#   bench/scaling.sh --help
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command_line="bench/scaling.sh${*:+ $*}"

shards_list="1,2"
rounds=3
seconds=10
streams=8
steering="both"
binary=""
out_md="$repo/bench/SCALING.md"

usage() {
    cat <<EOF
usage: bench/scaling.sh [options]
  --shards-list LIST   shard counts to compare (default 1,2)
  --rounds N           rounds, configurations interleaved (default 3)
  --time S             seconds per iperf3 run (default 10)
  --streams N          parallel iperf3 streams (default 8)
  --steering MODE      on, off or both (default both; one shard has no steering to vary)
  --uring-fwd PATH     binary to measure (default build/engine/uring-fwd, else
                       build-bench/engine/uring-fwd, built if missing)
  --out FILE           markdown report (default bench/SCALING.md)
EOF
}

while (($#)); do
    case "$1" in
    --shards-list) shards_list="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --time) seconds="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --steering) steering="$2"; shift 2 ;;
    --uring-fwd) binary="$2"; shift 2 ;;
    --out) out_md="$2"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "scaling.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done

[[ "$shards_list" =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "scaling.sh: bad --shards-list" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ && "$seconds" =~ ^[1-9][0-9]*$ && "$streams" =~ ^[1-9][0-9]*$ ]] ||
    { echo "scaling.sh: --rounds, --time and --streams take positive integers" >&2; exit 2; }
case "$steering" in on | off | both) ;; *) echo "scaling.sh: --steering on|off|both" >&2; exit 2 ;; esac
for tool in iperf3 python3 timeout; do
    command -v "$tool" >/dev/null || { echo "scaling.sh: $tool is not installed" >&2; exit 1; }
done

if [[ -z "$binary" ]]; then
    if [[ -x "$repo/build/engine/uring-fwd" ]]; then
        binary="$repo/build/engine/uring-fwd"
    else
        if [[ ! -x "$repo/build-bench/engine/uring-fwd" ]]; then
            echo "scaling.sh: building build-bench/engine/uring-fwd" >&2
            (cd "$repo" && { [[ -d build-bench ]] || meson setup build-bench -Dtests=false; } &&
                ninja -C build-bench)
        fi
        binary="$repo/build-bench/engine/uring-fwd"
    fi
fi
[[ -x "$binary" ]] || { echo "scaling.sh: no binary at $binary" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/uring-fwd-scaling.XXXXXX")"
server_pid=""
fwd_pid=""
cleanup() {
    # Only what this script started, by pid.
    [[ -n "$fwd_pid" ]] && kill -KILL "$fwd_pid" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill -TERM "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# One JSON line of CPU ticks for every thread of a process, plus the process total
# (which also counts threads that have exited, such as io-wq workers that idled out).
cpu_snapshot() {
    python3 - "$1" <<'PY'
import json, os, sys
pid = sys.argv[1]
def ticks(path):
    with open(path) as f:
        text = f.read()
    # comm may hold spaces or parentheses: fields are counted after the last ')'.
    comm = text[text.index("(") + 1:text.rindex(")")]
    rest = text[text.rindex(")") + 2:].split()
    return comm, int(rest[11]) + int(rest[12])  # utime + stime
threads = {}
for tid in os.listdir(f"/proc/{pid}/task"):
    try:
        threads[tid] = ticks(f"/proc/{pid}/task/{tid}/stat")
    except (OSError, ValueError):
        pass  # exited while we looked
print(json.dumps({"pid": pid, "process": ticks(f"/proc/{pid}/stat")[1], "threads": threads}))
PY
}

count_iowq() {
    local n=0 comm
    for comm in /proc/"$1"/task/*/comm; do
        [[ "$(cat "$comm" 2>/dev/null)" == iou-wrk-* ]] && n=$((n + 1))
    done
    echo "$n"
}

server_port="$(free_port)"
start_server() {
    iperf3 -s -B 127.0.0.1 -p "$server_port" >"$work/iperf3-server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $server_port), 0.2).close()" \
            2>/dev/null && return 0
        sleep 0.1
    done
    echo "scaling.sh: iperf3 server did not start" >&2
    exit 1
}
start_server

# Starts uring-fwd and waits (at most 10 s) for its "listening on" line.
start_fwd() { # shards steering port log
    local args=(--listen "127.0.0.1:$3" --upstream "127.0.0.1:$server_port" --shards "$1"
        --log-level info)
    [[ "$2" == off ]] && args+=(--no-steering)
    "$binary" "${args[@]}" 2>"$4" &
    fwd_pid=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$4" 2>/dev/null && return 0
        kill -0 "$fwd_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "scaling.sh: uring-fwd did not start:" >&2
    cat "$4" >&2
    return 1
}

# SIGTERM drains (nothing is left open by then); SIGKILL if it takes over 5 s.
stop_fwd() {
    kill -TERM "$fwd_pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$fwd_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$fwd_pid" 2>/dev/null || true
    wait "$fwd_pid" 2>/dev/null || true
    fwd_pid=""
}

# Configurations: one shard once; above that, each steering mode asked for.
configs=()
IFS=, read -ra counts <<<"$shards_list"
for n in "${counts[@]}"; do
    ((n >= 1)) || { echo "scaling.sh: shard counts start at 1" >&2; exit 2; }
    if ((n == 1)); then
        configs+=("1:on")
    else
        [[ "$steering" != off ]] && configs+=("$n:on")
        [[ "$steering" != on ]] && configs+=("$n:off")
    fi
done

results="$work/results.jsonl"
: >"$results"
# Seconds per run: iperf3 itself, plus connect and JSON slack.
iperf_limit=$((seconds + 30))

run_one() { # round shards steering
    local round="$1" shards="$2" steer="$3" tag="r$1-s$2-$3"
    local port log json
    port="$(free_port)"
    log="$work/fwd-$tag.log"
    json="$work/iperf-$tag.json"
    start_fwd "$shards" "$steer" "$port" "$log" || return 1
    cpu_snapshot "$fwd_pid" >"$work/cpu-before-$tag.json"

    timeout "$iperf_limit" iperf3 -c 127.0.0.1 -p "$port" -P "$streams" -t "$seconds" -J \
        --connect-timeout 5000 >"$json" 2>"$work/iperf-$tag.err" &
    local client=$!
    # Halfway through: how many io-wq workers serve the streams, and per-shard
    # counters (SIGUSR1 prints one line per shard) while every stream is open.
    sleep "$((seconds / 2))"
    local iowq
    iowq="$(count_iowq "$fwd_pid")"
    kill -USR1 "$fwd_pid" 2>/dev/null || true
    local client_rc=0
    wait "$client" || client_rc=$?
    cpu_snapshot "$fwd_pid" >"$work/cpu-after-$tag.json"
    stop_fwd

    python3 - "$round" "$shards" "$steer" "$iowq" "$client_rc" "$json" "$log" \
        "$work/cpu-before-$tag.json" "$work/cpu-after-$tag.json" >>"$results" <<'PY'
import json, os, re, sys
round_, shards, steer, iowq, rc, json_path, log_path, before_path, after_path = sys.argv[1:]
hz = os.sysconf("SC_CLK_TCK")
row = {"round": int(round_), "shards": int(shards), "steering": steer, "iowq_threads": int(iowq)}
try:
    with open(json_path) as f:
        report = json.load(f)
    if "error" in report:
        raise ValueError(report["error"])
    received = report["end"]["sum_received"]
    row["gbps"] = received["bits_per_second"] / 1e9
    row["bytes"] = received["bytes"]
except (OSError, ValueError, KeyError) as e:
    row["error"] = f"iperf3 exit {rc}: {e}"
with open(before_path) as f:
    before = json.load(f)
with open(after_path) as f:
    after = json.load(f)
pid = after["pid"]
shard_ticks = iowq_ticks = 0
for tid, (comm, t) in after["threads"].items():
    delta = t - before["threads"].get(tid, [comm, 0])[1]
    if comm.startswith("iou-wrk"):
        iowq_ticks += delta
    elif tid != pid:  # the main thread only waits for signals
        shard_ticks += delta
row["cpu_process_s"] = (after["process"] - before["process"]) / hz
row["cpu_shards_s"] = shard_ticks / hz
row["cpu_iowq_s"] = iowq_ticks / hz  # io-wq workers alive at the end only
accepted = {}
with open(log_path) as f:
    for line in f:
        m = re.search(r"shard (\d+) cpu (-?\d+) .*?accepted=(\d+)", line)
        if m:
            accepted[f"cpu{m.group(2)}"] = int(m.group(3))
row["accepted_by_shard"] = accepted
print(json.dumps(row))
if "gbps" in row:
    summary = "%.2f Gbit/s, %.2f CPU s, io-wq %d, accepted %s" % (
        row["gbps"], row["cpu_process_s"], row["iowq_threads"], accepted)
else:
    summary = row["error"]
print("  round %s, %s shards, steering %s: %s" % (round_, shards, steer, summary), file=sys.stderr)
PY
}

echo "scaling.sh: $binary, configurations ${configs[*]}, $rounds rounds of ${seconds}s" >&2
for ((round = 1; round <= rounds; round++)); do
    # Rotate the order each round so no configuration always runs first or last.
    for ((i = 0; i < ${#configs[@]}; i++)); do
        c="${configs[$(((i + round - 1) % ${#configs[@]}))]}"
        run_one "$round" "${c%%:*}" "${c##*:}" || echo "  round $round ${c}: failed" >&2
    done
done

python3 - "$results" "$out_md" "$command_line" "$binary" "$seconds" "$streams" "$rounds" <<'PY'
import datetime, json, os, platform, statistics, subprocess, sys
results_path, out_md, command, binary, seconds, streams, rounds = sys.argv[1:]
rows = [json.loads(line) for line in open(results_path) if line.strip()]

def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"

def first_line(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"

configs = []
for r in rows:
    key = (r["shards"], r["steering"])
    if key not in configs:
        configs.append(key)

def med(values):
    return statistics.median(values) if values else float("nan")

lines = [
    "# uring-fwd shard scaling",
    "",
    f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
    f"- kernel: {platform.release()}; {os.cpu_count()} CPUs ({cpu_model()}); load average "
    f"{os.getloadavg()[2]:.1f} over the last 15 min (other jobs share the machine when high)",
    f"- command: `{command}`",
    f"- binary: `{os.path.relpath(binary)}` ({first_line([binary, '--version'])}); "
    f"{first_line(['iperf3', '--version'])}",
    f"- workload: `iperf3 -c 127.0.0.1 -P {streams} -t {seconds} -J` through uring-fwd "
    f"(`--shards N`, pinned by the engine) to `iperf3 -s` on 127.0.0.1; {rounds} rounds, "
    "configurations interleaved; medians",
    "",
    "| shards | steering | Gbit/s | per round | fwd CPU s/GB | per shard CPU s/GB "
    "| shard threads CPU s/GB | io-wq CPU s/GB | io-wq threads | connections per shard |",
    "|---:|---|---:|---|---:|---:|---:|---:|---:|---|",
]
for shards, steer in configs:
    ok = [r for r in rows if (r["shards"], r["steering"]) == (shards, steer) and "gbps" in r]
    failed = [r for r in rows if (r["shards"], r["steering"]) == (shards, steer) and "gbps" not in r]
    if not ok:
        lines.append(f"| {shards} | {steer} | n/a | {len(failed)} failed | | | | | | |")
        continue
    gb = lambda r: r["bytes"] / 1e9
    per_gb = lambda key: med([r[key] / gb(r) for r in ok if r["bytes"] > 0])
    total = per_gb("cpu_process_s")
    # Connections include iperf3's control connection; shown for the median round.
    median_run = sorted(ok, key=lambda r: r["gbps"])[len(ok) // 2]
    spread = ", ".join(f"{k}: {v}" for k, v in sorted(median_run["accepted_by_shard"].items()))
    steer_text = steer if shards > 1 else "-"
    rounds_text = " / ".join("%.2f" % r["gbps"] for r in ok)
    if failed:
        rounds_text += f" ({len(failed)} failed)"
    lines.append(
        f"| {shards} | {steer_text} | {med([r['gbps'] for r in ok]):.2f} "
        f"| {rounds_text} "
        f"| {total:.3f} | {total / shards:.3f} | {per_gb('cpu_shards_s'):.3f} "
        f"| {per_gb('cpu_iowq_s'):.3f} | {med([r['iowq_threads'] for r in ok]):.0f} | {spread} |")

lines += [
    "",
    "How to read it:",
    "",
    "- **fwd CPU s/GB**: utime+stime of the whole uring-fwd process (`/proc/PID/stat`, which "
    "also counts threads that exited during the run) per GB received by the server; "
    "**per shard** divides it by the shard count.",
    "- **shard threads**: the threads named `uring-fwd` other than the main thread; "
    "**io-wq**: threads named `iou-wrk-*` alive at the end of the run (workers that idled "
    "out earlier are only in the process total). io-wq threads are counted halfway through "
    "the run.",
    "- **connections per shard**: `accepted` per shard CPU from SIGUSR1 halfway through the "
    "median run; iperf3 adds one control connection to the streams.",
    "- iperf3 3.12 runs all streams from one thread, so with CPU steering every connection "
    "opened from one CPU lands on that CPU's shard: steering `on` may leave shards idle by "
    "design; `off` spreads them by the kernel's reuseport hash.",
    "- The client and server share the machine's CPUs with the shards, so on a small "
    "machine this shows scaling under contention, not the forwarder's capacity.",
]
failures = [r for r in rows if "gbps" not in r]
if failures:
    lines += ["", "Failed runs:", ""]
    lines += [f"- round {r['round']}, {r['shards']} shards, steering {r['steering']}: {r['error']}"
              for r in failures]
with open(out_md, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines[8:10 + len(configs)]))
print(f"\nwrote {out_md}", file=sys.stderr)
PY
