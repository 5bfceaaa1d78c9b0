#!/usr/bin/env bash
# scripts/build.sh DIR [meson setup args...]: configures DIR once and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1; shift
if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
