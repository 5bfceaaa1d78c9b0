"""The cost of routing TLS by server name, for bench/compare.

Peer `uring-fwd-sni`: uring-fwd started from a configuration file in which two routes
share the listen address, told apart by the ClientHello: `sni` (server_names
["a.example"]) and a default route, both forwarding to the one upstream. Every
connection of it therefore goes through the inspect phase: the hello is read, parsed,
matched and replayed to the upstream.

Workload `churn-tls`: the `churn` workload (wrk, one short connection per request)
with each connection starting with a real ClientHello, the one curl sent for
https://a.example (tests/fuzz/corpus/client_hello/curl-sni, 517 bytes), followed by the
HTTP request. The upstream is the churn nginx, which does not speak TLS: it answers
400 and closes, which wrk counts as a (non-2xx) request. What matters is that every
peer carries exactly the same bytes, so `uring-fwd` (plain forwarding) and
`uring-fwd-sni` in one interleaved run differ only in the inspection.

    bench/compare --peers uring-fwd,uring-fwd-sni --workloads churn,churn-tls --rounds 5

The row to read is "Proxy CPU, churn TLS hello" (CPU ms per 1000 connections).
"""

from __future__ import annotations

from pathlib import Path

SNI_PEER = "uring-fwd-sni"
SNI_WORKLOAD = "churn-tls"
HELLO = Path(__file__).resolve().parent.parent / "tests/fuzz/corpus/client_hello/curl-sni"
HELLO_NAME = "a.example"

ROWS = [
    ("Churn TLS hello (new conn + hello + req/resp)", SNI_WORKLOAD, "conn_per_s", "conn/s", True),
    ("Proxy CPU, churn TLS hello", SNI_WORKLOAD, "cpu_ms_per_1k_conn", "CPU ms/1k conn", False),
]


def peer_argv(binary: Path, workdir: Path, loop: str, listen_port: int,
              upstream_port: int, extra: list[str]) -> list[str]:
    """uring-fwd with two routes sharing loop:listen_port, chosen by the ClientHello."""
    conf = workdir / "uring-fwd-sni.toml"
    conf.write_text(f"""
[[route]]
name = "sni"
listen = "{loop}:{listen_port}"
server_names = ["{HELLO_NAME}"]
  [[route.upstream]]
  address = "{loop}:{upstream_port}"

[[route]]
name = "default"
listen = "{loop}:{listen_port}"
  [[route.upstream]]
  address = "{loop}:{upstream_port}"
""")
    return [str(binary), "--config", str(conf), "--log-level", "warn"] + extra


def lua_script(workdir: Path) -> Path:
    """A wrk script whose every request is the ClientHello, then a plain GET."""
    hello = HELLO.read_bytes()
    # Lua strings are byte strings: the hello goes in as decimal escapes.
    escaped = "".join(f"\\{b}" for b in hello)
    script = workdir / "churn-tls.lua"
    get = "GET / HTTP/1.1\\r\\nHost: " + HELLO_NAME + "\\r\\nConnection: close\\r\\n\\r\\n"
    # wrk parses the first request its script makes as HTTP before the run and exits
    # when that fails (script_verify_request in wrk's script.c); with a dynamic script
    # every later request is made afresh per connection. So the first one, which
    # is only parsed, is the plain GET, and every request sent starts with the hello.
    script.write_text(
        f'local hello = "{escaped}"\n'
        f'local get = "{get}"\n'
        "local calls = 0\n"
        "request = function()\n"
        "  calls = calls + 1\n"
        "  if calls == 1 then return get end\n"
        "  return hello .. get\n"
        "end\n")
    return script


def churn_tls_argv(script: Path, conns: int, seconds: int, loop: str, port: int) -> list[str]:
    return ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "5s", "-s", str(script),
            f"http://{loop}:{port}/"]
