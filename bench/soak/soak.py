#!/usr/bin/env python3
"""Soak test for uring-fwd (not part of CI).

Runs the binary for a bounded time in front of an echo upstream (both on loopback)
while a bounded number of clients cycle through short echo exchanges, and samples the
binary every few seconds: RSS, fds, pipes among them, io-wq worker threads. A leak shows
up as a column that keeps growing. Writes a CSV and prints (and saves) min/max per column.

    bench/soak/soak.py --binary build/engine/uring-fwd --seconds 600
"""

import argparse
import asyncio
import csv
import os
import random
import re
import signal
import subprocess
import sys
import time


def sample(pid):
    """(rss_kib, fds, pipes, iowq_threads) of `pid` from /proc."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    fds = pipes = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        fds += 1
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("pipe:"):
                pipes += 1
        except OSError:
            pass  # closed between listdir and readlink
    iowq = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                iowq += f.read().startswith("iou-wrk")
        except OSError:
            pass
    return rss, fds, pipes, iowq


async def echo_handler(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def client_loop(port, stop_at, counters):
    """One client slot: connect, send 1-16 KiB, read it back, close; repeat."""
    rng = random.Random()
    while time.monotonic() < stop_at:
        size = rng.randint(1024, 16384)
        payload = rng.randbytes(size)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), 5)
            writer.write(payload)
            await writer.drain()
            back = await asyncio.wait_for(reader.readexactly(size), 5)
            writer.close()
            await writer.wait_closed()
            counters["ok" if back == payload else "bad"] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            counters["failed"] += 1
            # Why, for the summary: a timeout and a reset point at different culprits.
            why = type(e).__name__ + (f" errno {e.errno}" if isinstance(e, OSError) else "")
            counters["why"][why] = counters["why"].get(why, 0) + 1
            await asyncio.sleep(0.05)


async def sampler(pid, stop_at, interval, rows, counters):
    start = time.monotonic()
    while True:
        rss, fds, pipes, iowq = sample(pid)
        rows.append([round(time.monotonic() - start, 1), rss, fds, pipes, iowq,
                     counters["ok"], counters["failed"], counters["bad"]])
        print("t=%6.1fs rss=%dKiB fds=%d pipes=%d iowq=%d ok=%d failed=%d bad=%d" %
              tuple(rows[-1]), flush=True)
        if time.monotonic() >= stop_at:
            return
        await asyncio.sleep(min(interval, max(0.0, stop_at - time.monotonic())))


async def main_async(args):
    server = await asyncio.start_server(echo_handler, "127.0.0.1", 0, backlog=4096)
    upstream_port = server.sockets[0].getsockname()[1]
    proc = subprocess.Popen(
        [args.binary, "--listen", "127.0.0.1:0", "--upstream", f"127.0.0.1:{upstream_port}"]
        + args.extra, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", first)
        if not m:
            sys.exit(f"binary did not start: {first}")
        print(first.strip(), flush=True)
        port = int(m.group(1))
        counters = {"ok": 0, "failed": 0, "bad": 0, "why": {}}
        rows = []
        stop_at = time.monotonic() + args.seconds
        clients = [asyncio.create_task(client_loop(port, stop_at, counters))
                   for _ in range(args.concurrency)]
        await sampler(proc.pid, stop_at, args.interval, rows, counters)
        await asyncio.wait_for(asyncio.gather(*clients), 30)
        # One sample after the clients are gone: what an idle binary keeps.
        await asyncio.sleep(1)
        rss, fds, pipes, iowq = sample(proc.pid)
        rows.append([round(args.seconds + 1, 1), rss, fds, pipes, iowq,
                     counters["ok"], counters["failed"], counters["bad"]])
        proc.send_signal(signal.SIGUSR1)
        await asyncio.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        server.close()
    # "TIME info uring-fwd: total: k=v ..." (the binary's lines carry a time and level).
    totals = [l for l in err.splitlines() if "uring-fwd: total:" in l]
    return rows, counters, totals[-1] if totals else "(no totals line)", proc.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="build/engine/uring-fwd")
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--out", default="bench/out/soak",
                        help="directory for CSV and summary (bench/out is git-ignored)")
    parser.add_argument("extra", nargs="*", help="more flags for the binary (after --)")
    args = parser.parse_args()
    if not 1 <= args.seconds <= 24 * 3600 or not 1 <= args.concurrency <= 1000:
        sys.exit("--seconds must be 1..86400 and --concurrency 1..1000")

    rows, counters, totals, rc = asyncio.run(main_async(args))
    os.makedirs(args.out, exist_ok=True)
    header = ["t_s", "rss_kib", "fds", "pipes", "iowq_threads", "ok", "failed", "bad"]
    csv_path = os.path.join(args.out, "soak.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    lines = [f"soak: {args.seconds} s, {args.concurrency} concurrent clients, "
             f"{counters['ok']} echo exchanges ok, {counters['failed']} failed, "
             f"{counters['bad']} corrupted; binary exit status {rc}",
             f"failures by kind: {counters['why'] or 'none'}",
             "column        min      max   (last = after the clients stopped)"]
    for i, name in enumerate(header[1:5], start=1):
        col = [r[i] for r in rows]
        lines.append(f"{name:<12} {min(col):>6} {max(col):>8}   last {col[-1]}")
    lines.append(totals)
    summary = "\n".join(lines)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(summary + "\n")
    print(summary)
    print(f"CSV: {csv_path}")
    sys.exit(0 if counters["bad"] == 0 and rc == 0 else 1)


if __name__ == "__main__":
    main()
