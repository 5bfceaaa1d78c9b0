#!/usr/bin/env bash
# Boots Debian 12's own kernel (the 6.1 linux-image-amd64 depends on) in a QEMU guest with
# two NUMA nodes of one CPU each and runs uring-fwd's smoke checks there
# (scripts/qemu/guest-init.sh; docs/qemu.md says what they prove). The last line is
# "qemu-6.1-numa: ok|fail|skip (reason)"; exit status 0, 1 or 77 (skip: a tool or the
# kernel package cannot be had).
#   scripts/qemu/run.sh [BUILD_DIR]     the uring-fwd of BUILD_DIR (default: build)
# Environment: URING_FWD_QEMU_TIMEOUT (seconds for the guest, default 1200),
# URING_FWD_QEMU_ACCEL (tcg, the default, or kvm), URING_FWD_QEMU_DIR (scratch and the
# kernel package's cache, default BUILD_DIR-qemu).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build=${1:-build}
work=${URING_FWD_QEMU_DIR:-$build-qemu}
guest_timeout=${URING_FWD_QEMU_TIMEOUT:-1200}
accel=${URING_FWD_QEMU_ACCEL:-tcg}
binary=$build/engine/uring-fwd
# Every check guest-init.sh prints: one missing counts as a failure.
checks="kernel numa-nodes shards-per-node direct-descriptors-fallback ring-features half-close cpu-steering
  data-path-auto data-path-splice data-path-copy data-path-splice-ring reset-from-client
  reset-from-upstream proxy-v1 proxy-v2 sni-routing reload upgrade numa-threads
  numa-iowq-workers numa-memory-cpu0 numa-memory-cpu1 iowq-mask-of-a-pinned-thread"

verdict() { echo "qemu-6.1-numa: $1 ($2)"; exit "$3"; }

for tool in qemu-system-x86_64 apt-get apt-cache dpkg-deb cpio gzip g++ timeout; do
  command -v "$tool" >/dev/null || verdict skip "$tool not installed" 77
done
# busybox-static's: the guest has no libraries for a dynamic one.
busybox=$(command -v busybox) || verdict skip "busybox-static not installed" 77
ldd "$busybox" >/dev/null 2>&1 && verdict skip "$busybox is not static (install busybox-static)" 77
[[ -x $binary ]] || verdict fail "no $binary: build it first" 1
mkdir -p "$work"
started=$SECONDS

# The kernel: the package linux-image-amd64 depends on, fetched once into $work.
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
package=$(kernel_package)
# A fresh machine may have no package lists yet.
[[ -n $package ]] || { apt-get update -qq >/dev/null 2>&1; package=$(kernel_package); }
[[ -n $package ]] || verdict skip "apt-cache knows no linux-image-amd64" 77
debs=("$work/${package}_"*.deb)
if [[ ! -f ${debs[0]} ]]; then
  (cd "$work" && apt-get download -q "$package" >/dev/null 2>&1) ||
    verdict skip "apt-get download $package failed" 77
  debs=("$work/${package}_"*.deb)
fi
deb=${debs[0]}
rm -rf "$work/kernel" && mkdir -p "$work/kernel"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work/kernel" --wildcards './boot/vmlinuz-*' ||
  verdict fail "no vmlinuz in $deb" 1
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-*)

# The initramfs: busybox, uring-fwd with the libraries ldd names (at their paths), the
# peer (static) and the checks as /init. The loopback device and io_uring are built into
# Debian's kernel, so no module is needed.
root=$work/root
rm -rf "$root" && mkdir -p "$root"/{bin,proc,sys,dev,tmp}
cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$binary" "$root/bin/uring-fwd"
ldd "$binary" | grep -o '/[^ ]*' | while read -r lib; do cp --parents -L "$lib" "$root"; done
nice -n 19 g++ -std=c++20 -O2 -static -Wall -Wextra -Werror -pthread scripts/qemu/peer.cpp \
  -luring -o "$root/bin/peer" || verdict fail "scripts/qemu/peer.cpp does not build" 1
install -m 755 scripts/qemu/guest-init.sh "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initramfs.gz" ||
  verdict fail "cpio" 1
echo "qemu: $package, initramfs $(du -h "$work/initramfs.gz" | cut -f1), ready in $((SECONDS - started)) s"

# Two nodes of 1 GiB and one CPU each (ACPI SRAT, which the kernel reads with
# CONFIG_ACPI_NUMA); the console on the first serial port; no network device (the checks
# use the guest's loopback); the guest powers itself off, and -no-reboot turns a panic
# (panic=-1) into an exit.
console=$work/console.log
boot_started=$SECONDS
timeout "$guest_timeout" qemu-system-x86_64 -accel "$accel" -cpu max -smp 2 -m 2G \
  -object memory-backend-ram,id=m0,size=1G -numa node,nodeid=0,cpus=0,memdev=m0 \
  -object memory-backend-ram,id=m1,size=1G -numa node,nodeid=1,cpus=1,memdev=m1 \
  -kernel "$vmlinuz" -initrd "$work/initramfs.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" \
  -display none -monitor none -serial "file:$console" -nic none -no-reboot
qemu_status=$?
grep -a '^smoke ' "$console" | tr -d '\r'
echo "qemu: the guest ran $((SECONDS - boot_started)) s (exit $qemu_status), $((SECONDS - started)) s in all"

((qemu_status == 124)) && verdict fail "the guest did not finish within ${guest_timeout} s; $console" 1
grep -aq '^smoke done' "$console" || verdict fail "the guest stopped before its last check; $console" 1
failed=$(grep -a '^smoke [a-z0-9-]*: fail' "$console" | sed 's/^smoke \([^:]*\):.*/\1/' | tr '\n' ' ')
missing=""
for c in $checks; do grep -aq "^smoke $c: " "$console" || missing="$missing $c"; done
[[ -z $failed && -z $missing ]] || verdict fail "failed: ${failed:-none}; missing:${missing:- none}" 1
verdict ok "$(echo "$checks" | wc -w) checks on $(grep -a '^smoke kernel' "$console" | sed 's/.*(\(.*\))/\1/' | tr -d '\r'), $((SECONDS - started)) s" 0
