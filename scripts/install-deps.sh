#!/usr/bin/env bash
# Installs the Debian packages uring-fwd needs to build and test. Does nothing when
# they are all present already (so repeated runs stay fast).
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build
  liburing-dev libfmt-dev libcli11-dev        # the engine
  libgtest-dev libgmock-dev libssl-dev        # the tests (OpenSSL for SHA-256 of payloads)
  python3 socat iproute2 procps               # test helpers, the demo upstream
  clang libclang-rt-14-dev                    # sanitizer and fuzz builds
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(libbenchmark-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
