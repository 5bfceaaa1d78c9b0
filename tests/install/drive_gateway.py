#!/usr/bin/env python3
"""Drives examples/gateway with real traffic (scripts/check-install.sh runs it once per
build of the gateway): python3 drive_gateway.py GATEWAY_BINARY LABEL.

An echo upstream in this process; the gateway started with echo=<it>; one client sends
"ROUTE echo\\nhello" in one write, so "hello" reaches the gateway with the preamble and
must be replayed by forward(), then "world", and must read "helloworld" back; the
gateway's access log must then show route echo, 10 bytes each way, reason clean. A client
naming an unknown route must be closed with nothing forwarded. Every wait is bounded;
prints one line, "<label>: ok ..." or "<label>: FAIL: ...", exit status to match."""
import queue
import signal
import socket
import subprocess
import sys
import threading

binary, label = sys.argv[1], sys.argv[2]


def fail(why, gateway=None):
    if gateway is not None and gateway.poll() is None:
        gateway.kill()
    print(f"  {label}: FAIL: {why}")
    sys.exit(1)


def echo_upstream(listener):
    while True:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)


upstream = socket.create_server(("127.0.0.1", 0))
upstream_port = upstream.getsockname()[1]
threading.Thread(target=echo_upstream, args=(upstream,), daemon=True).start()

gateway = subprocess.Popen([binary, "0", f"echo=127.0.0.1:{upstream_port}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
# Lines from the gateway's stdout and stderr as they come, read on threads so that every
# wait for one can time out.
lines = {"out": queue.Queue(), "err": queue.Queue()}
readers = [threading.Thread(target=lambda s=stream, q=lines[name]: [q.put(l) for l in s],
                            daemon=True)
           for name, stream in (("out", gateway.stdout), ("err", gateway.stderr))]
for reader in readers:
    reader.start()


def next_line(name, what):
    try:
        return lines[name].get(timeout=5).rstrip("\n")
    except queue.Empty:
        fail(f"no {what} from the gateway within 5 s", gateway)


first = next_line("out", "'listening on' line")
if not first.startswith("listening on 127.0.0.1:"):
    fail(f"first line: {first!r}", gateway)
gateway_port = int(first.rsplit(":", 1)[1])

with socket.create_connection(("127.0.0.1", gateway_port), timeout=5) as client:
    client.sendall(b"ROUTE echo\nhello")
    threading.Event().wait(0.2)  # "world" in a later segment, after the hand-over
    client.sendall(b"world")
    echoed = b""
    while len(echoed) < 10 and (data := client.recv(64)):
        echoed += data
    if echoed != b"helloworld":
        fail(f"echoed {echoed!r}, expected b'helloworld'", gateway)
    client.shutdown(socket.SHUT_WR)  # a clean end: FIN each way
    if client.recv(64) != b"":
        fail("bytes after the echo", gateway)

log = next_line("out", "access-log line").split()
expected = ["echo", "->", f"127.0.0.1:{upstream_port}", "10", "10"]
if len(log) != 10 or [log[1], log[3], log[4], log[5], log[6]] != expected or log[9] != "clean":
    fail(f"access-log line {' '.join(log)!r}: expected route echo, 10/10 bytes, clean",
         gateway)

with socket.create_connection(("127.0.0.1", gateway_port), timeout=5) as client:
    client.sendall(b"ROUTE nope\n")
    try:
        if client.recv(64) != b"":
            fail("an unknown route got an answer", gateway)
    except ConnectionResetError:
        pass
error = next_line("err", "error line for route nope")
while "nope" not in error:  # the engine's own startup lines come first
    error = next_line("err", "error line for route nope")

gateway.send_signal(signal.SIGTERM)
try:
    status = gateway.wait(timeout=10)
except subprocess.TimeoutExpired:
    fail("still running 10 s after SIGTERM", gateway)
if status != 0:
    fail(f"exit status {status} after SIGTERM")
for reader in readers:
    reader.join(timeout=5)
if not lines["out"].empty():
    fail(f"more on stdout (route nope forwarded?): {lines['out'].get()!r}")
print(f"  {label}: ok: {' '.join(log)} / {error}")
