#!/usr/bin/env bash
# Installs the Debian packages uring-fwd needs. Does nothing when they are all present
# already, so repeated runs stay fast.
#   scripts/install-deps.sh --run    to build and run the binary (and the demo)
#   scripts/install-deps.sh          to build and run the tests as well
#   scripts/install-deps.sh --bench  the tests plus the micro-benchmarks
#   scripts/install-deps.sh --qemu   the tests plus the QEMU guest (scripts/qemu/run.sh)
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build
  liburing-dev libfmt-dev libcli11-dev        # the engine
  libtomlplusplus-dev                         # the engine: its configuration file
  prometheus-cpp-dev libcivetweb-dev          # the binary's /metrics (not liburingfwd)
  socat                                       # the demo's echo server, some tests
)
if [[ "${1:-}" != "--run" ]]; then
  packages+=(
    libgtest-dev libgmock-dev libssl-dev      # the tests (OpenSSL for SHA-256 of payloads)
    python3 iproute2 procps util-linux        # test helpers (ip netns, prlimit, setpriv)
    clang libclang-rt-14-dev                  # fuzz targets
    prometheus                                # interop suite: promtool check metrics
    debhelper dpkg-dev lintian                # the Debian packages (scripts/check-package.sh)
    haproxy nginx libnginx-mod-stream         # interop suite: PROXY protocol peers
    openssl                                   # interop: s_client/s_server through SNI routing
  )
fi
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(libbenchmark-dev)
fi
if [[ "${1:-}" == "--qemu" ]]; then
  packages+=(qemu-system-x86 busybox-static cpio) # the kernel is fetched by run.sh
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
