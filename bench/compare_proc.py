"""Processes, ports and /proc for bench/compare.py: starting and killing what a run
starts, bounded commands, free loopback ports, and the proxy's CPU, RSS and threads read
from /proc. Standard library only."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

LOOP = "127.0.0.1"

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


def nginx_main_conf(d: Path, worker_connections: int) -> str:
    """The top of every nginx.conf the bench writes: one worker in the foreground, its pid
    and error log in d."""
    return f"""worker_processes 1;
daemon off;
master_process on;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections {worker_connections}; }}
"""


def nginx_http_temp_paths(d: Path) -> str:
    """An http block's temporary directories, all in d (the defaults need root-owned dirs)."""
    return f"""    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
"""
