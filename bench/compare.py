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
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import compare_sni

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LOOP = "127.0.0.1"

ALL_PEERS = ["direct", "uring-fwd", "haproxy-splice", "haproxy", "nginx", "socat", "goproxy"]
# uring-fwd with one data path forced (plain "uring-fwd" runs the default, auto).
URING_VARIANTS = {"uring-fwd-copy": ["--data-path", "copy"],
                  "uring-fwd-splice": ["--data-path", "splice"],
                  # the opt-in low-latency mode: poll 50 µs before sleeping
                  "uring-fwd-busy": ["--busy-poll", "50us"],
                  # the cost of routing: a 16-member Maglev pool (the members are all the
                  # one upstream, added in start_peer) instead of one upstream
                  "uring-fwd-maglev16": ["--balance", "maglev"]}
# Extra --upstream copies of the upstream a variant gets (a pool of 1 + this many).
URING_POOL_EXTRA = {"uring-fwd-maglev16": 15}
ALL_PEERS += list(URING_VARIANTS)
# uring-fwd routing by TLS server name (bench/compare_sni.py).
ALL_PEERS += [compare_sni.SNI_PEER]
# uring-fwd built from another git revision (--baseline REV) and started exactly like
# uring-fwd: a refactor is checked for regressions by running both in one interleaved run.
BASE_PEER = "uring-fwd-base"
BASELINE_DIR = REPO / "build-bench-baseline"
# The meson options that decide what the compiler emits and how the binary is linked. The
# baseline build copies each one's value from the build of the uring-fwd binary, so that
# the two binaries differ in their source only.
MIRRORED_OPTIONS = ("buildtype", "optimization", "debug", "b_ndebug", "b_lto", "b_pgo",
                    "b_pie", "b_staticpic", "b_sanitize", "b_coverage", "b_asneeded", "b_lundef",
                    "cpp_std", "cpp_args", "cpp_link_args", "cpp_rtti", "cpp_eh", "cpp_debugstl",
                    "default_library", "prefer_static", "strip", "unity", "unity_size",
                    "warning_level", "werror")
ALL_WORKLOADS = ["bulk1-fwd", "bulk1-rev", "bulk8-fwd", "bulk8-rev", "rr64", "rr16k", "churn",
                 compare_sni.SNI_WORKLOAD,
                 "syscalls", "syscalls8"]
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

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def log(msg: str) -> None:
    ts = time.strftime("%H:%M:%S")
    print(f"[{ts}] {msg}", file=sys.stderr, flush=True)


class PeerFailed(Exception):
    """The proxy (or its upstream) could not be started; reported as n/a."""


# --------------------------------------------------------------------------- processes

class Procs:
    """Every long-lived process we start, each in its own process group."""

    def __init__(self) -> None:
        self.live: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def start(self, argv: list[str], *, cpu: str | None, env: dict | None = None,
              logfile: Path | None = None, cwd: str | None = None) -> subprocess.Popen:
        if cpu is not None:
            argv = ["taskset", "-c", cpu] + argv
        out = open(logfile, "ab") if logfile else subprocess.DEVNULL
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, env=env, cwd=cwd,
                                 preexec_fn=_raise_nofile)
        finally:
            if logfile:
                out.close()
        with self.lock:
            self.live.append(p)
        return p

    def stop(self, p: subprocess.Popen, grace: float = 3.0) -> None:
        if p.poll() is None:
            _killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left in the group (forked children, nginx workers) goes too.
        _killpg(p.pid, signal.SIGKILL)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        with self.lock:
            if p in self.live:
                self.live.remove(p)

    def stop_all(self) -> None:
        with self.lock:
            ps = list(self.live)
        for p in ps:
            self.stop(p, grace=1.0)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _raise_nofile() -> None:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass


def run_cmd(argv: list[str], *, timeout: float, cpu: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a bounded foreground command in its own group; kill the group on timeout."""
    if cpu is not None:
        argv = ["taskset", "-c", cpu] + argv
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, env=env,
                         preexec_fn=_raise_nofile)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=10)
        raise TimeoutError(f"{shlex.join(argv)} timed out after {timeout:.0f}s; "
                           f"stderr tail: {err.decode(errors='replace')[-300:]}")
    except BaseException:
        _killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def version_of(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        txt = (r.stdout + r.stderr).strip().splitlines()
        return txt[0].strip() if txt else "?"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e.__class__.__name__})"


# --------------------------------------------------------------------------- ports

_used_ports: set[int] = set()


def free_port() -> int:
    for _ in range(100):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((LOOP, 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port not in _used_ports:
            _used_ports.add(port)
            return port
    raise RuntimeError("no free port on 127.0.0.1")


def listening(port: int) -> bool:
    """True when some socket LISTENs on port (127.0.0.1 or wildcard). Makes no connection."""
    want = f":{port:04X}"
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if parts[3] == "0A" and parts[1].endswith(want):
                        return True
        except OSError:
            pass
    return False


def wait_listening(port: int, proc: subprocess.Popen, what: str, logfile: Path | None,
                   timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PeerFailed(f"{what} exited with status {proc.returncode} before listening"
                             + _log_tail(logfile))
        if listening(port):
            return
        time.sleep(0.05)
    raise PeerFailed(f"{what} not listening on {LOOP}:{port} after {timeout:.0f}s" + _log_tail(logfile))


def _log_tail(logfile: Path | None) -> str:
    if not logfile or not logfile.exists():
        return ""
    txt = logfile.read_text(errors="replace").strip()
    if not txt:
        return ""
    lines = txt.splitlines()
    important = [ln for ln in lines if re.search(r"alert|emerg|error|fatal|fail|panic", ln, re.I)]
    tail = " | ".join((important or lines)[-3:])
    return f": {tail[-300:]}"


# --------------------------------------------------------------------------- /proc

def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            s = fh.read()
    except OSError:
        return None
    return s[s.rindex(")") + 2:].split()  # rest[0] is field 3 (state)


def descendants(pid: int) -> list[int]:
    """pid and all its live descendants (scan of /proc; children of children too)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        f = _stat_fields(int(d))
        if f:
            kids.setdefault(int(f[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_ticks(pid: int) -> int:
    """utime+stime (all threads, incl. exited ones) + reaped children, over the live tree."""
    total = 0
    for p in descendants(pid):
        f = _stat_fields(p)
        if f:
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    return total


def rss_kib(pid: int) -> int:
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def iowq_threads(pid: int) -> int:
    n = 0
    for p in descendants(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/comm") as fh:
                    if fh.read().startswith("iou-wrk"):
                        n += 1
            except OSError:
                pass
    return n


def thread_count(pid: int) -> int:
    n = 0
    for p in descendants(pid):
        try:
            n += len(os.listdir(f"/proc/{p}/task"))
        except OSError:
            pass
    return n


class Sampler:
    """Samples the proxy tree during a run: peak io-wq threads and peak RSS."""

    def __init__(self, pid: int | None, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.peak_iowq = 0
        self.peak_rss = 0
        self.peak_threads = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        if self.pid:
            self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        if self._t.is_alive():
            self._t.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_iowq = max(self.peak_iowq, iowq_threads(self.pid))
                self.peak_rss = max(self.peak_rss, rss_kib(self.pid))
                self.peak_threads = max(self.peak_threads, thread_count(self.pid))
            except Exception:  # sampling must never kill a run
                pass
            self._stop.wait(self.period)


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


# --------------------------------------------------------------------------- upstreams

def start_upstream(ctx: Ctx, kind: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    lf = ctx.logfile(f"upstream-{kind}")
    if kind == "iperf3":
        argv = ["iperf3", "-s", "-B", LOOP, "-p", str(port)]
    elif kind == "sockperf":
        argv = ["sockperf", "server", "--tcp", "-i", LOOP, "-p", str(port)]
    elif kind == "http":
        d = ctx.subdir("nginx-http")
        conf = d / "nginx.conf"
        conf.write_text(f"""
worker_processes 1;
daemon off;
master_process on;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_timeout 0;
    server {{
        listen {LOOP}:{port} backlog=4096;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
""")
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

def start_peer(ctx: Ctx, peer: str, upstream_port: int) -> tuple[subprocess.Popen | None, int]:
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
worker_processes 1;
daemon off;
master_process on;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 20000; }}
stream {{
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


def build_goproxy(ctx: Ctx) -> None:
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


def find_uring(ctx: Ctx) -> None:
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


# --------------------------------------------------------------------------- baseline

def build_baseline(ctx: Ctx) -> None:
    """Build uring-fwd from --baseline REV into build-bench-baseline/<commit>/ with the meson
    options of the uring-fwd binary's build. Cached per commit: a second run finds ninja with
    nothing to do. On failure ctx.base_err says why and uring-fwd-base shows n/a."""
    rev = ctx.args.baseline
    try:
        r = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if r.returncode != 0:
            ctx.base_err = f"--baseline {rev!r} is not a commit of {REPO}"
            return
        ctx.base_commit = r.stdout.strip()
        ctx.base_short = _git("rev-parse", "--short", ctx.base_commit).stdout.strip()
        ctx.base_bin = _build_baseline(ctx, BASELINE_DIR / ctx.base_commit[:12])
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        ctx.base_err = f"baseline build of {rev} failed: {e}"


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          timeout=60)


def _build_baseline(ctx: Ctx, top: Path) -> Path:
    src, build = top / "src", top / "build"
    if not src.is_dir():
        log(f"{BASE_PEER}: extracting {ctx.base_short} into {shown_path(src)}")
        top.mkdir(parents=True, exist_ok=True)
        # Extract beside src and rename, so that an interrupted extraction is never taken
        # for a cached tree.
        part = Path(tempfile.mkdtemp(prefix="src-", dir=top))
        archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "--format=tar",
                                    ctx.base_commit], stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "-C", str(part)], stdin=archive.stdout,
                             capture_output=True, text=True, timeout=300)
        archive.stdout.close()
        if archive.wait(timeout=60) != 0 or tar.returncode != 0:
            shutil.rmtree(part, ignore_errors=True)
            raise RuntimeError(f"git archive | tar -x failed: {tar.stderr.strip()[-300:]}")
        part.rename(src)

    main_build = meson_build_dir(ctx.uring_bin)
    main_opts = meson_options(main_build) if main_build else {}
    if not main_opts:
        log(f"{BASE_PEER}: no meson build found for {ctx.uring_bin or 'uring-fwd'}; "
            "building the baseline with the project's default options")
    want = {k: main_opts[k] for k in MIRRORED_OPTIONS if k in main_opts}
    # buildtype, optimization and debug all go in although meson warns that buildtype and
    # the pair override each other: meson 1.0 keeps buildtype=debugoptimized beside an
    # explicit optimization=3, so no one of them implies the others.
    # The project's own options too, where the baseline has them; the tests are not needed.
    own = set(re.findall(r"option\(\s*'(\w+)'", "".join(
        f.read_text() for f in (src / "meson_options.txt", src / "meson.options") if f.is_file())))
    want.update({k: v for k, v in main_opts.get("user", {}).items() if k in own})
    if "tests" in own:
        want["tests"] = False
    cxx = compiler_of(main_build) if main_build else None
    setup = {"options": want, "cxx": cxx}

    # A build set up with other options or another compiler is set up afresh.
    stamp = top / "setup.json"
    try:
        done = json.loads(stamp.read_text())
    except (OSError, ValueError):
        done = None
    if done != setup or not (build / "build.ninja").is_file():
        log(f"{BASE_PEER}: meson setup {shown_path(build)} ({', '.join(f'{k}={meson_value(v)}' for k, v in want.items())})")
        shutil.rmtree(build, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        env = dict(os.environ, CXX=shlex.join(cxx)) if cxx else None
        _build_step(["meson", "setup", str(build), str(src)]
                    + [f"-D{k}={meson_value(v)}" for k, v in want.items()], env=env, timeout=300)
        stamp.write_text(json.dumps(setup, indent=2, sort_keys=True) + "\n")

    log(f"{BASE_PEER}: ninja -C {shown_path(build)} engine/uring-fwd")
    jobs = ["-j", str(ctx.args.build_jobs)] if ctx.args.build_jobs else []
    out = _build_step(["ninja", "-C", str(build), *jobs, "engine/uring-fwd"], timeout=1800)
    if "no work to do" in out:
        log(f"{BASE_PEER}: {ctx.base_short} already built")

    # Proof, not trust: the option values of the two builds as meson reports them.
    got = meson_options(build)
    differ = [f"{k}: {got.get(k)!r} here, {main_opts[k]!r} in {shown_path(main_build)}"
              for k in MIRRORED_OPTIONS if k in main_opts and got.get(k) != main_opts[k]]
    if differ:
        raise RuntimeError("options differ from the uring-fwd build: " + "; ".join(differ))
    ctx.base_options = {k: got[k] for k in MIRRORED_OPTIONS if k in got}
    binary = build / "engine" / "uring-fwd"
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"{shown_path(binary)} missing after the build")
    return binary


def _build_step(argv: list[str], *, timeout: float, env: dict | None = None) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    out = r.stdout + r.stderr
    if r.returncode != 0:
        print(out[-4000:], file=sys.stderr)
        errors = [ln.strip() for ln in out.splitlines() if re.search(r"\berror\b", ln, re.I)]
        why = " | ".join(errors[-2:])[-300:] if errors else out.strip()[-300:]
        raise RuntimeError(f"{shlex.join(argv[:3])} … exited {r.returncode}: {why}")
    return out


def meson_build_dir(binary: Path | None) -> Path | None:
    """The meson build directory that produced binary (<build>/engine/uring-fwd), if any."""
    if binary and (binary.parent.parent / "meson-info").is_dir():
        return binary.parent.parent
    return None


def meson_options(build: Path) -> dict:
    """{name: value} of a meson build's options; the project's own are under "user"."""
    opts: dict = {}
    try:
        for o in json.loads((build / "meson-info" / "intro-buildoptions.json").read_text()):
            if o.get("section") == "user":
                opts.setdefault("user", {})[o["name"]] = o["value"]
            elif o.get("machine") != "build":  # the build machine's options are for cross builds
                opts[o["name"]] = o["value"]
    except (OSError, ValueError):
        pass
    return opts


def meson_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return repr(v)  # meson reads "['a', 'b']" as an array
    return str(v)


def compiler_of(build: Path) -> list[str] | None:
    """The C++ compiler command (ccache included) that built uring-fwd in build."""
    try:
        for t in json.loads((build / "meson-info" / "intro-targets.json").read_text()):
            if t.get("name") == "uring-fwd":
                for s in t.get("target_sources", []):
                    if s.get("language") == "cpp" and s.get("compiler"):
                        return s["compiler"]
    except (OSError, ValueError):
        pass
    return None


# --------------------------------------------------------------------------- workloads

def bulk(ctx: Ctx, streams: int, reverse: bool):
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


def rr(ctx: Ctx, size: int):
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


def churn(ctx: Ctx, tls_hello: bool = False):
    script = compare_sni.lua_script(ctx.subdir("churn-tls")) if tls_hello else None
    def load(port: int) -> dict:
        t = ctx.args.churn_duration
        argv = ["wrk", "-t1", f"-c{ctx.args.churn_conns}", f"-d{t}s", "--timeout", "5s",
                "-H", "Connection: close", f"http://{LOOP}:{port}/"]
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
        return {"conn_per_s": float(m.group(1)), "requests": int(n.group(1)) if n else None,
                "socket_errors": errs, "non2xx": int(non2xx.group(1)) if non2xx else 0}
    return "http", load


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


def syscalls_run(ctx: Ctx, proxy: subprocess.Popen | None, port: int, meas: dict,
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


WORKLOAD_DEFS = {
    "bulk1-fwd": lambda c: bulk(c, 1, False),
    "bulk1-rev": lambda c: bulk(c, 1, True),
    "bulk8-fwd": lambda c: bulk(c, 8, False),
    "bulk8-rev": lambda c: bulk(c, 8, True),
    "rr64": lambda c: rr(c, 64),
    "rr16k": lambda c: rr(c, 16384),
    "churn": churn,
    compare_sni.SNI_WORKLOAD: lambda c: churn(c, tls_hello=True),
}


def run_one(ctx: Ctx, workload: str, peer: str) -> dict:
    """One measurement: fresh upstream, fresh proxy, load, measure, stop both."""
    if workload in SYSCALL_STREAMS and peer == "direct":
        return {"skipped": "no proxy process"}
    upstream_kind, load = (("iperf3", None) if workload in SYSCALL_STREAMS
                           else WORKLOAD_DEFS[workload](ctx))
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


# --------------------------------------------------------------------------- reporting

# (row label, workload, metric key, unit, higher_is_better)
ROWS = [
    ("Bulk 1 stream c→s", "bulk1-fwd", "gbps", "Gbit/s", True),
    ("Bulk 1 stream s→c", "bulk1-rev", "gbps", "Gbit/s", True),
    ("Bulk 8 streams c→s", "bulk8-fwd", "gbps", "Gbit/s", True),
    ("Bulk 8 streams s→c", "bulk8-rev", "gbps", "Gbit/s", True),
    ("RR 64 B p50", "rr64", "p50_us", "µs", False),
    ("RR 64 B p99", "rr64", "p99_us", "µs", False),
    ("RR 64 B p99.9", "rr64", "p999_us", "µs", False),
    ("RR 16 KiB p50", "rr16k", "p50_us", "µs", False),
    ("RR 16 KiB p99", "rr16k", "p99_us", "µs", False),
    ("RR 16 KiB p99.9", "rr16k", "p999_us", "µs", False),
    ("Churn (new conn + req/resp)", "churn", "conn_per_s", "conn/s", True),
    ("Proxy CPU, bulk 1 c→s", "bulk1-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 1 s→c", "bulk1-rev", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 c→s", "bulk8-fwd", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, bulk 8 s→c", "bulk8-rev", "cpu_s_per_gb", "CPU s/GB", False),
    ("Proxy CPU, churn", "churn", "cpu_ms_per_1k_conn", "CPU ms/1k conn", False),
    *compare_sni.ROWS,
    ("Proxy CPU utilisation, bulk 1 c→s", "bulk1-fwd", "proxy_cpu_util", "cores", False),
    # What a round trip's latency costs: busy polling trades CPU for it.
    ("Proxy CPU utilisation, RR 64 B", "rr64", "proxy_cpu_util", "cores", False),
    ("Proxy CPU utilisation, RR 16 KiB", "rr16k", "proxy_cpu_util", "cores", False),
    ("Syscalls, 1 stream -n transfer", "syscalls", "syscalls_per_gb", "calls/GB", False),
    ("Syscalls, 8 streams -n transfer", "syscalls8", "syscalls_per_gb", "calls/GB", False),
    ("Proxy RSS after bulk 1 c→s", "bulk1-fwd", "rss_kib", "KiB", False),
    ("Proxy RSS after bulk 8 c→s", "bulk8-fwd", "rss_kib", "KiB", False),
    ("Proxy RSS after churn", "churn", "rss_kib", "KiB", False),
    ("io-wq threads, peak bulk 8 c→s", "bulk8-fwd", "iowq_peak", "threads", False),
    ("io-wq threads, peak bulk 1 c→s", "bulk1-fwd", "iowq_peak", "threads", False),
    ("io-wq threads, peak churn", "churn", "iowq_peak", "threads", False),
]


def fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit in ("KiB", "threads", "conn/s", "calls/GB"):
        return f"{v:,.0f}"
    if unit == "Gbit/s":
        return f"{v:.2f}"
    if unit == "µs":
        return f"{v:.1f}"
    return f"{v:.3f}"


def summarise(results: dict, peers: list[str], workloads: list[str]) -> dict:
    """medians[workload][peer][metric] and reasons[workload][peer]."""
    med: dict = {}
    reasons: dict = {}
    for w in workloads:
        for p in peers:
            runs = results.get(w, {}).get(p, [])
            ok = [r for r in runs if not ({"error", "peer_failed", "skipped"} & r.keys())]
            bad = [r.get("peer_failed") or r.get("error") for r in runs
                   if {"error", "peer_failed"} & r.keys()]
            if bad:
                reasons.setdefault(w, {})[p] = {"failed_rounds": len(bad), "of": len(runs), "reason": bad[0]}
            keys = set().union(*[r.keys() for r in ok]) if ok else set()
            for k in keys:
                vals = [r[k] for r in ok if isinstance(r.get(k), (int, float))]
                if vals:
                    med.setdefault(w, {}).setdefault(p, {})[k] = statistics.median(vals)
                    med[w][p][k + "__n"] = len(vals)
    return {"medians": med, "reasons": reasons}


def paired_ratios(results: dict, w: str, k: str, mine: str, other: str) -> list[float]:
    """mine ÷ other for every round in which both measured k (one right after the other)."""
    def by_round(peer: str) -> dict:
        return {r["round"]: r[k] for r in results.get(w, {}).get(peer, [])
                if isinstance(r.get(k), (int, float))}
    a, b = by_round(mine), by_round(other)
    return [a[n] / b[n] for n in sorted(a) if b.get(n)]


def baseline_table(meta: dict, med: dict, results: dict, rows: list) -> list[str]:
    """uring-fwd against itself built from --baseline: the check that a refactor costs nothing.
    Three decimals and a per-round spread, since the question is a few percent."""
    b = meta["baseline"]
    short = b["short"] or "not built"
    L = [f"## uring-fwd vs {BASE_PEER} ({short})", "",
         f"{BASE_PEER} is uring-fwd built from `{b['rev']}` ({short}) with the same build options, "
         "started the same way. ratio = uring-fwd's median ÷ uring-fwd-base's median (same run); "
         "change = ratio − 1: + on throughput rows is faster, − on latency, CPU and RSS rows is less. "
         "per round = lowest–highest of the two peers' ratio within each round.", "",
         f"| Metric | Unit | better | {BASE_PEER} | uring-fwd | ratio | change | per round |",
         "|---|---|---|---:|---:|---:|---:|---:|"]
    for label, w, k, unit, hib in rows:
        if k.startswith("iowq"):
            continue
        v = med.get(w, {}).get(BASE_PEER, {}).get(k)
        u = med.get(w, {}).get("uring-fwd", {}).get(k)
        ratio = change = "n/a"
        if u is not None and v:
            ratio, change = f"{u / v:.3f}×", f"{(u / v - 1) * 100:+.1f}%"
        pr = paired_ratios(results, w, k, "uring-fwd", BASE_PEER)
        spread = "n/a" if not pr else f"{min(pr):.3f}–{max(pr):.3f}" if len(pr) > 1 else f"{pr[0]:.3f}"
        L.append(f"| {label} | {unit} | {'higher' if hib else 'lower'} | {fmt(v, unit)} | "
                 f"{fmt(u, unit)} | {ratio} | {change} | {spread} |")
    L.append("")
    return L


def markdown(meta: dict, summary: dict, results: dict, peers: list[str], workloads: list[str]) -> str:
    med, reasons = summary["medians"], summary["reasons"]
    L = []
    L.append(f"# uring-fwd vs peers — {meta['date']}")
    L.append("")
    L.append(f"- Command: `{meta['command']}`")
    L.append(f"- Kernel: {meta['kernel']}; CPU: {meta['cpu_model']} ({meta['ncpu']} CPUs)")
    L.append(f"- Placement: {meta['placement']}")
    L.append(f"- Load average (1/5/15 min) at start: {meta['loadavg_start']}; at end: {meta.get('loadavg_end', '?')}"
             " (other work on the machine skews absolute numbers; ratios within a run are interleaved)")
    L.append(f"- Rounds: {meta['rounds']} (interleaved round → workload → peer; medians shown)")
    L.append(f"- Durations: iperf3 -t {meta['duration']}s, sockperf -t {meta['rr_duration']}s, "
             f"churn {meta['churn_duration']}s × {meta['churn_conns']} conns, syscalls -n {meta['syscall_bytes']}")
    for k in ("uring-fwd", BASE_PEER, "haproxy", "nginx", "go", "socat", "iperf3", "sockperf", "wrk", "strace"):
        if k != BASE_PEER or k in meta["versions"]:
            L.append(f"- {k}: {meta['versions'].get(k, '?')}")
    L.append("")
    rows = [r for r in ROWS if r[1] in workloads]
    shown_peers = peers
    L.append("## Medians")
    L.append("")
    L.append("| Metric | Unit | " + " | ".join(shown_peers) + " |")
    L.append("|---|---|" + "---:|" * len(shown_peers))
    for label, w, k, unit, _ in rows:
        cells = []
        any_val = False
        for p in shown_peers:
            v = med.get(w, {}).get(p, {}).get(k)
            any_val |= v is not None
            cells.append(fmt(v, unit))
        if not any_val and k.startswith("iowq"):
            continue
        L.append(f"| {label} | {unit} | " + " | ".join(cells) + " |")
    L.append("")
    if "baseline" in meta and {"uring-fwd", BASE_PEER} <= set(peers):
        L += baseline_table(meta, med, results, rows)
    for mine in [p for p in peers if p == "uring-fwd" or p in URING_VARIANTS]:
        others = [p for p in peers if p != mine]
        L.append(f"## Ratio {mine} ÷ peer (same run)")
        L.append("")
        L.append("Throughput rows: >1 means uring-fwd is faster. Latency, CPU, syscall and RSS rows: <1 means uring-fwd uses less.")
        L.append("")
        L.append("| Metric | better | " + " | ".join(others) + " |")
        L.append("|---|---|" + "---:|" * len(others))
        for label, w, k, unit, hib in rows:
            if k.startswith("iowq"):
                continue
            u = med.get(w, {}).get(mine, {}).get(k)
            cells = []
            for p in others:
                v = med.get(w, {}).get(p, {}).get(k)
                cells.append(f"{u / v:.2f}×" if (u is not None and v) else "n/a")
            L.append(f"| {label} | {'higher' if hib else 'lower'} | " + " | ".join(cells) + " |")
        L.append("")
    if reasons:
        L.append("## n/a and failed rounds")
        L.append("")
        grouped: dict = {}
        for w, per in reasons.items():
            for p, r in per.items():
                key = (p, re.sub(r"\(\d+\)|pid \d+|\d{4,}", "…", r["reason"]))
                grouped.setdefault(key, []).append(f"{w} ({r['failed_rounds']}/{r['of']} rounds)")
        for (p, reason), ws in grouped.items():
            L.append(f"- **{p}** — {', '.join(ws)}: {reason}")
        L.append("")
    return "\n".join(L)


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
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, 1 s loads, 128M syscall transfer")
    ap.add_argument("--duration", type=int, default=None, help="iperf3 -t seconds (default 10)")
    ap.add_argument("--rr-duration", type=int, default=None, help="sockperf -t seconds (default 10)")
    ap.add_argument("--churn-duration", type=int, default=None, help="wrk -d seconds (default 10)")
    ap.add_argument("--churn-conns", type=int, default=32, help="wrk concurrent connections (default 32)")
    ap.add_argument("--syscall-bytes", default=None, help="iperf3 -n for the strace run (default 1G)")
    ap.add_argument("--syscall-timeout", type=int, default=300, help="limit for the traced transfer (s)")
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
    a.rounds = a.rounds if a.rounds is not None else (1 if q else 3)
    a.duration = a.duration if a.duration is not None else (1 if q else 10)
    a.rr_duration = a.rr_duration if a.rr_duration is not None else (1 if q else 10)
    a.churn_duration = a.churn_duration if a.churn_duration is not None else (1 if q else 10)
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


def shown_path(path: Path) -> str:
    """path relative to the repository when it lies inside it: reports get committed, and
    one machine's absolute paths mean nothing on another."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


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
            "loadavg_start": loadavg(),
            "rounds": args.rounds,
            "duration": args.duration, "rr_duration": args.rr_duration,
            "churn_duration": args.churn_duration, "churn_conns": args.churn_conns,
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
                             if k in ("gbps", "p50_us", "p99_us", "conn_per_s", "cpu_s_per_gb",
                                      "syscalls_per_gb", "rss_kib", "iowq_peak", "error",
                                      "peer_failed", "skipped", "socket_errors")}
                    log(f"round {rnd}/{args.rounds} {w:10s} {p:15s} {r['wall_s']:5.1f}s {short}")
    except KeyboardInterrupt as e:
        interrupted = str(e) or "interrupted"
        log(f"interrupted ({interrupted}); reporting what was measured")
    finally:
        procs.stop_all()
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
