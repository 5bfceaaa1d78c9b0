"""The gateway workload of bench/compare.py: many keep-alive connections doing small
request/response, as an API gateway's proxy sees them. `wrk -c 256` (keep-alive, bounded
duration) through the proxy to an nginx serving a 128-byte file: requests/s, proxy CPU
µs per request, p50 and p99 latency. Standard library only."""

from __future__ import annotations

import re
from pathlib import Path

from compare_proc import LOOP, nginx_http_temp_paths, nginx_main_conf, run_cmd

FILE_BYTES = 128
FILE_PATH = "/f128"
# Latency units wrk prints (src/units.c of wrk: us, ms, s, m, h), in microseconds.
_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def nginx_file_conf(d: Path, port: int) -> str:
    """nginx.conf serving d/www/f128 (128 bytes) on LOOP:port; connections stay open for the
    whole run (nginx closes a keep-alive connection after keepalive_requests requests,
    1000 by default since 1.19.10, which would turn part of the run into churn)."""
    www = d / "www"
    www.mkdir()
    (www / FILE_PATH.lstrip("/")).write_bytes(b"x" * (FILE_BYTES - 1) + b"\n")
    return f"""
{nginx_main_conf(d, 16384)}http {{
{nginx_http_temp_paths(d)}    keepalive_timeout 300s;
    keepalive_requests 100000000;
    open_file_cache max=16;
    server {{
        listen {LOOP}:{port} backlog=4096;
        root {www};
    }}
}}
"""


def parse_wrk(out: str) -> dict:
    """Requests/sec, request count, latency percentiles (wrk --latency) and errors."""
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    n = re.search(r"(\d+) requests in", out)
    if not m or not n:
        raise RuntimeError(f"no 'Requests/sec' in wrk's output: {out.strip()[-300:]}")
    res = {"req_per_s": float(m.group(1)), "http_requests": int(n.group(1))}
    for pct, key in (("50", "p50_us"), ("90", "p90_us"), ("99", "p99_us")):
        lat = re.search(rf"^\s*{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, re.M)
        if lat:
            res[key] = float(lat.group(1)) * _UNIT_US[lat.group(2)]
    e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    res["socket_errors"] = sum(int(x) for x in e.groups()) if e else 0
    res["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    return res


def gateway_load(ctx):
    """(upstream kind, load(port)) for bench/compare.py's run_one."""
    def load(port: int) -> dict:
        t = ctx.args.gateway_duration
        argv = ["wrk", "-t1", f"-c{ctx.args.gateway_conns}", f"-d{t}s", "--timeout", "5s",
                "--latency", f"http://{LOOP}:{port}{FILE_PATH}"]
        r = run_cmd(argv, timeout=t + 40, cpu=ctx.load_cpu)
        if r.returncode != 0:
            raise RuntimeError(f"wrk failed (rc={r.returncode}): "
                               f"{(r.stdout + r.stderr).strip()[-300:]}")
        res = parse_wrk(r.stdout)
        if res["http_requests"] == 0:
            raise RuntimeError(f"wrk completed no request: {r.stdout.strip()[-300:]}")
        return res
    return "http-file", load
