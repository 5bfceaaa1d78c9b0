#!/usr/bin/env bash
# Sets up and runs uring-fwd.
#   ./run.sh                      demo: 127.0.0.1:9000 -> a local echo server on 127.0.0.1:9001
#   ./run.sh --listen A --upstream B [flags]   your own forwarding (see --help)
#   ./run.sh --config FILE [--check]           routes from a file (examples/uring-fwd.toml)
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh --run
# A release build of the binary alone, apart from the test build in ./build.
scripts/build.sh build-release -Dtests=false -Dbuildtype=release
fwd=build-release/engine/uring-fwd

if (($# > 0)); then
  exec "$fwd" "$@"
fi

# The demo: an echo server upstream, so `echo hello | socat - TCP:127.0.0.1:9000`
# shows bytes making the round trip through uring-fwd.
socat TCP-LISTEN:9001,bind=127.0.0.1,reuseaddr,fork EXEC:cat &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null || true' EXIT
echo "demo: forwarding 127.0.0.1:9000 -> echo server 127.0.0.1:9001." >&2
echo "      try: echo hello | socat - TCP:127.0.0.1:9000     (Ctrl-C stops)" >&2
"$fwd" --listen 127.0.0.1:9000 --upstream 127.0.0.1:9001
