#!/usr/bin/env python3
"""Compare uring-fwd with other single-worker L4 TCP forwarders on loopback.

Every peer forwards 127.0.0.1:A -> 127.0.0.1:B. For each round, each workload and each
peer (interleaved: round -> workload -> peer) a fresh upstream server and a fresh proxy
are started, the load is run, the proxy is measured and everything is killed again.

Only 127.0.0.1 is ever used. Standard library only. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from compare_baseline import BASE_PEER, BASELINE_DIR, build_baseline, shown_path
from compare_example_gateway import GATEWAY_PEER, GATEWAY_WORKLOADS, build_example_gateway
from compare_example_gateway import describe as describe_gateway
from compare_floors import FLOOR_PEERS, build_floors, describe_floors
from compare_peers import (ALL_PEERS, PROXY_PEERS, build_goproxy, find_uring, start_peer,
                           start_upstream, uring_extra_args)
from compare_proc import (CLK_TCK, PeerFailed, Procs, Sampler, cpu_ticks, iowq_threads, log,
                          rss_kib, version_of)
from compare_report import markdown, summarise
from compare_sni import SNI_WORKLOAD
from compare_workloads import WORKLOAD_DEFS, syscalls_run

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

ALL_WORKLOADS = ["bulk1-fwd", "bulk1-rev", "bulk8-fwd", "bulk8-rev", "rr64", "rr16k", "churn",
                 SNI_WORKLOAD, "gateway", "syscalls", "syscalls8"]
SYSCALL_STREAMS = {"syscalls": 1, "syscalls8": 8}
WORKLOAD_GROUPS = {
    "all": ALL_WORKLOADS,
    "bulk": ["bulk1-fwd", "bulk1-rev", "bulk8-fwd", "bulk8-rev"],
    "bulk1": ["bulk1-fwd", "bulk1-rev"],
    "bulk8": ["bulk8-fwd", "bulk8-rev"],
    "rr": ["rr64", "rr16k"],
    "latency": ["rr64", "rr16k"],
    "cpu": ["bulk1-fwd"],
}

# --------------------------------------------------------------------------- context

class Ctx:
    def __init__(self, args, tmp: Path, procs: Procs) -> None:
        self.args = args
        self.tmp = tmp
        self.procs = procs
        self.pinned = not args.unpinned
        self.proxy_cpu = args.proxy_cpu if self.pinned else None
        self.load_cpu = args.load_cpu if self.pinned else None
        self.goproxy_bin: Path | None = None
        self.floor_bins: dict[str, Path] = {}
        self.floor_errs: dict[str, str] = {}
        self.gateway_bin: Path | None = None
        self.gateway_err: str | None = None
        self.goproxy_err: str | None = None
        self.uring_bin: Path | None = None
        self.uring_err: str | None = None
        self.uring_extra: list[str] = []
        self.base_bin: Path | None = None
        self.base_err: str | None = None
        self.base_extra: list[str] = []
        self.base_commit: str | None = None
        self.base_short: str | None = None
        self.base_options: dict = {}
        self.seq = 0

    def logfile(self, name: str) -> Path:
        self.seq += 1
        return self.tmp / f"{self.seq:04d}-{name}.log"

    def subdir(self, name: str) -> Path:
        self.seq += 1
        d = self.tmp / f"{self.seq:04d}-{name}"
        d.mkdir(parents=True)
        return d


def run_one(ctx: Ctx, workload: str, peer: str) -> dict:
    """One measurement: fresh upstream, fresh proxy, load, measure, stop both."""
    if workload in SYSCALL_STREAMS and peer == "direct":
        return {"skipped": "no proxy process"}
    if peer == GATEWAY_PEER and workload not in GATEWAY_WORKLOADS:
        # Its clients must send a preamble first: wrk can (churn), iperf3 and sockperf cannot.
        return {"skipped": "the example gateway runs in the churn workload only"}
    if peer in PROXY_PEERS and workload != "churn":
        # Its clients must send a PROXY header: wrk can (churn), iperf3 and sockperf cannot.
        return {"skipped": "the PROXY protocol peer runs in the churn workload only"}
    upstream_kind, load = (("iperf3", None) if workload in SYSCALL_STREAMS
                           else WORKLOAD_DEFS[workload](ctx, peer))
    up = proxy = None
    try:
        up, b = start_upstream(ctx, upstream_kind)
        proxy, a = start_peer(ctx, peer, b)
        meas: dict = {}
        if workload in SYSCALL_STREAMS:
            syscalls_run(ctx, proxy, a, meas, SYSCALL_STREAMS[workload])
        else:
            pid = proxy.pid if proxy else None
            t0 = cpu_ticks(pid) if pid else None
            w0 = time.monotonic()
            with Sampler(pid) as smp:
                meas.update(load(a))
            wall = time.monotonic() - w0
            if pid:
                if proxy.poll() is not None:
                    raise RuntimeError(f"{peer} died during the run (status {proxy.returncode})")
                cpu_s = (cpu_ticks(pid) - t0) / CLK_TCK
                meas["proxy_cpu_s"] = cpu_s
                meas["proxy_cpu_util"] = cpu_s / wall if wall else None
                if "bytes" in meas and meas["bytes"]:
                    meas["cpu_s_per_gb"] = cpu_s / (meas["bytes"] / 1e9)
                if "requests" in meas and meas["requests"]:
                    meas["cpu_ms_per_1k_conn"] = cpu_s * 1e3 / (meas["requests"] / 1e3)
                if meas.get("http_requests"):
                    meas["cpu_us_per_req"] = cpu_s * 1e6 / meas["http_requests"]
                meas["rss_kib"] = rss_kib(pid)
                meas["rss_peak_kib"] = max(smp.peak_rss, meas["rss_kib"])
                meas["iowq_threads"] = iowq_threads(pid)
                meas["iowq_peak"] = max(smp.peak_iowq, meas["iowq_threads"])
                meas["threads_peak"] = smp.peak_threads
        return meas
    except PeerFailed as e:
        return {"peer_failed": str(e)}
    except (RuntimeError, TimeoutError, OSError, KeyError, ValueError) as e:
        return {"error": f"{e.__class__.__name__}: {e}"}
    finally:
        if proxy:
            ctx.procs.stop(proxy)
        if up:
            ctx.procs.stop(up)


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(description=__doc__, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peers", default=",".join(ALL_PEERS),
                    help=f"comma list of {','.join(ALL_PEERS)} (default all), and "
                    f"{BASE_PEER} with --baseline")
    ap.add_argument("--workloads", default="all",
                    help="comma list of " + ",".join(ALL_WORKLOADS) + " or groups "
                    + ",".join(WORKLOAD_GROUPS) + " (default all)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, enough for a median that a flip "
                         "between two values in one round cannot move; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, 1 s loads, 128M syscall transfer")
    ap.add_argument("--duration", type=int, default=None, help="iperf3 -t seconds (default 10)")
    ap.add_argument("--rr-duration", type=int, default=None, help="sockperf -t seconds (default 10)")
    ap.add_argument("--churn-duration", type=int, default=None, help="wrk -d seconds (default 10)")
    ap.add_argument("--churn-conns", type=int, default=32, help="wrk concurrent connections (default 32)")
    ap.add_argument("--gateway-duration", type=int, default=None,
                    help="gateway workload: wrk -d seconds (default 10)")
    ap.add_argument("--gateway-conns", type=int, default=256,
                    help="gateway workload: wrk keep-alive connections (default 256)")
    ap.add_argument("--syscall-bytes", default=None, help="iperf3 -n for the strace run (default 1G)")
    ap.add_argument("--syscall-timeout", type=int, default=300, help="limit for the traced transfer (s)")
    ap.add_argument("--congestion", default="cubic", metavar="ALGO",
                    help="TCP congestion control for the run (net.ipv4.tcp_congestion_control, "
                    "restored after; default cubic); 'system' keeps the host's. Every peer "
                    "runs under the same one. On loopback, which has no fq qdisc, BBR paces "
                    "each socket with its own timers: it halved throughput and tripled "
                    "the proxy's CPU per GB on the development VM (bench/README.md)")
    ap.add_argument("--unpinned", action="store_true", help="do not taskset anything")
    ap.add_argument("--proxy-cpu", default="1", help="CPU list for the proxy when pinned (default 1)")
    ap.add_argument("--load-cpu", default="0", help="CPU list for load generator + server (default 0)")
    ap.add_argument("--uring-fwd", default=None, help="path to the uring-fwd binary")
    ap.add_argument("--uring-fwd-args", default="", help="extra arguments for uring-fwd (and uring-fwd-base)")
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help=f"also run peer {BASE_PEER}: uring-fwd built from git revision REV into "
                    f"{BASELINE_DIR.name}/<commit>/ (cached per commit) with the meson options of "
                    "the uring-fwd binary's build, started exactly like uring-fwd; adds the table "
                    f"uring-fwd vs {BASE_PEER}")
    ap.add_argument("--build-jobs", type=int, default=None, metavar="N",
                    help="ninja -j N for the builds (default: ninja's own)")
    ap.add_argument("--out-dir", default=str(HERE / "out"))
    ap.add_argument("--keep-tmp", action="store_true", help="keep configs and logs in the temp dir")
    a = ap.parse_args(argv)
    q = a.quick
    a.rounds = a.rounds if a.rounds is not None else (1 if q else 5)
    a.duration = a.duration if a.duration is not None else (1 if q else 10)
    a.rr_duration = a.rr_duration if a.rr_duration is not None else (1 if q else 10)
    a.churn_duration = a.churn_duration if a.churn_duration is not None else (1 if q else 10)
    a.gateway_duration = a.gateway_duration if a.gateway_duration is not None else (1 if q else 10)
    a.syscall_bytes = a.syscall_bytes if a.syscall_bytes is not None else ("128M" if q else "1G")
    peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    for p in peers:
        if p == BASE_PEER and not a.baseline:
            ap.error(f"peer {BASE_PEER} needs --baseline REV")
        if p not in ALL_PEERS and p != BASE_PEER:
            ap.error(f"unknown peer {p!r}")
    if a.baseline and BASE_PEER not in peers:
        # Right after uring-fwd, so that the two run back to back in every round.
        peers.insert(peers.index("uring-fwd") + 1 if "uring-fwd" in peers else len(peers), BASE_PEER)
    wl: list[str] = []
    for w in (x.strip() for x in a.workloads.split(",") if x.strip()):
        for x in WORKLOAD_GROUPS.get(w, [w]):
            if x not in ALL_WORKLOADS:
                ap.error(f"unknown workload {x!r}")
            if x not in wl:
                wl.append(x)
    a.peer_list = peers
    a.workload_list = [w for w in ALL_WORKLOADS if w in wl]
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    return a


EPILOG = f"""\
Check a refactor for regressions: uring-fwd from the work tree against uring-fwd built
from REV, in one interleaved run, proxy pinned:
  bench/compare --baseline REV --peers uring-fwd,{BASE_PEER} --workloads bulk1-fwd,rr64,churn \\
      --rounds 5 --duration 5 --rr-duration 5 --churn-duration 5
"""


CONGESTION = Path("/proc/sys/net/ipv4/tcp_congestion_control")


def set_congestion(wanted: str) -> tuple[str, str]:
    """Sets the congestion control for the run; returns (what the host had, what is in
    force now). 'system' changes nothing."""
    try:
        before = CONGESTION.read_text().strip()
    except OSError:
        return "?", "?"
    if wanted == "system" or wanted == before:
        return before, before
    try:
        CONGESTION.write_text(wanted + "\n")
    except OSError as e:
        log(f"cannot set the congestion control to {wanted} ({e}); keeping {before}")
    return before, CONGESTION.read_text().strip()


def restore_congestion(before: str) -> None:
    try:
        if before != "?" and CONGESTION.read_text().strip() != before:
            CONGESTION.write_text(before + "\n")
    except OSError as e:
        log(f"cannot restore the congestion control {before}: {e}")


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def socat_version() -> str:
    try:
        r = subprocess.run(["socat", "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e.__class__.__name__})"
    for line in (r.stdout + r.stderr).splitlines():
        if line.startswith("socat version"):
            return line.strip()
    return "?"


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def build_type(binary: Path) -> str:
    try:
        info = binary.parent.parent / "meson-info" / "intro-buildoptions.json"
        for o in json.loads(info.read_text()):
            if o.get("name") == "buildtype":
                return f"buildtype={o['value']}"
    except (OSError, ValueError):
        pass
    return "buildtype=?"


def describe_uring(binary: Path | None, extra: list[str], rev: str, err: str | None) -> str:
    if not binary:
        return f"n/a ({err})"
    args = f" {shlex.join(extra)}" if extra else ""
    return f"{shown_path(binary)}{args} (git {rev}, {build_type(binary)})"


def git_rev() -> str:
    try:
        r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        d = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() + ("+dirty" if d.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    argv0 = os.environ.get("BENCH_COMPARE_ARGV0", "python3 bench/compare.py")
    command = " ".join([argv0] + [shlex.quote(x) for x in argv])
    if not args.unpinned and (os.cpu_count() or 1) < 2:
        log("fewer than 2 CPUs: running unpinned")
        args.unpinned = True
    now = _dt.datetime.now().astimezone()
    stamp = now.strftime("%Y%m%d-%H%M%S")
    tmp = Path(tempfile.mkdtemp(prefix="uring-fwd-bench-"))
    procs = Procs()

    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    ctx = Ctx(args, tmp, procs)
    find_uring(ctx)
    ctx.uring_extra = uring_extra_args(ctx.uring_bin, args.uring_fwd_args)
    if any(p.startswith("uring-fwd") for p in args.peer_list) and ctx.uring_err:
        log(f"uring-fwd: {ctx.uring_err}")
    if args.baseline:
        # Built before the harness pins itself, so that the compiler may use every CPU.
        build_baseline(ctx)
        if ctx.base_err:
            log(f"{BASE_PEER}: {ctx.base_err}")
        ctx.base_extra = uring_extra_args(ctx.base_bin, args.uring_fwd_args)
    if not args.unpinned:
        # Keep this harness (and its /proc sampler) off the proxy's CPU too.
        try:
            cpus = set()
            for part in args.load_cpu.split(","):
                lo, _, hi = part.partition("-")
                cpus.update(range(int(lo), int(hi or lo) + 1))
            os.sched_setaffinity(0, cpus)
        except (ValueError, OSError) as e:
            log(f"could not pin the harness to CPU {args.load_cpu}: {e}")
    results: dict = {w: {p: [] for p in args.peer_list} for w in args.workload_list}
    interrupted = None
    congestion_before, congestion = set_congestion(args.congestion)
    if True:
        placement = ("unpinned" if args.unpinned else
                     f"proxy pinned to CPU {args.proxy_cpu}; load generator + upstream server pinned to CPU {args.load_cpu}")
        meta = {
            "date": now.isoformat(timespec="seconds"),
            "command": command,
            "kernel": platform.release(),
            "cpu_model": cpu_model(),
            "ncpu": os.cpu_count(),
            "placement": placement,
            "congestion": (congestion if congestion == congestion_before else
                           f"{congestion} (the host's {congestion_before} restored after the run)"),
            "loadavg_start": loadavg(),
            "rounds": args.rounds,
            "duration": args.duration, "rr_duration": args.rr_duration,
            "churn_duration": args.churn_duration, "churn_conns": args.churn_conns,
            "gateway_duration": args.gateway_duration, "gateway_conns": args.gateway_conns,
            "syscall_bytes": args.syscall_bytes,
            "peers": args.peer_list, "workloads": args.workload_list,
            "versions": {
                "uring-fwd": describe_uring(ctx.uring_bin, ctx.uring_extra, git_rev(), ctx.uring_err),
                "haproxy": version_of(["haproxy", "-v"]),
                "nginx": version_of(["nginx", "-v"]),
                "go": version_of(["go", "version"]),
                "socat": socat_version(),
                "iperf3": version_of(["iperf3", "--version"]),
                "sockperf": version_of(["sockperf", "--version"]),
                "wrk": version_of(["wrk", "--version"]),
                "strace": version_of(["strace", "-V"]),
            },
        }
        if args.baseline:
            meta["baseline"] = {"rev": args.baseline, "commit": ctx.base_commit,
                                "short": ctx.base_short, "options": ctx.base_options}
            meta["versions"][BASE_PEER] = describe_uring(
                ctx.base_bin, ctx.base_extra, f"{ctx.base_short} = --baseline {args.baseline}",
                ctx.base_err)
    try:
        if any(p in FLOOR_PEERS for p in args.peer_list):
            ctx.floor_bins, ctx.floor_errs = build_floors(tmp)
            for p, err in ctx.floor_errs.items():
                log(f"{p}: {err}")
            meta["versions"]["floors"] = describe_floors(ctx.floor_bins)
        if GATEWAY_PEER in args.peer_list:
            log(f"building {GATEWAY_PEER}")
            ctx.gateway_bin, ctx.gateway_err = build_example_gateway(ctx.uring_bin, args.build_jobs)
            if ctx.gateway_err:
                log(f"{GATEWAY_PEER}: {ctx.gateway_err}")
            meta["versions"][GATEWAY_PEER] = describe_gateway(ctx.gateway_bin, ctx.gateway_err)
        if "goproxy" in args.peer_list:
            log("building goproxy")
            build_goproxy(ctx)
            if ctx.goproxy_err:
                log(f"goproxy: {ctx.goproxy_err}")
        for rnd in range(1, args.rounds + 1):
            for w in args.workload_list:
                for p in args.peer_list:
                    t0 = time.monotonic()
                    r = run_one(ctx, w, p)
                    r["wall_s"] = round(time.monotonic() - t0, 2)
                    r["loadavg_after"] = loadavg()
                    r["round"] = rnd
                    results[w][p].append(r)
                    short = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                             if k in ("gbps", "p50_us", "p99_us", "conn_per_s", "req_per_s",
                                      "cpu_s_per_gb", "cpu_us_per_req", "cpu_ms_per_1k_conn",
                                      "syscalls_per_gb", "rss_kib", "iowq_peak", "error",
                                      "peer_failed", "skipped", "socket_errors")}
                    log(f"round {rnd}/{args.rounds} {w:10s} {p:15s} {r['wall_s']:5.1f}s {short}")
    except KeyboardInterrupt as e:
        interrupted = str(e) or "interrupted"
        log(f"interrupted ({interrupted}); reporting what was measured")
    finally:
        procs.stop_all()
        restore_congestion(congestion_before)
        if not args.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"configs and logs kept in {tmp}")

    summary = summarise(results, args.peer_list, args.workload_list)
    meta["loadavg_end"] = loadavg()
    if interrupted:
        meta["interrupted"] = interrupted
    md = markdown(meta, summary, results, args.peer_list, args.workload_list)
    if interrupted:
        md += f"\n**Run interrupted ({interrupted}); partial results.**\n"
    print(md)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results-{stamp}.md").write_text(md + "\n")
    (out / f"results-{stamp}.json").write_text(json.dumps(
        {"meta": meta, "raw": results, **summary}, indent=2, sort_keys=True) + "\n")
    log(f"wrote {out}/results-{stamp}.md and .json")
    return 130 if interrupted else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
