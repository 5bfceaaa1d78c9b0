#!/usr/bin/env python3
"""Real clients through the proxy (issue 19, target 6): PostgreSQL's pgbench (select-only
and TPC-B) and four psql `COPY ... TO STDOUT` of 120 MB each, and redis-benchmark with and
without pipelining, each through uring-fwd and through HAProxy (`mode tcp`, with and
without splice), interleaved round by round. Reports the proxy's CPU per unit of work
(per transaction, per MB, per request) and each peer's ratio to HAProxy's better
setting, medians over the rounds with their spread (max ÷ min).

Everything listens on 127.0.0.1; the servers and clients run on --load-cpu, the proxy
on --proxy-cpu. Needs root (PostgreSQL runs as the `postgres` user), PostgreSQL 15
server binaries (initdb, pg_ctl: Debian's postgresql), pgbench, psql, redis-server and
redis-benchmark (Debian's redis-server, redis-tools). Every load is bounded in time.

    bench/real_clients.py [--rounds 5] [--seconds 8] [--uring-fwd PATH]
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOOP = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
COPY_ROWS = 120_000  # rows of 1000 bytes: 120 MB through the proxy per COPY
COPIES = 4           # per measurement: enough CPU time for the clock's 10 ms ticks
CONGESTION = Path("/proc/sys/net/ipv4/tcp_congestion_control")
HAPROXY_PEERS = ("haproxy", "haproxy-splice")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOP, 0))
        return s.getsockname()[1]


def wait_port(port: int, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with socket.create_connection((LOOP, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {LOOP}:{port} after {seconds} s")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (every thread, io-wq workers included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pg_bin(name: str) -> str:
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / name).exists():
            return str(d / name)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found (apt-get install postgresql)")
    return found


class Servers:
    """A PostgreSQL cluster and a Redis server of the run's own, on the load CPU."""

    def __init__(self, tmp: Path, load_cpu: str) -> None:
        self.tmp, self.cpu = tmp, load_cpu
        self.pg_port, self.redis_port = free_port(), free_port()
        self.pgdata = tmp / "pgdata"
        self.redis: subprocess.Popen | None = None
        self.pg_started = False

    def start(self) -> None:
        pw = pwd.getpwnam("postgres")
        os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
        as_pg = ["runuser", "-u", "postgres", "--"]
        subprocess.run(as_pg + [pg_bin("initdb"), "-D", str(self.pgdata), "-A", "trust", "-U",
                                "bench"], check=True, stdout=subprocess.DEVNULL, timeout=120)
        opts = (f"-c listen_addresses={LOOP} -p {self.pg_port} -c unix_socket_directories={self.tmp}"
                " -c fsync=off -c synchronous_commit=off -c max_connections=64")
        subprocess.run(as_pg + ["taskset", "-c", self.cpu, pg_bin("pg_ctl"), "-D",
                                str(self.pgdata), "-o", opts, "-l", str(self.tmp / "pg.log"),
                                "-w", "start"], check=True, stdout=subprocess.DEVNULL, timeout=60)
        self.pg_started = True
        subprocess.run(["pgbench", "-i", "-s", "10", "-q", "-h", LOOP, "-p", str(self.pg_port),
                        "-U", "bench", "postgres"], check=True, capture_output=True, timeout=300)
        self.redis = subprocess.Popen(
            ["taskset", "-c", self.cpu, "redis-server", "--bind", LOOP, "--port",
             str(self.redis_port), "--save", "", "--appendonly", "no", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(self.redis_port)

    def stop(self) -> None:
        if self.redis and self.redis.poll() is None:
            self.redis.terminate()
            try:
                self.redis.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.redis.kill()
        if self.pg_started:
            subprocess.run(["runuser", "-u", "postgres", "--", pg_bin("pg_ctl"), "-D",
                            str(self.pgdata), "-m", "immediate", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def start_proxy(peer: str, upstream: int, args, tmp: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if peer == "uring-fwd":
        argv = [args.uring_fwd, "--listen", f"{LOOP}:{port}", "--upstream", f"{LOOP}:{upstream}",
                "--shards", "1", "--log-level", "warn"]
    else:
        conf = tmp / f"{peer}-{port}.cfg"
        splice = "    option splice-request\n    option splice-response\n" if peer == "haproxy-splice" else ""
        pipes = "    tune.pipesize 1048576\n" if peer == "haproxy-splice" else ""
        conf.write_text(f"""global
    nbthread 1
    maxconn 4000
{pipes}defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
{splice}frontend f
    bind {LOOP}:{port}
    default_backend b
backend b
    server s {LOOP}:{upstream}
""")
        argv = ["haproxy", "-f", str(conf), "-db"]
    p = subprocess.Popen(["taskset", "-c", args.proxy_cpu] + argv, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    wait_port(port)
    return p, port


def stop_proxy(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def pgbench(port: int, seconds: int, select_only: bool, cpu: str) -> float:
    argv = ["taskset", "-c", cpu, "pgbench", "-h", LOOP, "-p", str(port), "-U", "bench", "-c", "8",
            "-j", "1", "-T", str(seconds), "-n"] + (["-S"] if select_only else []) + ["postgres"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True)
    m = re.search(r"number of transactions actually processed: (\d+)", out.stdout)
    return float(m.group(1))


def psql_copy(port: int, cpu: str) -> float:
    sql = f"COPY (SELECT repeat('x', 1000) FROM generate_series(1, {COPY_ROWS})) TO STDOUT"
    argv = ["taskset", "-c", cpu, "psql", "-h", LOOP, "-p", str(port), "-U", "bench", "-q", "-c",
            sql, "postgres"]
    moved = 0
    for _ in range(COPIES):
        with subprocess.Popen(argv, stdout=subprocess.PIPE) as p:
            while chunk := p.stdout.read(1 << 20):
                moved += len(chunk)
            if p.wait(timeout=120) != 0:
                raise RuntimeError("psql COPY failed")
    return moved / 1e6  # MB


def redis_bench(port: int, pipeline: int, cpu: str) -> float:
    n = 400_000 if pipeline > 1 else 100_000
    argv = ["taskset", "-c", cpu, "redis-benchmark", "-h", LOOP, "-p", str(port), "-t", "set,get",
            "-n", str(n), "-c", "50", "-P", str(pipeline), "-q"]
    subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    return 2.0 * n  # requests: n SETs and n GETs


WORKLOADS = {
    # name: (upstream, unit, run(port, args) -> units of work)
    "pgbench-S": ("pg", "tx", lambda port, a: pgbench(port, a.seconds, True, a.load_cpu)),
    "pgbench-tpcb": ("pg", "tx", lambda port, a: pgbench(port, a.seconds, False, a.load_cpu)),
    "psql-copy": ("pg", "MB", lambda port, a: psql_copy(port, a.load_cpu)),
    "redis": ("redis", "req", lambda port, a: redis_bench(port, 1, a.load_cpu)),
    "redis-P16": ("redis", "req", lambda port, a: redis_bench(port, 16, a.load_cpu)),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=8, help="pgbench -T (default 8)")
    ap.add_argument("--peers", default="uring-fwd,haproxy,haproxy-splice")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--uring-fwd", default=str(HERE.parent / "build-bench" / "engine" / "uring-fwd"))
    ap.add_argument("--congestion", default="cubic",
                    help="TCP congestion control for the run, restored after (as bench/compare)")
    ap.add_argument("--proxy-cpu", default="1")
    ap.add_argument("--load-cpu", default="0")
    args = ap.parse_args()
    peers = args.peers.split(",")
    workloads = args.workloads.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="uringfwd-real-"))
    servers = Servers(tmp, args.load_cpu)
    per_unit: dict = {w: {p: [] for p in peers} for w in workloads}
    congestion_before = CONGESTION.read_text().strip()
    try:
        if args.congestion != "system":
            CONGESTION.write_text(args.congestion + "\n")
        log("starting PostgreSQL (pgbench -i -s 10) and Redis")
        servers.start()
        upstream = {"pg": servers.pg_port, "redis": servers.redis_port}
        for rnd in range(1, args.rounds + 1):
            for w in workloads:
                kind, unit, run = WORKLOADS[w]
                for p in peers:
                    proxy, port = start_proxy(p, upstream[kind], args, tmp)
                    try:
                        before = cpu_seconds(proxy.pid)
                        work = run(port, args)
                        cpu = cpu_seconds(proxy.pid) - before
                    finally:
                        stop_proxy(proxy)
                    per_unit[w][p].append(cpu * 1e6 / work)
                    log(f"round {rnd} {w:12s} {p:15s} {work:12.0f} {unit}, proxy CPU {cpu:.2f} s, "
                        f"{cpu * 1e6 / work:.2f} µs/{unit}")
        congestion = CONGESTION.read_text().strip()
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        CONGESTION.write_text(congestion_before + "\n")
    print(f"# Real clients through the proxy — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"- `{' '.join(sys.argv)}`; {args.rounds} rounds interleaved round → workload → peer; "
          f"proxy on CPU {args.proxy_cpu}, servers and clients on CPU {args.load_cpu}; "
          f"congestion control {congestion}\n")
    print("| workload | unit | " + " | ".join(f"{p} CPU µs/unit (spread)" for p in peers)
          + " | uring-fwd ÷ HAProxy's better |")
    print("|---|---|" + "---:|" * (len(peers) + 1))
    for w in workloads:
        unit = WORKLOADS[w][1]
        med = {p: statistics.median(v) for p, v in per_unit[w].items() if v}
        cells = [f"{med[p]:.2f} ({max(per_unit[w][p]) / min(per_unit[w][p]):.2f})" for p in peers]
        hap = [med[p] for p in peers if p in HAPROXY_PEERS]
        ratio = f"{med['uring-fwd'] / min(hap):.2f}×" if hap and "uring-fwd" in med else "n/a"
        print(f"| {w} | {unit} | " + " | ".join(cells) + f" | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
