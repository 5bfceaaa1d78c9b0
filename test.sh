#!/usr/bin/env bash
# Sets up and runs the whole test suite; the last line is "N passed, M failed".
#   1. optimized build (debugoptimized): unit, integration (once per data path: auto,
#      splice, copy, ring splices, plain fds), hardening, scale and interop (outside
#      tools: promtool) suites, and the docs' checks
#   2. the release build ./run.sh makes (-O3, without the tests), compiled, not run
#   3. liburingfwd installed from step 1's build and used by a small program, through
#      pkg-config (shared and static) and as a meson subproject (scripts/check-install.sh)
#   4. the Debian packages built (dpkg-buildpackage), their contents checked, extracted
#      into a scratch root and run, and lintian-clean of errors (scripts/check-package.sh)
#   5. unit + integration (auto and copy) under AddressSanitizer + UndefinedBehaviorSanitizer
#   6. integration (auto) under ThreadSanitizer (shards run on threads)
#   7. a short libFuzzer run of every parser of outside input (each target must report)
#   8. a QEMU guest on Debian 12's 6.1 kernel with two NUMA nodes runs the binary's smoke
#      checks (scripts/qemu/run.sh, docs/qemu.md); one result line, qemu-6.1-numa. On by
#      default; URING_FWD_QEMU=0 turns it off (then it counts as a skip)
# Steps 2 and 4 run in the background, niced, from the start; so does step 8, once step
# 1 has built the binary it boots; steps 5 and 6 are built (niced, in the background,
# one after the other) from the end of step 1's build, and each runs its suites as soon
# as it is built.
#
# Which step compiles which build a user or packager may make (-Dbuildtype x -Dtests):
#   buildtype       with tests                          without tests
#   release         -                                   2 (-Werror; ./run.sh's build)
#   debugoptimized  1 (every target, -Werror, run)      1 (*)
#   plain           5, 6 (the targets they run; -g1)    4 (dpkg's flags), 3 (subproject)
#   debug           5, 6 (**)                           5, 6 (*)
# (*) -Dtests=false builds the same targets minus tests/ with the same flags (the option
#     only adds subdir('tests')), so the build with tests compiles all of it.
# (**) plain adds no flag of meson's own: -O0 without NDEBUG, as debug is but for -g,
#     which no warning depends on. 5 and 6 compile the engine, the binary and the unit
#     and integration tests that way, with the sanitizers (and -g1, below); the
#     hardening and interop tests are compiled at -O2 (1) only.
# Steps 1, 5 and 6 build at -g1 (line tables: a failure's backtrace still names file and
# line) and compile the test targets with a precompiled header (tests/pch/tests_pch.hpp:
# gtest, gmock, fmt and the standard headers, parsed once per target, not once per
# file). Measured on tests/integration/access_log_test.cpp at -O2, one file at a time:
# -g 5.0 to 6.7 s, -g1 4.7 to 5.1 s, -g1 with the header 3.0 to 3.2 s.
# Steps 3 and 4 build without -Werror on purpose (an embedder's or a distribution's
# compiler must not fail on a new warning); step 4 prints the warnings it sees.
# Each step says what CPU it took ("cpu NAME: U s user + S s system in R s", bash's time):
# on 2 cores, the background steps' CPU is what the foreground ones wait for.
# URING_FWD_QUICK=1 runs only step 1 (for a fast local loop; step 8 too with URING_FWD_QEMU=1).
set -uo pipefail
cd "$(dirname "$0")" || exit 1
# Each step prints how far into the run it starts, so a slow CI shows where the time went.
step() { echo "=== $1 (at ${SECONDS} s)"; }
# timed NAME COMMAND...: runs it and says how much CPU it and its children took, beside
# the wall time: on 2 cores, what a step costs the others running beside it.
timed() {
  local name=$1; shift
  local TIMEFORMAT="cpu $name: %U s user + %S s system in %R s"
  time "$@"
}
results=()   # one "junit-file status" or "name:ok|fail" entry per step

# Step 8 is on by default, off in the quick loop; URING_FWD_QEMU=0 or 1 says so outright.
quick="${URING_FWD_QUICK:-0}"
if [[ $quick == 1 ]]; then qemu="${URING_FWD_QEMU:-0}"; else qemu="${URING_FWD_QEMU:-1}"; fi
deps_args=()
[[ $qemu == 1 ]] && deps_args+=(--qemu)
scripts/install-deps.sh "${deps_args[@]}" || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }

# build_dir DIR [meson setup args...]: configures DIR once and builds it; $targets, when
# set, names the only ninja targets its suites need (a sanitizer build then compiles no
# more). Non-zero, with the log's tail printed, when it fails.
build_dir() {
  local dir=$1; shift
  if [[ ! -f $dir/build.ninja ]] && ! meson setup "$dir" "$@" >"$dir.setup.log" 2>&1; then
    cat "$dir.setup.log"; return 1
  fi
  # shellcheck disable=SC2086 # targets is a list of ninja targets
  if ! ninja -C "$dir" ${targets:-} >"$dir.build.log" 2>&1; then
    tail -50 "$dir.build.log"; return 1
  fi
}

# test_dir DIR "suites to run (empty: all)": one result, meson's JUnit log and status.
test_dir() {
  local dir=$1 suites=$2
  step "$dir: test"
  # An earlier run's log must never be counted: summary.py counts a missing one as a
  # failure.
  rm -f "$dir/meson-logs/testlog.junit.xml"
  # shellcheck disable=SC2086 # suites is a list of test names
  timed "$dir: test" meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 $suites
  results+=("$dir/meson-logs/testlog.junit.xml:$?")
}

# Steps 2 (release build) and 4 (package) compile and check what no test runs, so they
# run in the background at the lowest priority while step 1's suites run (those wait on
# sockets and timers for much of their time): CI gets the cores' idle time, and the
# tests keep theirs. Their output is printed, in order, once they are done.
background_builds() {
  # The build ./run.sh makes (release, -O3, the README's first command), in its own
  # directory, so a ./run.sh after the tests starts at once: GCC finds other warnings at
  # -O3 than at -O2 (a -Wrestrict false positive broke it once, GCC bug 105329). Without
  # the tests, as ./run.sh builds it: the tests' own files are about two thirds of a
  # build's compile time (64 % in step 1's ninja log: 1852 of 2883 compiler-seconds), and
  # step 1 already compiles them with -Werror.
  # Without the precompiled headers (engine/pch/): every engine file must include what
  # it uses, and this is the build of ours that checks it.
  step "build-release"
  if timed build-release nice -n 19 scripts/build.sh build-release -Dtests=false -Dbuildtype=release -Db_pch=false; then
    echo "result build-release:ok"
  else
    echo "result build-release:fail"
  fi
  # The .debs built from debian/, their contents, the installed binary and lintian.
  step "package"
  if timed package nice -n 19 scripts/check-package.sh; then echo "result package:ok"; else echo "result package:fail"; fi
}

# Step 1's build: debugoptimized (meson.build's default) at -g1, see above.
step1_setup=(-Dcpp_args=-g1)
background_log=build-background.log
if [[ $quick != 1 ]]; then
  background_builds >"$background_log" 2>&1 &
  background_pid=$!
fi
# Step 8: the guest boots step 1's binary, so that is built first; the guest then runs
# in the background (niced; the run is bounded by scripts/qemu/run.sh's timeout) while
# step 1's suites run. Its last line is its result. Nice 5, above every build: it needs
# little CPU (92 s in a 1065 s run) but its checks wait on timers inside the guest, and
# at nice 19 beside the nice-10 sanitizer builds it got so little that it ran 829 s of
# its 1200 s timeout (stop 30's clean-clone run).
qemu_log=build-qemu.log
if [[ $qemu == 1 ]]; then
  step "qemu-6.1-numa (in the background)"
  if { [[ -f build/build.ninja ]] || meson setup build "${step1_setup[@]}" >build.setup.log 2>&1; } &&
    ninja -C build engine/uring-fwd >build-qemu-binary.log 2>&1; then
    # Its log's last line is its result: the CPU line goes to a file of its own.
    run_guest() { nice -n 5 scripts/qemu/run.sh build >"$qemu_log" 2>&1; }
    { timed qemu run_guest; } 2>build-qemu.cpu &
    qemu_pid=$!
  else
    tail -20 build.setup.log build-qemu-binary.log 2>/dev/null
    results+=("qemu-6.1-numa:fail")
  fi
fi
step "build: build"
if timed build build_dir build "${step1_setup[@]}"; then
  step1_built=1
else
  step1_built=0
  results+=("build-build:fail")
fi

# Steps 5 and 6 build (not run) in the background, niced, while step 1's suites run:
# those wait on sockets and timers much of the time, and the sanitizer builds took
# 376 s and 207 s of CI's wall time when they ran after them (stop 28's run).
# Debian's gtest is not built with sanitizers; -Db_lundef=false lets the sanitizer
# runtime resolve at load time as it expects. ASan+UBSan covers the unit and
# integration suites on auto (which switches paths) and on copy (which owns user-space
# buffers); TSan, which looks for races between threads (shards, the hand-over, the
# access log's writer), runs integration on auto only: the copy path adds no thread of
# its own, and the unit tests start no thread (nothing for TSan to find). Splice alone
# adds nothing auto does not run, and the hardening suite (namespaces, faults, load)
# runs in the optimized build only. Each compiles only the targets its suites run. All
# to keep CI well under 30 minutes on 2 cores.
run_targets="tests/integration_tests engine/uring-fwd tests/without_io_uring"
sanitizer_common=(-Db_lundef=false -Dbuildtype=plain -Dcpp_args=-g1)
sanitizer_builds() {
  # Niced below step 1's suites, but above steps 2 and 4, which end before the last
  # sanitizer suite anyway: these builds are what the sanitizer suites, and so the end
  # of CI, wait for. CFS shares a contended core by weight (kernel/sched/core.c
  # sched_prio_to_weight): nice 10 weighs 110 against 15 at nice 19 and 1024 at 0.
  renice -n 10 "$BASHPID" >/dev/null # this subshell and the compilers it starts
  step "build-asan: build"
  if targets="tests/unit_tests $run_targets" timed build-asan build_dir build-asan -Db_sanitize=address,undefined "${sanitizer_common[@]}"; then
    echo "built build-asan"
  else
    echo "result build-asan-build:fail"
  fi
  step "build-tsan: build"
  if targets=$run_targets timed build-tsan build_dir build-tsan -Db_sanitize=thread "${sanitizer_common[@]}"; then
    echo "built build-tsan"
  else
    echo "result build-tsan-build:fail"
  fi
}
sanitizer_log=build-sanitizers.log
if [[ $quick != 1 ]]; then
  sanitizer_builds >"$sanitizer_log" 2>&1 &
  sanitizer_pid=$!
fi

((step1_built)) && test_dir build ""
if [[ $quick != 1 ]]; then
  # One step, one result: its own output says which part failed.
  step "install"
  if scripts/check-install.sh build; then results+=("install:ok"); else results+=("install:fail"); fi
  # Their output is printed, in order, once they are done; "result" lines are results.
  collect() {
    wait "$1"
    while IFS= read -r line; do
      case "$line" in
        "result "*) results+=("${line#result }") ;;
        *) echo "$line" ;;
      esac
    done <"$2"
  }
  # A sanitizer build's suites start as soon as it is built, while the rest (the other
  # sanitizer build, the package) goes on building, niced, beside them: true once its
  # line is in the log, false if the job ended without it (its failure is collected
  # below).
  built() {
    while ! grep -qx "built $1" "$sanitizer_log"; do
      kill -0 "$sanitizer_pid" 2>/dev/null || { grep -qx "built $1" "$sanitizer_log"; return; }
      sleep 2
    done
  }
  step "build-asan: waiting for its build (started with step 1's suites)"
  if built build-asan; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      test_dir build-asan "unit integration integration-copy"
  fi
  step "build-tsan: waiting for its build"
  if built build-tsan; then
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 test_dir build-tsan "integration"
  fi
  # Every target run.sh lists must report ok: a crash, a failed build, a target with no
  # verdict line and run.sh's own non-zero exit (with no target to blame) each count as
  # a failure, so the step cannot vanish from the count.
  step "fuzz"
  timed fuzz tests/fuzz/run.sh "${URING_FWD_FUZZ_SECONDS:-10}" >build-fuzz-verdicts.log 2>build-fuzz.log
  fuzz_status=$?
  cat build-fuzz.log build-fuzz-verdicts.log
  mapfile -t fuzz_targets < <(tests/fuzz/run.sh --list)
  if ((${#fuzz_targets[@]} == 0)); then
    echo "fuzz: run.sh --list named no target"
    results+=("fuzz-list:fail")
  fi
  fuzz_failed=0
  for target in "${fuzz_targets[@]}"; do
    if grep -q "^$target: ok, " build-fuzz-verdicts.log; then
      results+=("fuzz-$target:ok")
    else
      grep -q "^$target: " build-fuzz-verdicts.log || echo "fuzz: $target did not report"
      results+=("fuzz-$target:fail")
      fuzz_failed=1
    fi
  done
  if ((fuzz_status != 0 && fuzz_failed == 0)); then
    echo "fuzz: run.sh exited $fuzz_status"
    results+=("fuzz-run.sh:fail")
  fi
  # Last: whatever of them is still building has had the fuzz run's time too.
  step "background builds (started with step 1)"
  collect "$background_pid" "$background_log"
  step "sanitizer builds (started with step 1's suites)"
  collect "$sanitizer_pid" "$sanitizer_log"
fi

if [[ $qemu == 1 && -n ${qemu_pid:-} ]]; then
  step "qemu-6.1-numa (started with step 1)"
  wait "$qemu_pid"
  cat "$qemu_log" build-qemu.cpu
  case "$(tail -1 "$qemu_log")" in
    "qemu-6.1-numa: ok "*) results+=("qemu-6.1-numa:ok") ;;
    "qemu-6.1-numa: skip "*) results+=("qemu-6.1-numa:skip") ;;
    *) results+=("qemu-6.1-numa:fail") ;;
  esac
elif [[ $qemu != 1 ]]; then
  echo "qemu-6.1-numa: skip (off: URING_FWD_QEMU=0 or URING_FWD_QUICK=1)"
  results+=("qemu-6.1-numa:skip")
fi

step "done"
python3 tests/summary.py "${results[@]}"
