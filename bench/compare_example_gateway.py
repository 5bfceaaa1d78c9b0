"""The example gateway (examples/gateway/gateway.cpp, liburingfwd's public API) as a peer
of bench/compare.py's churn workload, next to the uring-fwd binary in the same
interleaved run: issue 11 asks for ≥ 0.9× the binary's connection rate at ≤ 1.15× its
CPU per connection. Standard library only."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from compare_baseline import meson_build_dir, shown_path
from compare_proc import LOOP

GATEWAY_PEER = "example-gateway"
ROUTE = "bench"
# The gateway reads this line first (gateway.cpp's serve()), then forwards the rest.
PREAMBLE = f"ROUTE {ROUTE}\n"
GATEWAY_WORKLOADS = ("churn",)
# The workload's rows the ratio table shows: (label, metric key, unit, target from issue 11)
GATEWAY_ROWS = [
    ("Churn (new conn + req/resp)", "conn_per_s", "conn/s", "≥ 0.90×"),
    ("Proxy CPU, churn", "cpu_ms_per_1k_conn", "CPU ms/1k conn", "≤ 1.15×"),
    ("Proxy RSS after churn", "rss_kib", "KiB", ""),
]
# The preamble ahead of wrk's request, with the request still prepared once and sent from
# a buffer (no Lua call per request, as for the other peers). wrk 4.1.0 (src/wrk.c:
# main(), thread_main(); wg/wrk on GitHub) asks thread 0's script for the request twice
# when the script defines no request(): first to check that it parses as HTTP, then to
# send it for the whole run. So the first answer is the plain request, every later one
# has the preamble. Hence wrk -t1 for this peer. Should a wrk ever skip the check, the
# gateway would get no preamble and close every connection unanswered: the run fails
# (no request completed), it does not go wrong quietly. With "Connection: close" every
# connection carries one request, so the preamble comes once per connection, first.
WRK_SCRIPT = f"""-- bench/compare: the example gateway's preamble ahead of every request
local init = wrk.init
wrk.init = function(args)
  init(args)
  local plain = wrk.request()
  local framed = "{PREAMBLE.strip()}\\n" .. plain
  local checked = false
  wrk.request = function()
    if checked then return framed end
    checked = true -- the first call is wrk's check that the request is valid HTTP
    return plain
  end
end
"""


def build_example_gateway(uring_bin: Path | None, build_jobs: int | None) -> tuple[Path | None, str | None]:
    """Compiles gateway.cpp against liburingfwd.a of the meson build that made the uring-fwd
    binary, so that both run the same engine code with the same options: (binary, None)
    or (None, why not). Cached in that build directory; rebuilt when the source, the
    library or a public header is newer."""
    build = meson_build_dir(uring_bin)
    if not build:
        return None, f"no meson build directory holds {uring_bin or 'the uring-fwd binary'}"
    try:
        src = Path(json.loads((build / "meson-info" / "meson-info.json").read_text())
                   ["directories"]["source"])
    except (OSError, ValueError, KeyError) as e:
        return None, f"cannot read {build}/meson-info/meson-info.json: {e}"
    jobs = ["-j", str(build_jobs)] if build_jobs else []
    lib = build / "engine" / "liburingfwd.a"
    r = _run(["ninja", "-C", str(build), *jobs, "engine/liburingfwd.a"], 1800)
    if r.returncode != 0 or not lib.is_file():
        return None, f"ninja engine/liburingfwd.a failed: {(r.stdout + r.stderr).strip()[-300:]}"
    source = src / "examples" / "gateway" / "gateway.cpp"
    include = src / "engine" / "include"
    out = build / "bench-example-gateway"
    inputs = [source, lib, *include.rglob("*.hpp")]
    if out.is_file() and out.stat().st_mtime >= max(p.stat().st_mtime for p in inputs):
        return out, None
    libs = _run(["pkg-config", "--libs", "liburing", "fmt", "tomlplusplus"], 60)
    if libs.returncode != 0:
        return None, f"pkg-config --libs liburing fmt tomlplusplus: {libs.stderr.strip()[-300:]}"
    cxx = shlex.split(os.environ.get("CXX", "")) or ["c++"]
    if shutil.which(cxx[0]) is None:
        return None, f"{cxx[0]} not installed"
    tmp = out.with_suffix(".part")
    argv = cxx + ["-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}", str(source),
                  str(lib), *shlex.split(libs.stdout), "-pthread", "-o", str(tmp)]
    r = _run(argv, 600)
    if r.returncode != 0:
        return None, f"{cxx[0]} … gateway.cpp failed: {(r.stdout + r.stderr).strip()[-300:]}"
    tmp.rename(out)
    return out, None


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return subprocess.CompletedProcess(argv, 1, "", str(e))


def gateway_argv(binary: Path, listen_port: int, upstream_port: int) -> list[str]:
    # gateway LISTEN_PORT ROUTE=UPSTREAM: it listens on 127.0.0.1 (gateway.cpp's main).
    return [str(binary), str(listen_port), f"{ROUTE}={LOOP}:{upstream_port}"]


def wrk_script(tmp: Path) -> Path:
    path = tmp / "gateway-preamble.lua"
    if not path.exists():
        path.write_text(WRK_SCRIPT)
    return path


def describe(binary: Path | None, err: str | None) -> str:
    if not binary:
        return f"n/a ({err})"
    return (f"{shown_path(binary)} (examples/gateway/gateway.cpp linked with "
            f"{shown_path(binary.parent / 'engine' / 'liburingfwd.a')}; route {ROUTE!r}, "
            "one shard per CPU allowed = 1 when pinned)")


def gateway_table(med: dict, results: dict, peers: list[str], workloads: list[str], fmt,
                  paired_ratios) -> list[str]:
    """example-gateway ÷ uring-fwd on the churn rows, with each round's ratio range."""
    if "churn" not in workloads or not {GATEWAY_PEER, "uring-fwd"} <= set(peers):
        return []
    L = [f"## {GATEWAY_PEER} ÷ uring-fwd (churn, same run)", "",
         f"The example gateway (reads `{PREAMBLE.strip()}`, then `Engine::forward()`) against "
         "the binary, both forwarding to the same upstream. ratio = the gateway's median ÷ "
         "uring-fwd's; per round = lowest–highest of the ratio within each round.", "",
         f"| Metric | Unit | uring-fwd | {GATEWAY_PEER} | ratio | per round | target |",
         "|---|---|---:|---:|---:|---:|---|"]
    for label, k, unit, target in GATEWAY_ROWS:
        u = med.get("churn", {}).get("uring-fwd", {}).get(k)
        g = med.get("churn", {}).get(GATEWAY_PEER, {}).get(k)
        ratio = f"{g / u:.3f}×" if (g is not None and u) else "n/a"
        pr = paired_ratios(results, "churn", k, GATEWAY_PEER, "uring-fwd")
        spread = ("n/a" if not pr else f"{min(pr):.3f}–{max(pr):.3f}" if len(pr) > 1
                  else f"{pr[0]:.3f}")
        L.append(f"| {label} | {unit} | {fmt(u, unit)} | {fmt(g, unit)} | {ratio} | {spread} | "
                 f"{target} |")
    L.append("")
    return L
