#!/bin/sh
# /init of the QEMU guest scripts/qemu/run.sh boots (Debian 12's 6.1 kernel, two NUMA
# nodes of one CPU each): runs the smoke checks of uring-fwd on the guest's loopback and
# prints one line per check on the serial console, "smoke NAME: ok|fail (detail)", then
# "smoke done" and powers the guest off. Busybox's sh; the clients and upstreams are
# scripts/qemu/peer.cpp's.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
ip link set lo up
# shellcheck disable=SC3045 # busybox's ash has ulimit -n
ulimit -n 65536
cd /tmp || exit 1

result() { echo "smoke $1: $2 ($3)"; }
# check NAME COMMAND...: ok when the command exits 0; its last line is the detail.
check() {
  name=$1; shift
  if out=$("$@" 2>&1); then result "$name" ok "$(echo "$out" | tail -1)"
  else result "$name" fail "$(echo "$out" | tail -3 | tr '\n' ' ')"; fi
}
# fwd LOG ARGS...: starts uring-fwd, waits (30 s at most: TCG is slow) for its start
# line; $FWD is its pid.
fwd() {
  log=$1; shift
  uring-fwd "$@" >"$log" 2>&1 &
  FWD=$!
  for _ in $(seq 300); do
    grep -q "listening on" "$log" && return 0
    kill -0 "$FWD" 2>/dev/null || break
    sleep 0.1
  done
  echo "uring-fwd did not start: $(tail -3 "$log")"
  return 1
}
stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
node_of_cpu() { basename "$(ls -d /sys/devices/system/cpu/cpu"$1"/node* 2>/dev/null)" | sed 's/node//'; }
# The tid and CPU list of each shard thread of $1: "TID NAME CPUS" lines.
shard_threads() {
  for t in /proc/"$1"/task/*; do
    comm=$(cat "$t/comm")
    case $comm in fwd-shard-*|iou-wrk-*)
      echo "${t##*/} $comm $(awk '/^Cpus_allowed_list/ {print $2}' "$t/status")" ;;
    esac
  done
}

result kernel ok "$(uname -r), $(nproc) CPUs"
n0=$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null)
n1=$(cat /sys/devices/system/node/node1/cpulist 2>/dev/null)
if [ "$n0" = 0 ] && [ "$n1" = 1 ]; then result numa-nodes ok "node 0: CPU $n0, node 1: CPU $n1"
else result numa-nodes fail "node 0: '$n0', node 1: '$n1'"; fi

peer serve 9001 echo &
peer serve 9002 watch-reset >/tmp/watch-reset.log &
peer serve 9003 reset &
peer serve 9004 proxy >/tmp/proxy.log &
peer serve 9005 tag alpha &
peer serve 9006 tag other &
peer serve 9007 echo &
sleep 1
MIB64=67108864

# Two shards, one per node; the kernel's lack of the ring's setsockopt (6.7) said once.
if fwd /tmp/start.log --listen 127.0.0.1:8000 --upstream 127.0.0.1:9001; then
  if grep -q "2 shards (node 0: 1, node 1: 1)" /tmp/start.log; then
    result shards-per-node ok "2 shards (node 0: 1, node 1: 1)"
  else result shards-per-node fail "$(head -1 /tmp/start.log)"; fi
  lines=$(grep -c "direct descriptors unavailable" /tmp/start.log)
  reason=$(grep -o "direct descriptors unavailable.*" /tmp/start.log | head -1)
  if [ "$lines" = 1 ]; then result direct-descriptors-fallback ok "$reason"
  else result direct-descriptors-fallback fail "$lines lines: $(head -3 /tmp/start.log)"; fi
  # The ring's setup flags and features as the start line lists them (uring/ring.cpp):
  # 6.1 has SINGLE_ISSUER (6.0) and DEFER_TASKRUN (6.1), not receive bundles (6.10).
  ring=$(grep -o "io_uring sq=[^;,]*" /tmp/start.log | head -1)
  case "$ring" in
    *"single-issuer defer-taskrun"*bundles*|"") result ring-features fail "$ring" ;;
    *"single-issuer defer-taskrun"*) result ring-features ok "$ring; no bundles (6.10)" ;;
    *) result ring-features fail "$ring" ;;
  esac
  check half-close peer echo 127.0.0.1:8000 1000
  stop "$FWD"
else result shards-per-node fail "no start"; fi

# Incoming-CPU steering (SO_INCOMING_CPU, fixed in the reuseport fast path in 6.2 and
# 6.1.2: docs/kernel.md §9): ten clients pinned to CPU 1 all go to shard 1, whose
# counters SIGUSR1 prints.
if fwd /tmp/steer.log --listen 127.0.0.1:8008 --upstream 127.0.0.1:9001; then
  for _ in 1 2 3 4 5 6 7 8 9 10; do taskset -c 1 peer echo 127.0.0.1:8008 100 >/dev/null; done
  kill -USR1 "$FWD"
  sleep 1
  a0=$(grep "shard 0 cpu 0 node 0:" /tmp/steer.log | grep -o ' accepted=[0-9]*' | head -1)
  a1=$(grep "shard 1 cpu 1 node 1:" /tmp/steer.log | grep -o ' accepted=[0-9]*' | head -1)
  if [ "$a0" = " accepted=0" ] && [ "$a1" = " accepted=10" ]; then
    result cpu-steering ok "clients on CPU 1: shard 0$a0, shard 1$a1"
  else result cpu-steering fail "shard 0:$a0, shard 1:$a1"; fi
  stop "$FWD"
fi

# Every data path, 64 MiB each way through an echo upstream.
for path in auto splice copy; do
  if fwd /tmp/dp.log --listen 127.0.0.1:8001 --upstream 127.0.0.1:9001 --data-path $path; then
    check data-path-$path peer echo 127.0.0.1:8001 $MIB64
    stop "$FWD"
  else result data-path-$path fail "no start"; fi
done
if fwd /tmp/dp.log --listen 127.0.0.1:8001 --upstream 127.0.0.1:9001 --data-path splice \
     --splice-mechanism ring; then
  check data-path-splice-ring peer echo 127.0.0.1:8001 $MIB64
  stop "$FWD"
fi

# Resets, both ways.
if fwd /tmp/rst.log --listen 127.0.0.1:8002 --upstream 127.0.0.1:9002; then
  peer reset-out 127.0.0.1:8002 >/dev/null
  sleep 1
  if grep -q peer-reset /tmp/watch-reset.log; then result reset-from-client ok "the upstream saw a reset"
  else result reset-from-client fail "the upstream saw: $(cat /tmp/watch-reset.log)"; fi
  stop "$FWD"
fi
if fwd /tmp/rst.log --listen 127.0.0.1:8003 --upstream 127.0.0.1:9003; then
  check reset-from-upstream peer reset-in 127.0.0.1:8003
  stop "$FWD"
fi

# PROXY protocol headers.
for v in v1 v2; do
  : >/tmp/proxy.log
  if fwd /tmp/px.log --listen 127.0.0.1:8004 --upstream 127.0.0.1:9004 --send-proxy $v; then
    peer echo 127.0.0.1:8004 100 >/dev/null
    sleep 0.5
    got=$(cat /tmp/proxy.log)
    case "$v:$got" in
      "v1:proxy v1 PROXY TCP4 127.0.0.1 127.0.0.1 "*|"v2:proxy v2 command 1 family 17 "*)
        result proxy-$v ok "$got" ;;
      *) result proxy-$v fail "the upstream read: $got" ;;
    esac
    stop "$FWD"
  fi
done

# SNI: a.example to one route, anything else to the default; canned ClientHellos.
peer hello a.example /tmp/hello-a.bin
peer hello b.example /tmp/hello-b.bin
cat >/tmp/sni.toml <<'EOF'
[[route]]
name = "a"
listen = "127.0.0.1:8443"
server_names = ["a.example"]
  [[route.upstream]]
  address = "127.0.0.1:9005"
[[route]]
name = "other"
listen = "127.0.0.1:8443"
  [[route.upstream]]
  address = "127.0.0.1:9006"
EOF
if fwd /tmp/sni.log --config /tmp/sni.toml; then
  a=$(peer send-file 127.0.0.1:8443 /tmp/hello-a.bin)
  b=$(peer send-file 127.0.0.1:8443 /tmp/hello-b.bin)
  if [ "$a" = "ok alpha" ] && [ "$b" = "ok other" ]; then
    result sni-routing ok "a.example -> route a, b.example -> the default"
  else result sni-routing fail "a.example: $a; b.example: $b"; fi
  stop "$FWD"
fi

# Reload: a connection open across a SIGHUP that moves the route to another upstream.
cat >/tmp/reload.toml <<'EOF'
[[route]]
name = "r"
listen = "127.0.0.1:8005"
  [[route.upstream]]
  address = "127.0.0.1:9001"
EOF
if fwd /tmp/reload.log --config /tmp/reload.toml; then
  peer ping 127.0.0.1:8005 30 100 >/tmp/ping.log 2>&1 &
  pinger=$!
  sleep 1
  sed -i 's/9001/9007/' /tmp/reload.toml
  kill -HUP "$FWD"
  wait "$pinger"
  if grep -q "^ok" /tmp/ping.log && grep -q "SIGHUP: reloaded" /tmp/reload.log; then
    result reload ok "$(cat /tmp/ping.log) across SIGHUP: reloaded"
  else result reload fail "$(cat /tmp/ping.log); $(grep SIGHUP /tmp/reload.log)"; fi
  stop "$FWD"
fi

# Binary upgrade: a successor takes the listeners over; the old connection goes on, a new
# one is served by the successor, the old process exits once drained.
up="--listen 127.0.0.1:8006 --upstream 127.0.0.1:9001 --upgrade-socket /tmp/upgrade.sock"
# shellcheck disable=SC2086 # $up is a list of arguments
if fwd /tmp/up-old.log $up; then
  old=$FWD
  peer ping 127.0.0.1:8006 30 100 >/tmp/up-ping.log 2>&1 &
  pinger=$!
  sleep 1
  # shellcheck disable=SC2086
  if fwd /tmp/up-new.log $up; then
    new=$FWD
    sleep 1
    fresh=$(peer echo 127.0.0.1:8006 100000)
    wait "$pinger"
    for _ in $(seq 100); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
    if grep -q "^ok" /tmp/up-ping.log && [ "${fresh%% *}" = ok ] && ! kill -0 "$old" 2>/dev/null; then
      result upgrade ok "old connection: $(cat /tmp/up-ping.log); new one: $fresh; old process gone"
    else result upgrade fail "old: $(cat /tmp/up-ping.log); new: $fresh; $(tail -2 /tmp/up-old.log)"; fi
    stop "$new"
  else result upgrade fail "the successor did not start"; fi
  stop "$old"
fi

# NUMA placement, with each shard busy: one client pinned to each CPU (incoming-CPU
# steering hands a loopback connection to the shard of the CPU that sent its SYN).
numa_run() { # LOG ARGS...: the two clients, then the placement checks
  log=$1; shift
  fwd "$log" --listen 127.0.0.1:8007 --upstream 127.0.0.1:9001 "$@" || return 1
  taskset -c 0 peer echo 127.0.0.1:8007 $MIB64 >/tmp/numa-c0.log 2>&1 &
  c0=$!
  taskset -c 1 peer echo 127.0.0.1:8007 $MIB64 >/tmp/numa-c1.log 2>&1 &
  c1=$!
  sleep 3
  shard_threads "$FWD" >/tmp/threads.txt
  cp /proc/"$FWD"/maps /tmp/maps.txt
  cp /proc/"$FWD"/numa_maps /tmp/numa_maps.txt
  wait "$c0" "$c1"
}
# Each shard thread on a CPU of its node; each io-wq worker (named iou-wrk-<shard tid>)
# on its shard's node.
placement_checks() {
  bad=""; seen=""
  while read -r _ name cpus; do
    case $name in
      fwd-shard-*)
        i=${name#fwd-shard-}
        [ "$cpus" = "$i" ] || bad="$bad $name on $cpus;"
        seen="$seen $name:cpu$cpus/node$(node_of_cpu "$cpus")" ;;
      iou-wrk-*)
        owner=$(awk -v t="${name#iou-wrk-}" '$1 == t {print $2}' /tmp/threads.txt)
        i=${owner#fwd-shard-}
        [ "$cpus" = "$i" ] || bad="$bad $name of $owner on $cpus;"
        seen="$seen $name($owner):cpu$cpus" ;;
    esac
  done </tmp/threads.txt
  echo "$bad|$seen"
}

if numa_run /tmp/numa.log --data-path splice --splice-mechanism ring; then
  out=$(placement_checks)
  if ! grep -q fwd-shard-1 /tmp/threads.txt; then result numa-threads fail "no shard 1"
  elif [ -z "${out%%|*}" ]; then result numa-threads ok "${out#*|}"
  else result numa-threads fail "$out"; fi
  if grep -q iou-wrk- /tmp/threads.txt && [ -z "${out%%|*}" ]; then
    result numa-iowq-workers ok "$(grep -c iou-wrk- /tmp/threads.txt) workers, each on its shard's node"
  else result numa-iowq-workers fail "$out"; fi
  ok=0; for c in /tmp/numa-c0.log /tmp/numa-c1.log; do grep -q "^ok" $c && ok=$((ok + 1)); done
  [ $ok = 2 ] || result numa-transfers fail "$(cat /tmp/numa-c0.log /tmp/numa-c1.log)"
  stop "$FWD"
fi

# Memory: one shard at a time, on CPU 0 then on CPU 1, with the copy path so it has
# user-space buffers. The shard's copy buffers are the one anonymous mapping of exactly
# copy_buffers x copy_buffer_size bytes (uring/provided_buffers.cpp maps it alone; 73
# KiB buffers, a size nothing else maps), within a mapping of that size or a little more:
# the kernel merges it with an adjacent anonymous mapping of the same protection (the
# buffer ring's page, mapped just before it, and others of the shard's setup; seen: one
# page, 65 pages). Its ring is the io_uring
# file's mappings (the process has no other ring: one shard, no health checks or name
# refresh here). Both must lie in the shard's node's memory.
bufs=64; size=$((73 * 1024)); region=$((bufs * size))
# Each copy-buffer mapping of the process: "START N0=pages,N1=pages," per line, from
# numa_maps, which counts anonymous (normal) pages per node.
buffer_mappings() {
  while read -r range _; do
    bytes=$((0x${range#*-} - 0x${range%-*}))
    if [ $bytes -ge $region ] && [ $bytes -le $((region + 512 * 1024)) ]; then
      echo "${range%-*} $(grep "^0*${range%-*} " /tmp/numa_maps.txt | grep -o 'N[0-9]*=[0-9]*' | tr '\n' ',')"
    fi
  done </tmp/maps.txt
}
for cpu in 0 1; do
  node=$(node_of_cpu $cpu)
  if numa_run /tmp/mem.log --shards 1 --cpus $cpu --data-path copy --copy-buffers $bufs \
       --copy-buffer-size $size --bulk-buffers 0; then
    detail=""; verdict=ok
    mapping=$(buffer_mappings)
    nodes=${mapping#* }
    if [ -z "$mapping" ] || [ -z "$nodes" ] || echo "$nodes" | grep -q "N[^$node]="; then verdict=fail; fi
    detail="copy buffers at $mapping"
    # The ring: the kernel's own pages, mapped with remap_pfn_range on 6.1 (io_uring/
    # io_uring.c io_uring_mmap), which numa_maps does not count; pagemap gives their
    # frames.
    for r in $(grep 'io_uring' /tmp/maps.txt | cut -d' ' -f1); do
      pages=$(peer page-nodes "$FWD" "$r" 2>&1)
      detail="$detail; ring $r: $pages"
      echo "$pages" | grep -q "N$node=[1-9]" || verdict=fail
      echo "$pages" | grep -q "N[^$node]=[1-9]" && verdict=fail
    done
    grep -q io_uring /tmp/maps.txt || { verdict=fail; detail="$detail; no io_uring mapping"; }
    result numa-memory-cpu$cpu $verdict "shard on CPU $cpu (node $node): $detail"
    stop "$FWD"
  else result numa-memory-cpu$cpu fail "no start"; fi
done

# The kernel's side of --iowq-cpus node (docs/kernel.md §9): a thread pinned to CPU 0
# that gives its io-wq CPUs 0 and 1. 6.1 gives the worker both; 6.2 and later keep it on
# CPU 0, the thread's own affinity.
mask=$(peer iowq-mask 2>&1)
if [ "$mask" = "ok 0-1" ]; then result iowq-mask-of-a-pinned-thread ok "the worker got CPUs 0-1"
else result iowq-mask-of-a-pinned-thread fail "$mask"; fi

echo "smoke done"
sync
poweroff -f
