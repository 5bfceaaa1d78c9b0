#!/usr/bin/env bash
# Configures (once) and builds uring-fwd into ./build. Extra args go to meson setup.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -f build/build.ninja ]]; then
  meson setup build "$@" >/dev/null
fi
ninja -C build >/dev/null
