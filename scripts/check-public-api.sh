#!/bin/bash
# The binary uses only the public API (issue 21): every source file of engine/cli/ (and
# its control/) and engine/ops/ compiles with nothing of the engine on the include path
# but its public headers (engine/include/, and the build tree's generated
# uringfwd/version.hpp) and the binary's own cli/ and ops/. An include of net/…, support/…, uring/… or any other
# private header fails here, naming the file. Prints the failures and exits 1 if any.
#
#   scripts/check-public-api.sh SOURCE_ROOT BUILD_ROOT COMPILER...
set -u
src=$1 build=$2
shift 2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# cli/ and ops/ alone, so "cli/flags.hpp" and "ops/unique_fd.hpp" resolve and nothing else
# under engine/ does.
ln -s "$src/engine/cli" "$scratch/cli"
ln -s "$src/engine/ops" "$scratch/ops"
# shellcheck disable=SC2046 # one flag a word
deps=$(pkg-config --cflags-only-I fmt CLI11 prometheus-cpp-core prometheus-cpp-pull 2>/dev/null)
failed=0 checked=0
for file in "$scratch"/cli/*.cpp "$scratch"/cli/control/*.cpp "$scratch"/ops/*.cpp; do
  checked=$((checked + 1))
  # shellcheck disable=SC2086 # $deps is a list of flags
  if ! out=$("$@" -std=c++20 -fsyntax-only -I"$scratch" -I"$src/engine/include" \
      -I"$build/engine/include" $deps "$file" 2>&1); then
    echo "${file#"$scratch"/}: does not compile with the public headers alone:"
    echo "$out" | grep -m 5 -E 'error|fatal'
    failed=$((failed + 1))
  fi
done
echo "$checked files of engine/cli, engine/cli/control and engine/ops checked, $failed use more than the public API"
[[ $failed == 0 ]]
