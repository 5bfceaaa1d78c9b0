#!/usr/bin/env bash
# Captures the ClientHello seed corpus (tests/fuzz/corpus/client_hello/) from real TLS
# clients: a local listener on 127.0.0.1 saves each client's first records, up to the end
# of its ClientHello, and closes. Nothing leaves loopback. Needs openssl, curl and
# gnutls-cli (Debian: openssl curl gnutls-bin); the committed seeds came from Debian 12's.
#   tests/fuzz/capture_client_hellos.sh [OUT_DIR]   (default: the corpus directory)
set -euo pipefail
out="${1:-$(cd "$(dirname "$0")" && pwd)/corpus/client_hello}"
mkdir -p "$out"

capture() { # name, then the client's command with PORT for the port
    local name=$1; shift
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    python3 - "$port" "$out/$name" <<'PY' &
import socket, sys
port, path = int(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.settimeout(5)
data, end = b"", 0
while not end:
    chunk = c.recv(65536)
    if not chunk:
        break
    data += chunk
    hs, i = b"", 0   # join the handshake records until the hello's length is covered
    while i + 5 <= len(data):
        n = int.from_bytes(data[i + 3:i + 5], "big")
        if i + 5 + n > len(data):
            break
        hs += data[i + 5:i + 5 + n]; i += 5 + n
        if len(hs) >= 4 and len(hs) >= 4 + int.from_bytes(hs[1:4], "big"):
            end = i
            break
open(path, "wb").write(data[:end])
PY
    local listener=$!
    for _ in $(seq 50); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
    timeout 10 "${@//PORT/$port}" </dev/null >/dev/null 2>&1 || true
    wait "$listener"
    echo "$name: $(stat -c %s "$out/$name") bytes"
}

capture openssl-sni-a openssl s_client -connect 127.0.0.1:PORT -servername a.example
capture openssl-nosni openssl s_client -connect 127.0.0.1:PORT -noservername
capture openssl-alpn openssl s_client -connect 127.0.0.1:PORT -servername b.example -alpn h2,http/1.1
capture openssl-tls12 openssl s_client -connect 127.0.0.1:PORT -servername c.example -tls1_2
capture curl-sni curl -sk https://a.example:PORT/ --resolve a.example:PORT:127.0.0.1
capture curl-http11 curl -sk --http1.1 https://b.example:PORT/ --resolve b.example:PORT:127.0.0.1
capture gnutls-sni-alpn gnutls-cli --insecure --alpn=h2 --alpn=http/1.1 --sni-hostname=a.example -p PORT 127.0.0.1
capture gnutls-nosni gnutls-cli --insecure --disable-sni -p PORT 127.0.0.1
