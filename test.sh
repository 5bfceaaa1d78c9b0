#!/usr/bin/env bash
# Sets up and runs the whole test suite; the last line is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh || { echo "0 passed, 1 failed"; exit 1; }
scripts/build.sh || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

meson test -C build --print-errorlogs --num-processes 1
status=$?
python3 tests/summary.py build/meson-logs/testlog.junit.xml "$status"
