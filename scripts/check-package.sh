#!/usr/bin/env bash
# scripts/check-package.sh: builds the Debian packages from this tree (debian/) and checks
# them the way an operator would meet them, with nothing of the source tree at run time:
#   1. debian/changelog's upstream version is meson.build's (a release that forgets the
#      changelog would ship under the old version);
#   2. `dpkg-buildpackage -us -uc -b` in a copy of the tree (tracked and untracked files
#      git does not ignore) under $TMPDIR, so the .debs land outside the source and no
#      build directory of ours leaks into them; removed afterwards;
#   3. `dpkg -c`: each package holds what it should and nothing else;
#   4. the packages extracted (`dpkg -x`) into a throw-away root: the installed
#      uring-fwd's --version, and --check on the installed example configuration;
#      tests/install/consumer.cpp built with pkg-config from liburingfwd-dev alone and
#      run against liburingfwd0's shared library;
#   5. lintian on the .changes, failing on errors; every tag it prints is shown.
# The last line is "check-package: ok (N s: ...)" or "check-package: FAIL: <why>"; exits
# non-zero on failure. URING_FWD_JOBS=N sets the build's parallelism (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$SECONDS
fail() { echo "check-package: FAIL: $*"; exit 1; }

for tool in dpkg-buildpackage dh lintian; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done

# --- 1. versions -------------------------------------------------------------------------
version=$(sed -n "s/^ *version : '\([^']*\)',\$/\1/p" meson.build | head -1)
[[ -n $version ]] || fail "no version : '...' line in meson.build"
deb_version=$(dpkg-parsechangelog -S Version)
[[ ${deb_version%-*} == "$version" ]] ||
  fail "debian/changelog is at $deb_version, meson.build at $version: add an entry (dch -v $version-1)"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# --- 2. build in a copy ----------------------------------------------------------------
# A fixed path, so that a second run's compiler command lines (which carry the source
# path in -ffile-prefix-map) are the same and ccache, where installed, serves them.
work=${TMPDIR:-/tmp}/uring-fwd-package
# Two runs at once (two checkouts on one machine) take turns rather than share it.
exec 9>"$work.lock"
flock 9
rm -rf "$work"
# URING_FWD_KEEP_PACKAGE=1 leaves it (the .debs, build.log, lintian.log) for a look.
[[ ${URING_FWD_KEEP_PACKAGE:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT
src=$work/uring-fwd-$version
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$src"
else
  tar --exclude='./build*' --exclude='./.git' --exclude='./obj-*' -cf - . | tar -xf - -C "$src"
fi
# dh_auto_* point HOME at a scratch directory (debhelper compat 13); keep ccache's own.
if command -v ccache >/dev/null; then
  CCACHE_DIR=${CCACHE_DIR:-$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")}
  export CCACHE_DIR
fi
jobs=${URING_FWD_JOBS:-$(nproc)}
build_start=$SECONDS
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$jobs") >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "dpkg-buildpackage (log above)"; }
build_s=$((SECONDS - build_start))
# debian/rules builds without -Werror (see there); a warning the Debian flags bring out
# (_FORTIFY_SOURCE, -fstack-protector-strong at -O2) is still worth seeing.
warnings=$(grep -c ': warning: ' "$work/build.log" || true)
{ grep ': warning: ' "$work/build.log" || true; } | sort -u | head -20 | sed 's/^/  build: /'
echo "  dpkg-buildpackage -us -uc -b -j$jobs: $build_s s, $warnings compiler warnings"

# --- 3. contents -----------------------------------------------------------------------
libdir=usr/lib/$multiarch
deb() { echo "$work/${1}_${deb_version}_$arch.deb"; }
# Each package's files and links (directories left out) must all match its patterns, and
# each "want" path must be there.
check_contents() { # package "allowed regex" want...
  local package=$1 allowed=$2 file listing unexpected
  shift 2
  file=$(deb "$package")
  [[ -f $file ]] || fail "$package was not built ($(cd "$work" && ls -- *.deb | tr '\n' ' '))"
  listing=$(dpkg -c "$file" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./||')
  echo "  $package: $(wc -l <<<"$listing") files; Depends: $(dpkg-deb -f "$file" Depends)"
  unexpected=$(grep -Ev "^($allowed)\$" <<<"$listing" || true)
  [[ -z $unexpected ]] || fail "$package holds unexpected files: $(tr '\n' ' ' <<<"$unexpected")"
  for want in "$@"; do
    grep -qx -- "$want" <<<"$listing" || fail "$package lacks $want"
  done
}
docs='usr/share/doc/[^/]+/(copyright|changelog\.Debian\.gz)'
check_contents uring-fwd \
  "usr/bin/uring-fwd|usr/share/man/man1/uring-fwd\.1\.gz|usr/share/doc/uring-fwd/examples/uring-fwd\.toml|etc/uring-fwd/uring-fwd\.toml|lib/systemd/system/uring-fwd\.service|$docs" \
  usr/bin/uring-fwd usr/share/man/man1/uring-fwd.1.gz usr/share/doc/uring-fwd/examples/uring-fwd.toml \
  usr/share/doc/uring-fwd/copyright etc/uring-fwd/uring-fwd.toml lib/systemd/system/uring-fwd.service
check_contents liburingfwd0 "$libdir/liburingfwd\.so\.0(\.[0-9]+\.[0-9]+)?|$docs" \
  "$libdir/liburingfwd.so.0" "$libdir/liburingfwd.so.$version"
headers=()
for h in engine/include/uringfwd/*.hpp; do headers+=("usr/include/uringfwd/${h##*/}"); done
check_contents liburingfwd-dev \
  "usr/include/uringfwd/[a-z_]+\.hpp|$libdir/liburingfwd\.(a|so)|$libdir/pkgconfig/uringfwd\.pc|usr/share/doc/liburingfwd-dev/examples/(gateway\.cpp|meson\.build)|$docs" \
  "${headers[@]}" usr/include/uringfwd/version.hpp "$libdir/liburingfwd.a" "$libdir/liburingfwd.so" \
  "$libdir/pkgconfig/uringfwd.pc" usr/share/doc/liburingfwd-dev/examples/gateway.cpp
# The binary carries the engine itself: installing it must not pull in the library.
if dpkg-deb -f "$(deb uring-fwd)" Depends | grep -q liburingfwd; then
  fail "uring-fwd depends on liburingfwd0; the binary links the engine statically"
fi
# The configuration is the administrator's (kept across upgrades), and postinst asks a
# running service for a binary upgrade rather than a restart (debian/rules says why).
control=$work/control
dpkg-deb -e "$(deb uring-fwd)" "$control"
grep -qx /etc/uring-fwd/uring-fwd.toml "$control/conffiles" ||
  fail "/etc/uring-fwd/uring-fwd.toml is not a conffile: $(cat "$control/conffiles" 2>/dev/null)"
grep -q 'SIGRTMIN+1 uring-fwd.service' "$control/postinst" || fail "postinst sends no SIGRTMIN+1"
if grep -q 'deb-systemd-invoke restart' "$control/postinst"; then
  fail "postinst restarts uring-fwd.service on upgrade"
fi
# postinst's upgrade hook, run from the .deb with systemctl and policy-rc.d stubbed (and
# its /run/systemd/system and policy-rc.d paths pointed at scratch files): what it asks
# systemctl in each case.
hook_says() { # "postinst arguments" active(0|1) policy-exit-status
  local stub=$work/stub
  rm -rf "$stub" && mkdir -p "$stub/bin" "$stub/run-systemd"
  printf '#!/bin/sh\necho "$*" >>%s/calls\n[ "$1" != is-active ] || exit %s\n' \
    "$stub" "$(( $2 ? 0 : 3 ))" >"$stub/bin/systemctl"
  printf '#!/bin/sh\nexit %s\n' "$3" >"$stub/policy-rc.d"
  # Only the hook, after debhelper's last section (which needs deb-systemd-helper).
  { echo 'set -e'; awk '{ line[NR] = $0 } /^# End automatically added section/ { last = NR }
      END { for (i = last + 1; i <= NR; i++) print line[i] }' "$control/postinst"; } |
    sed -e "s|/run/systemd/system|$stub/run-systemd|" -e "s|/usr/sbin/policy-rc.d|$stub/policy-rc.d|g" \
    >"$stub/hook"
  chmod +x "$stub/bin/systemctl" "$stub/policy-rc.d"
  # shellcheck disable=SC2086 # $1 is the argument list
  PATH=$stub/bin:$PATH DPKG_ROOT= sh "$stub/hook" $1 || fail "postinst $1 failed"
  local kills
  kills=$(grep -s -c 'kill' "$stub/calls" || true) # prints 0 itself when none matched
  echo "${kills:-0}"                                 # no file: systemctl never ran
}
[[ $(hook_says "configure 0.0.9-1" 1 0) == 1 ]] || fail "postinst: an upgrade does not send SIGRTMIN+1 to the running service"
[[ $(hook_says "configure" 1 0) == 0 ]] || fail "postinst: a first installation sends SIGRTMIN+1"
[[ $(hook_says "configure 0.0.9-1" 0 0) == 0 ]] || fail "postinst: SIGRTMIN+1 to a service that is not running"
[[ $(hook_says "configure 0.0.9-1" 1 101) == 0 ]] || fail "postinst: SIGRTMIN+1 although policy-rc.d forbids it"
echo "  postinst: SIGRTMIN+1 on upgrade of a running service only (4 cases)"
# prerm stops the service on removal only ("$1" = remove), never on upgrade.
if grep -B1 'deb-systemd-invoke stop' "$control/prerm" | grep -q '^if ' &&
  ! grep -B1 'deb-systemd-invoke stop' "$control/prerm" | grep -q '"$1" = remove'; then
  fail "prerm stops uring-fwd.service on upgrade"
fi

# --- 4. installed into a throw-away root ---------------------------------------------
root=$work/root
for package in uring-fwd liburingfwd0 liburingfwd-dev; do
  dpkg -x "$(deb "$package")" "$root"
done
got=$("$root/usr/bin/uring-fwd" --version) || fail "installed uring-fwd --version failed"
[[ $got == "uring-fwd $version" ]] || fail "installed uring-fwd --version printed \"$got\""
echo "  $got"
example=$root/usr/share/doc/uring-fwd/examples/uring-fwd.toml
out=$("$root/usr/bin/uring-fwd" --config "$example" --check 2>&1) ||
  fail "installed uring-fwd --check on the installed example: $out"
grep -q "^$example: ok\$" <<<"$out" || fail "--check on the installed example printed: $out"
echo "  --check ${example#"$root"}: ok"
# The unit runs the installed binary on the installed configuration.
unit=$root/lib/systemd/system/uring-fwd.service
grep -q '^ExecStart=/usr/bin/uring-fwd --config /etc/uring-fwd/uring-fwd.toml ' "$unit" ||
  fail "the unit's ExecStart is not /usr/bin/uring-fwd --config /etc/uring-fwd/uring-fwd.toml: $(grep ExecStart= "$unit")"
out=$("$root/usr/bin/uring-fwd" --config "$root/etc/uring-fwd/uring-fwd.toml" --check 2>&1) ||
  fail "installed uring-fwd --check on the installed /etc/uring-fwd/uring-fwd.toml: $out"
echo "  --check /etc/uring-fwd/uring-fwd.toml: ok; unit ExecStart: /usr/bin/uring-fwd"

export PKG_CONFIG_PATH=$root/$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
read -r -a cflags <<<"$(pkg-config --cflags uringfwd)" || fail "pkg-config --cflags uringfwd"
read -r -a libs <<<"$(pkg-config --libs uringfwd)" || fail "pkg-config --libs uringfwd"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
c++ -std=c++20 -Wall -Wextra -Werror "$repo/tests/install/consumer.cpp" -o "$work/consumer" \
  "${cflags[@]}" "${libs[@]}" || fail "consumer: compiling against liburingfwd-dev"
readelf -d "$work/consumer" | grep -q 'NEEDED.*liburingfwd\.so\.0' ||
  fail "the consumer does not load liburingfwd.so.0"
LD_LIBRARY_PATH=$root/$libdir "$work/consumer" >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "the consumer against liburingfwd0"; }
echo "  consumer built from liburingfwd-dev, run against liburingfwd0: ok"

# --- 5. lintian --------------------------------------------------------------------------
lintian_start=$SECONDS
changes=$work/uring-fwd_${deb_version}_$arch.changes
lintian_rc=0
lintian --fail-on error --display-info "$changes" >"$work/lintian.log" 2>&1 || lintian_rc=$?
lintian_s=$((SECONDS - lintian_start))
sed 's/^/  lintian: /' "$work/lintian.log"
count() { grep -c "^$1: " "$work/lintian.log" || true; }
echo "  lintian ($lintian_s s): $(count E) errors, $(count W) warnings, $(count I) info"
((lintian_rc == 0)) || fail "lintian found errors (status $lintian_rc)"

echo "check-package: ok ($((SECONDS - start)) s: build $build_s s, lintian $lintian_s s)"
