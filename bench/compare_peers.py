"""The peers of bench/compare.py: which there are, how each is started on a fresh port in
front of a fresh upstream server, and building the ones compare.py builds itself (goproxy;
the floors and the example gateway have modules of their own). Standard library only."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from compare_baseline import BASE_PEER
from compare_example_gateway import GATEWAY_PEER, gateway_argv
from compare_floors import FLOOR_PEERS, floor_argv
from compare_gateway import nginx_file_conf
import compare_sni
from compare_proc import (LOOP, PeerFailed, _log_tail, free_port, nginx_http_temp_paths,
                          nginx_main_conf, wait_listening)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

ALL_PEERS = ["direct", "uring-fwd", "haproxy-splice", "haproxy", "nginx", "socat", "goproxy"]
# uring-fwd with one data path forced (plain "uring-fwd" runs the default, auto).
URING_VARIANTS = {"uring-fwd-copy": ["--data-path", "copy"],
                  # issue 14: the copy path without its bulk buffers (32 KiB buffers
                  # only), and with 1 MiB bulk buffers instead of 256 KiB
                  "uring-fwd-copy-small": ["--data-path", "copy", "--bulk-buffers", "0"],
                  "uring-fwd-copy1m": ["--data-path", "copy", "--bulk-buffer-size", "1048576"],
                  "uring-fwd-splice": ["--data-path", "splice"],
                  # the opt-in low-latency mode: poll 50 µs before sleeping
                  "uring-fwd-busy": ["--busy-poll", "50us"],
                  # the cost of routing: a 16-member Maglev pool (the members are all the
                  # one upstream, added in start_peer) instead of one upstream
                  "uring-fwd-maglev16": ["--balance", "maglev"],
                  # the cost of operating it: /metrics served and a JSON access log written
                  # to a file (its address and path are added in start_peer)
                  "uring-fwd-ops": ["--access-log-format", "json"],
                  # the cost of the PROXY protocol both ways: the load client sends a v1
                  # header, uring-fwd reads it and sends v2 to an upstream that reads it
                  # (churn only: the other load tools cannot send a header)
                  "uring-fwd-proxy2": ["--accept-proxy", "--send-proxy", "v2"],
                  # issue 14, experimental: bulk splices wait in the kernel for data
                  "uring-fwd-parked": ["--bulk-park", "20ms"],
                  # issue 14: plain fds instead of the ring's file table (the default)
                  "uring-fwd-plainfd": ["--direct-descriptors", "off"],
                  # issue 19: splices through the ring (IORING_OP_SPLICE pairs on io-wq)
                  # instead of inline splice(2) on the shard's thread (the default)
                  "uring-fwd-ring": ["--splice-mechanism", "ring"],
                  # issue 19: inline splices without coalescing bulk wake-ups
                  "uring-fwd-nocoalesce": ["--bulk-coalesce", "0"],
                  "uring-fwd-ring-splice": ["--data-path", "splice",
                                            "--splice-mechanism", "ring"]}
# Peers whose clients start with a PROXY header and whose upstream reads one.
PROXY_PEERS = ("uring-fwd-proxy2",)
# Extra --upstream copies of the upstream a variant gets (a pool of 1 + this many).
URING_POOL_EXTRA = {"uring-fwd-maglev16": 15}
ALL_PEERS += list(URING_VARIANTS)
# The floors (bench/floors/, compare_floors.py) and the example gateway (churn only).
ALL_PEERS += list(FLOOR_PEERS) + [GATEWAY_PEER]
# uring-fwd routing by TLS server name (bench/compare_sni.py).
ALL_PEERS += [compare_sni.SNI_PEER]


# --------------------------------------------------------------------------- upstreams

def start_upstream(ctx, kind: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    lf = ctx.logfile(f"upstream-{kind}")
    if kind == "iperf3":
        argv = ["iperf3", "-s", "-B", LOOP, "-p", str(port)]
    elif kind == "sockperf":
        argv = ["sockperf", "server", "--tcp", "-i", LOOP, "-p", str(port)]
    elif kind in ("http", "http-proxy"):
        # http-proxy: the same server reading a PROXY header (v1 or v2) first.
        pp = " proxy_protocol" if kind == "http-proxy" else ""
        d = ctx.subdir("nginx-" + kind)
        conf = d / "nginx.conf"
        conf.write_text(f"""
{nginx_main_conf(d, 16384)}http {{
{nginx_http_temp_paths(d)}    keepalive_timeout 0;
    server {{
        listen {LOOP}:{port} backlog=4096{pp};
        location / {{ return 200 "ok\\n"; }}
    }}
}}
""")
        argv = ["nginx", "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")]
    elif kind == "http-file":
        d = ctx.subdir("nginx-file")
        conf = d / "nginx.conf"
        conf.write_text(nginx_file_conf(d, port))
        argv = ["nginx", "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")]
    else:
        raise ValueError(kind)
    p = ctx.procs.start(argv, cpu=ctx.load_cpu, logfile=lf)
    try:
        wait_listening(port, p, f"upstream {kind}", lf)
    except PeerFailed:
        ctx.procs.stop(p)
        raise
    return p, port


# --------------------------------------------------------------------------- peers

def start_peer(ctx, peer: str, upstream_port: int) -> tuple[subprocess.Popen | None, int]:
    """Start peer forwarding a fresh port to upstream_port. Returns (proc, listen_port)."""
    if peer == "direct":
        return None, upstream_port
    a = free_port()
    lf = ctx.logfile(f"peer-{peer}")
    env = None
    if peer in ("haproxy", "haproxy-splice"):
        d = ctx.subdir(peer)
        splice = peer == "haproxy-splice"
        conf = d / "haproxy.cfg"
        conf.write_text(f"""
global
    nbthread 1
    maxconn 4000
{"    tune.pipesize 1048576" if splice else ""}
defaults
    mode tcp
    timeout connect 5s
    timeout client 120s
    timeout server 120s
{"    option splice-request" if splice else ""}
{"    option splice-response" if splice else ""}
frontend fe
    bind {LOOP}:{a}
    maxconn 4000
    default_backend be
backend be
    server s1 {LOOP}:{upstream_port}
""")
        argv = ["haproxy", "-db", "-f", str(conf)]
    elif peer == "nginx":
        d = ctx.subdir("nginx-stream")
        mod = "/usr/lib/nginx/modules/ngx_stream_module.so"
        if not os.path.exists(mod):
            raise PeerFailed(f"{mod} missing (apt-get install libnginx-mod-stream)")
        conf = d / "nginx.conf"
        conf.write_text(f"""
load_module {mod};
{nginx_main_conf(d, 20000)}stream {{
    server {{
        listen {LOOP}:{a} backlog=4096;
        proxy_pass {LOOP}:{upstream_port};
        proxy_connect_timeout 5s;
        proxy_timeout 120s;
    }}
}}
""")
        argv = ["nginx", "-p", str(d), "-c", str(conf), "-e", str(d / "error.log")]
    elif peer == "socat":
        # bind= keeps the listener on loopback (the plain form binds 0.0.0.0).
        argv = ["socat", f"TCP-LISTEN:{a},bind={LOOP},fork,reuseaddr,backlog=4096",
                f"TCP:{LOOP}:{upstream_port}"]
    elif peer == "goproxy":
        if not ctx.goproxy_bin:
            raise PeerFailed(f"goproxy not built: {ctx.goproxy_err}")
        env = dict(os.environ, GOMAXPROCS="1")
        argv = [str(ctx.goproxy_bin), "-listen", f"{LOOP}:{a}", "-upstream", f"{LOOP}:{upstream_port}"]
    elif peer in FLOOR_PEERS:
        if peer not in ctx.floor_bins:
            raise PeerFailed(f"{peer} not built: {ctx.floor_errs.get(peer, 'not requested')}")
        argv = floor_argv(ctx.floor_bins[peer], a, upstream_port)
    elif peer == GATEWAY_PEER:
        if not ctx.gateway_bin:
            raise PeerFailed(f"{peer} not built: {ctx.gateway_err}")
        argv = gateway_argv(ctx.gateway_bin, a, upstream_port)
    elif peer == compare_sni.SNI_PEER:
        if not ctx.uring_bin:
            raise PeerFailed(f"{peer} binary not available: {ctx.uring_err}")
        argv = compare_sni.peer_argv(ctx.uring_bin, ctx.subdir(peer), LOOP, a, upstream_port,
                                     ctx.uring_extra)
    elif peer in ("uring-fwd", BASE_PEER) or peer in URING_VARIANTS:
        if peer == BASE_PEER:
            binary, extra, err = ctx.base_bin, ctx.base_extra, ctx.base_err
        else:
            binary, extra, err = ctx.uring_bin, ctx.uring_extra, ctx.uring_err
        if not binary:
            raise PeerFailed(f"{peer} binary not available: {err}")
        argv = [str(binary), "--listen", f"{LOOP}:{a}", "--upstream",
                f"{LOOP}:{upstream_port}", "--log-level", "warn"] + extra
        if peer in URING_VARIANTS:
            argv += URING_VARIANTS[peer]
            for _ in range(URING_POOL_EXTRA.get(peer, 0)):
                argv += ["--upstream", f"{LOOP}:{upstream_port}"]
            if peer == "uring-fwd-ops":
                argv += ["--metrics", f"{LOOP}:0",
                         "--access-log", str(ctx.subdir(peer) / "access.log")]
    else:
        raise PeerFailed(f"unknown peer {peer}")
    if shutil.which(argv[0]) is None and not os.path.exists(argv[0]):
        raise PeerFailed(f"{argv[0]} not installed")
    p = ctx.procs.start(argv, cpu=ctx.proxy_cpu, env=env, logfile=lf)
    try:
        wait_listening(a, p, peer, lf)
        time.sleep(0.1)
        if p.poll() is not None:
            raise PeerFailed(f"{peer} exited with status {p.returncode}" + _log_tail(lf))
    except PeerFailed:
        ctx.procs.stop(p)
        raise
    return p, a


def build_goproxy(ctx) -> None:
    if shutil.which("go") is None:
        ctx.goproxy_err = "go not installed"
        return
    # A persistent temp dir so repeated runs reuse the compiled standard library.
    gtmp = Path(tempfile.gettempdir()) / "uring-fwd-bench-go"
    (gtmp / "path").mkdir(parents=True, exist_ok=True)
    (gtmp / "cache").mkdir(parents=True, exist_ok=True)
    out = ctx.tmp / "goproxy-bin"
    env = dict(os.environ, GOPATH=str(gtmp / "path"), GOCACHE=str(gtmp / "cache"),
               GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", CGO_ENABLED="0")
    try:
        r = subprocess.run(["go", "build", "-o", str(out), "."], cwd=HERE / "goproxy",
                           env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        ctx.goproxy_err = "go build timed out"
        return
    if r.returncode != 0:
        ctx.goproxy_err = f"go build failed: {(r.stdout + r.stderr).strip()[-300:]}"
        return
    ctx.goproxy_bin = out


def find_uring(ctx) -> None:
    cands = [ctx.args.uring_fwd] if ctx.args.uring_fwd else [
        REPO / "build-bench/engine/uring-fwd", REPO / "build/engine/uring-fwd"]
    for c in cands:
        c = Path(c)
        if c.is_file() and os.access(c, os.X_OK):
            ctx.uring_bin = c.resolve()
            return
    ctx.uring_err = "not found at " + ", ".join(str(c) for c in cands)


def uring_extra_args(binary: Path | None, user_args: str) -> list[str]:
    """User's --uring-fwd-args, plus one shard/thread when the binary has such an option."""
    extra = shlex.split(user_args)
    if not binary:
        return extra
    try:
        r = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=10)
        helptext = r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        return extra
    for opt in ("--shards", "--threads"):
        if re.search(rf"{opt}\b", helptext) and not any(x.startswith(opt) for x in extra):
            extra += [opt, "1"]
    return extra
