"""The loads of bench/compare.py: iperf3 (bulk), sockperf (round trips), wrk (churn; the
gateway workload is in compare_gateway.py) and the strace-counted transfer. Each
workload gives (upstream kind, load(port) -> measurements). Standard library only."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from compare_example_gateway import GATEWAY_PEER, wrk_script
from compare_gateway import gateway_load
import compare_sni
from compare_peers import PROXY_PEERS
from compare_proc import LOOP, descendants, run_cmd

def bulk(ctx, streams: int, reverse: bool):
    def load(port: int) -> dict:
        t = ctx.args.duration
        argv = ["iperf3", "-c", LOOP, "-p", str(port), "-t", str(t), "-J",
                "--connect-timeout", "5000", "-P", str(streams)]
        if reverse:
            argv.append("-R")
        r = run_cmd(argv, timeout=t + 40, cpu=ctx.load_cpu)
        try:
            j = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(f"iperf3 gave no JSON (rc={r.returncode}): {r.stderr.strip()[-300:]}")
        if j.get("error"):
            raise RuntimeError(f"iperf3: {j['error']}")
        s = j["end"]["sum_received"]
        return {"gbps": s["bits_per_second"] / 1e9, "bytes": int(s["bytes"]),
                "retransmits": j["end"].get("sum_sent", {}).get("retransmits")}
    return "iperf3", load


def rr(ctx, size: int):
    def load(port: int) -> dict:
        t = ctx.args.rr_duration
        argv = ["sockperf", "ping-pong", "--tcp", "-i", LOOP, "-p", str(port), "-m", str(size),
                "-t", str(t), "--full-rtt"]
        r = run_cmd(argv, timeout=t + 40, cpu=ctx.load_cpu)
        txt = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
        pct = {float(m.group(1)): float(m.group(2))
               for m in re.finditer(r"percentile\s+([\d.]+)\s*=\s*([\d.]+)", txt)}
        if r.returncode != 0 or 50.0 not in pct:
            raise RuntimeError(f"sockperf failed (rc={r.returncode}): {txt.strip()[-300:]}")
        m = re.search(r"avg-rtt=([\d.]+)", txt)
        obs = re.search(r"Total (\d+) observations", txt)
        return {"p50_us": pct[50.0], "p99_us": pct.get(99.0), "p999_us": pct.get(99.9),
                "avg_us": float(m.group(1)) if m else None,
                "observations": int(obs.group(1)) if obs else None}
    return "sockperf", load


def churn(ctx, peer: str, tls_hello: bool = False):
    script = compare_sni.lua_script(ctx.subdir("churn-tls")) if tls_hello else None
    def load(port: int) -> dict:
        t = ctx.args.churn_duration
        # -t1: one client thread on the load CPU (and what the gateway's script relies on).
        argv = ["wrk", "-t1", f"-c{ctx.args.churn_conns}", f"-d{t}s", "--timeout", "5s",
                "-H", "Connection: close", f"http://{LOOP}:{port}/"]
        if peer == GATEWAY_PEER:
            argv[1:1] = ["-s", str(wrk_script(ctx.tmp))]  # the preamble ahead of the request
        elif peer in PROXY_PEERS:
            argv[1:1] = ["-s", str(proxy_header_script(ctx.tmp))]
        if script:  # every connection starts with a ClientHello (compare_sni.py)
            argv = compare_sni.churn_tls_argv(script, ctx.args.churn_conns, t, LOOP, port)
        r = run_cmd(argv, timeout=t + 40, cpu=ctx.load_cpu)
        m = re.search(r"Requests/sec:\s*([\d.]+)", r.stdout)
        if r.returncode != 0 or not m:
            raise RuntimeError(f"wrk failed (rc={r.returncode}): {(r.stdout + r.stderr).strip()[-300:]}")
        n = re.search(r"(\d+) requests in", r.stdout)
        e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", r.stdout)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", r.stdout)
        errs = sum(int(x) for x in e.groups()) if e else 0
        if n and int(n.group(1)) == 0:
            raise RuntimeError(f"wrk completed no request: {r.stdout.strip()[-300:]}")
        return {"conn_per_s": float(m.group(1)), "requests": int(n.group(1)) if n else None,
                "socket_errors": errs, "non2xx": int(non2xx.group(1)) if non2xx else 0}
    return ("http-proxy" if peer in PROXY_PEERS else "http"), load


# A PROXY v1 header ahead of every request, for PROXY_PEERS. With "Connection: close"
# every connection carries one request, so that is one header first on each. wrk parses
# the first request() of its thread 0 as HTTP to check the script (wrk.c,
# script_verify_request) and never sends it, so that one call returns the bare request.
PROXY_HEADER_SCRIPT = """-- bench/compare: a PROXY protocol header ahead of every request
local init = wrk.init
wrk.init = function(args)
  init(args)
  local plain = wrk.request()
  local framed = "PROXY TCP4 127.0.0.1 127.0.0.1 40000 80\\r\\n" .. plain
  local checked = false
  wrk.request = function()
    if checked then return framed end
    checked = true
    return plain
  end
end
"""


def proxy_header_script(tmp: Path) -> Path:
    path = tmp / "proxy-header.lua"
    if not path.exists():
        path.write_text(PROXY_HEADER_SCRIPT)
    return path


def parse_strace_total(path: Path) -> int | None:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        toks = line.split()
        if toks and toks[-1] == "total":
            nums = toks[:-1]
            # % time, seconds, usecs/call, calls, [errors]
            if len(nums) >= 4:
                return int(nums[3])
    return None


def syscalls_run(ctx, proxy: subprocess.Popen | None, port: int, meas: dict,
                 streams: int) -> None:
    """One iperf3 -n transfer (over `streams` parallel streams) with strace -c -f attached
    to the proxy tree."""
    nbytes = ctx.args.syscall_bytes
    out = ctx.tmp / f"strace-{time.monotonic_ns()}.txt"
    pids = descendants(proxy.pid)
    argv = ["strace", "-c", "-f", "-qq", "-o", str(out)]
    for p in pids:
        argv += ["-p", str(p)]
    st = ctx.procs.start(argv, cpu=ctx.load_cpu, logfile=ctx.logfile("strace"))
    try:
        time.sleep(1.0)  # let strace attach to every thread
        if st.poll() is not None:
            raise RuntimeError(f"strace exited early with status {st.returncode}")
        r = run_cmd(["iperf3", "-c", LOOP, "-p", str(port), "-n", nbytes, "-P", str(streams), "-J",
                     "--connect-timeout", "5000"], timeout=ctx.args.syscall_timeout, cpu=ctx.load_cpu)
        try:
            j = json.loads(r.stdout)
        except json.JSONDecodeError:
            raise RuntimeError(f"iperf3 gave no JSON (rc={r.returncode}): {r.stderr.strip()[-300:]}")
        if j.get("error"):
            raise RuntimeError(f"iperf3: {j['error']}")
        byts = int(j["end"]["sum_received"]["bytes"])
        time.sleep(0.2)
    finally:
        if st.poll() is None:
            os.kill(st.pid, signal.SIGINT)  # strace detaches and writes the summary
            try:
                st.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        ctx.procs.stop(st)
    calls = parse_strace_total(out)
    if calls is None:
        raise RuntimeError(f"no strace summary in {out}")
    meas.update({"syscalls": calls, "bytes": byts,
                 "syscalls_per_gb": calls / (byts / 1e9) if byts else None})


# workload -> (ctx, peer) -> (upstream kind, load(port))
WORKLOAD_DEFS = {
    "bulk1-fwd": lambda c, p: bulk(c, 1, False),
    "bulk1-rev": lambda c, p: bulk(c, 1, True),
    "bulk8-fwd": lambda c, p: bulk(c, 8, False),
    "bulk8-rev": lambda c, p: bulk(c, 8, True),
    "rr64": lambda c, p: rr(c, 64),
    "rr16k": lambda c, p: rr(c, 16384),
    "churn": churn,
    compare_sni.SNI_WORKLOAD: lambda c, p: churn(c, p, tls_hello=True),
    "gateway": lambda c, p: gateway_load(c),
}
