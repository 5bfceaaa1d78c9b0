#!/usr/bin/env bash
# scripts/check-install.sh [BUILD_DIR]: proves liburingfwd can be installed and used the
# two ways an embedder uses it, with nothing from this repository but what is installed.
#   1. `meson install --destdir` from BUILD_DIR (default: build, configured and built
#      already, e.g. by test.sh; it is built first if stale) into a scratch directory;
#      only the expected files, every public header compiling on its own;
#   2. tests/install/consumer.cpp compiled with `pkg-config --cflags --libs uringfwd`
#      alone (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR pointing into the destdir), run
#      against the shared library, then linked with `--static` flags against the static
#      one and run again; examples/gateway/gateway.cpp compiled the same way (shared) and
#      driven with real traffic by tests/install/drive_gateway.py;
#   3. examples/gateway/meson.build as the scratch meson project that takes this
#      repository as a subproject through dependency('uringfwd'), with the consumer added:
#      configures without CLI11, GoogleTest or OpenSSL, compiles none of our targets with
#      -Werror, builds and runs the consumer, builds and drives the gateway.
# The last line is "check-install: ok (N s)" or "check-install: FAIL: <why>"; exits non-zero
# on failure. URING_FWD_JOBS=N limits the subproject build's ninja jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=${1:-build}

work=$(mktemp -d "${TMPDIR:-/tmp}/uringfwd-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "check-install: FAIL: $*"; exit 1; }

# --- 1. install ------------------------------------------------------------------------
[[ -f $build/build.ninja ]] || fail "$build is not a configured meson build directory"
# default_library=both is a default of project(): a build directory configured before it
# was keeps what it had (shared) and installs no liburingfwd.a.
library_kind=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "default_library"))')
[[ $library_kind == both ]] ||
  fail "$build builds default_library=$library_kind; both are checked: meson configure $build -Ddefault_library=both"
dest=$work/dest
meson install -C "$build" --destdir "$dest" --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "meson install"; }

# Exactly these, wherever the prefix and libdir put them: the binary, its man page, its
# systemd unit and the configuration the unit reads, the public headers, both libraries,
# the .pc file. Anything else (an internal static library, a private header) is a leak.
installed=$(cd "$dest" && find . -type f -o -type l | sed 's|^\./|/|' | sort)
mapfile -t installed_files <<<"$installed"
printf '  installed: %s\n' "${installed_files[@]}"
unexpected=$(echo "$installed" | grep -Ev \
  -e '/bin/uring-fwd$' \
  -e '/share/man/man1/uring-fwd\.1$' \
  -e '/lib/systemd/system/uring-fwd\.service$' \
  -e '/etc/uring-fwd/uring-fwd\.toml$' \
  -e '/include/uringfwd/[a-z_]+\.hpp$' \
  -e '/lib[^/]*(/[^/]+)?/liburingfwd\.(a|so|so\.0|so\.[0-9]+\.[0-9]+\.[0-9]+)$' \
  -e '/pkgconfig/uringfwd\.pc$' || true)
[[ -z $unexpected ]] || fail "unexpected files installed: $unexpected"
# Every public header of the source tree (a new one must be added to
# engine/include/uringfwd/meson.build's list), the generated version.hpp, the rest.
for want in engine/include/uringfwd/*.hpp /include/uringfwd/version.hpp /liburingfwd.a \
            /liburingfwd.so /liburingfwd.so.0 /pkgconfig/uringfwd.pc; do
  want=${want#engine}
  grep -q -- "$want\$" <<<"$installed" || fail "not installed: *$want"
done

pc=$(find "$dest" -name uringfwd.pc)
# The .pc names the final prefix (/usr/local, /usr, ...); the sysroot maps its -I and -L
# into the destdir, as it would for a package staged before it is installed.
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$dest
pkg-config --exists uringfwd || fail "pkg-config does not find uringfwd in $PKG_CONFIG_PATH"
read -r -a cflags <<<"$(pkg-config --cflags uringfwd)"
read -r -a libs <<<"$(pkg-config --libs uringfwd)"
# pkgconf puts the sysroot before these too, pkg-config 0.29 does not: the same either way.
libdir=$(pkg-config --variable=libdir uringfwd); libdir=$dest${libdir#"$dest"}
includedir=$(pkg-config --variable=includedir uringfwd); includedir=$dest${includedir#"$dest"}

# Every public header compiles alone with only the installed include directory: none
# includes a private header (uring/, pipes/, shard/, ...) or needs another included first.
for header in "$includedir"/uringfwd/*.hpp; do
  echo "#include <uringfwd/${header##*/}>" |
    c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only "${cflags[@]}" -x c++ - ||
    fail "uringfwd/${header##*/} does not compile on its own from the installed tree"
done

# --- 2. pkg-config: shared, then static ------------------------------------------------
consumer=$repo/tests/install/consumer.cpp
c++ -std=c++20 -Wall -Wextra -Werror "$consumer" -o "$work/consumer-shared" \
  "${cflags[@]}" "${libs[@]}" || fail "consumer: compiling against the shared library"
readelf -d "$work/consumer-shared" | grep -q 'NEEDED.*liburingfwd\.so\.0' ||
  fail "consumer-shared does not load liburingfwd.so.0"
echo "  shared (${libs[*]}):"
LD_LIBRARY_PATH=$libdir "$work/consumer-shared" || fail "consumer against the shared library"

# The example gateway, as the README builds it; warnings are errors here (not in its own
# meson.build, which an embedder copies).
gateway=$repo/examples/gateway
c++ -std=c++20 -Wall -Wextra -Werror "$gateway/gateway.cpp" -o "$work/gateway-shared" \
  "${cflags[@]}" "${libs[@]}" || fail "gateway: compiling against the shared library"
LD_LIBRARY_PATH=$libdir timeout 60 python3 "$repo/tests/install/drive_gateway.py" \
  "$work/gateway-shared" "gateway (pkg-config, shared)" || fail "gateway against the shared library"

# With both libraries in one directory the linker prefers the shared one for -luringfwd;
# -l:liburingfwd.a picks the archive while the rest stays exactly what --static says
# (liburing, fmt, toml++ and pthread from Requires.private and Libs.private).
read -r -a static_libs <<<"$(pkg-config --static --libs uringfwd)"
static_libs=("${static_libs[@]/#-luringfwd/-l:liburingfwd.a}")
c++ -std=c++20 -Wall -Wextra -Werror "$consumer" -o "$work/consumer-static" \
  "${cflags[@]}" "${static_libs[@]}" || fail "consumer: linking the static library"
if readelf -d "$work/consumer-static" | grep -q 'NEEDED.*liburingfwd'; then
  fail "consumer-static still loads liburingfwd.so"
fi
echo "  static (${static_libs[*]}):"
"$work/consumer-static" || fail "consumer against the static library"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# --- 3. meson subproject -----------------------------------------------------------------
# The gateway's own meson.build (no werror: meson's default), the consumer added to it:
# one build of the subproject serves both.
parent=$work/parent
mkdir -p "$parent/subprojects"
ln -s "$repo" "$parent/subprojects/uring-fwd"
cp "$consumer" "$gateway/gateway.cpp" "$gateway/meson.build" "$parent/"
echo "executable('consumer', 'consumer.cpp', dependencies : uringfwd_dep)" >>"$parent/meson.build"
# --force-fallback-for: the subproject even where a uringfwd is installed system-wide.
# buildtype=plain (no optimization) keeps the library's compile short.
meson setup "$parent/build" "$parent" --force-fallback-for=uringfwd -Dbuildtype=plain \
  >"$work/subproject.log" 2>&1 || { cat "$work/subproject.log"; fail "subproject: meson setup"; }
log=$parent/build/meson-logs/meson-log.txt
grep -q 'Dependency uringfwd found: YES .*(overridden)' "$log" ||
  fail "dependency('uringfwd') did not come from the subproject's override_dependency"
if grep -Eiq 'dependency (cli11|gtest|gmock|libcrypto|benchmark)' "$log"; then
  fail "the subproject looked for a dependency only its binary or tests need: $(grep -Ei 'dependency (cli11|gtest|gmock|libcrypto|benchmark)' "$log" | head -1)"
fi
if grep -q -- '-Werror' "$parent/build/build.ninja"; then
  fail "a target of the subproject compiles with -Werror"
fi
ninja -C "$parent/build" ${URING_FWD_JOBS:+-j "$URING_FWD_JOBS"} >"$work/subproject-build.log" 2>&1 ||
  { tail -30 "$work/subproject-build.log"; fail "subproject: build"; }
echo "  subproject:"
"$parent/build/consumer" || fail "consumer built with the subproject"
timeout 60 python3 "$repo/tests/install/drive_gateway.py" "$parent/build/gateway" \
  "gateway (subproject)" || fail "gateway built with the subproject"

echo "check-install: ok (${SECONDS} s)"
