#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 30), as many
# at once as there are CPUs (URING_FWD_FUZZ_JOBS=N sets it): each target still gets its
# SECONDS of one CPU, and on 2 cores the step takes half as long. Prints one verdict line
# per target, in the order of --list: "NAME: ok, ...", "NAME: BUILD FAILED" or
# "NAME: CRASH, ..." (a target that ended without a verdict gets a CRASH line).
# Everything is written to a scratch directory, so the seed corpora in the repository are
# never modified; copy interesting new inputs back by hand. Exits non-zero unless every
# target is ok.
#   run.sh --list   the targets, one a line (test.sh expects a verdict from each)
set -euo pipefail

# The targets (config first: it takes longest to build); each has a libFuzzer source and a seed corpus under tests/fuzz/
# and an entry in sources below.
targets=(config endpoint cpu_list proxy_header client_hello control)
if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "${targets[@]}"
    exit 0
fi

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "usage: $0 [SECONDS]  (whole seconds per target, default 30) | $0 --list" >&2
    exit 2
fi
jobs="${URING_FWD_FUZZ_JOBS:-$(nproc)}"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"

# Debian splits the fuzzer runtime (libclang-rt) from the compiler, and both are needed.
if ! command -v clang++ >/dev/null; then
    apt-get install -y clang libclang-rt-14-dev
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/uringfwd-fuzz.XXXXXX")"
keep_work=0
# shellcheck disable=SC2317 # called through the trap
cleanup() { if [ "$keep_work" -eq 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT

# UB must stop the run rather than print and continue, or it would never count as a crash.
# shellcheck disable=SC2054 # the commas belong to -fsanitize=
cxxflags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
          -I engine/include -I engine -I .)
read -r -a fmt_flags <<<"$(pkg-config --cflags --libs fmt)"

# target name -> the parser sources it links.
declare -A sources=(
    [endpoint]="engine/net/endpoint.cpp engine/support/quote_input.cpp"
    [cpu_list]="engine/platform/cpu_list.cpp engine/support/quote_input.cpp"
    [proxy_header]="engine/protocol/proxy_header.cpp"
    # toml++ is compiled in (its headers hold the implementation; without
    # TOML_HEADER_ONLY=0 they are used header-only), so the fuzzer instruments the TOML
    # parser as well as ours.
    [config]="$(echo engine/config/*.cpp) engine/net/endpoint.cpp engine/support/quote_input.cpp
              engine/platform/cpu_list.cpp engine/platform/numa_topology.cpp
              engine/api/data_path.cpp engine/api/route.cpp engine/support/log_level.cpp
              engine/net/cidr.cpp engine/routing/sni_router.cpp engine/api/operations.cpp
              engine/net/socket_address.cpp engine/platform/accounts.cpp
              engine/api/runtime_names.cpp engine/api/validate.cpp
              engine/net/socket_controls.cpp"
    [client_hello]="engine/protocol/client_hello.cpp"
    [control]="engine/cli/control/command.cpp engine/cli/control/line_buffer.cpp
               engine/config/closest_name.cpp engine/support/quote_input.cpp"
)

# target name -> extra compiler flags.
declare -A target_flags=(
    [config]="-include tests/fuzz/toml_assert.hpp"
)

# Builds and runs one target; its verdict goes to stdout, its logs to stderr (both to
# files of its own, printed in order once every target is done).
fuzz_one() {
    local target=$1
    local bin="$work/${target}_fuzz"
    local corpus="$work/corpus/$target"
    local artifacts="$work/artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    cp tests/fuzz/corpus/"$target"/* "$corpus"/

    local target_sources extra_flags
    read -r -d '' -a target_sources <<<"${sources[$target]}" || true
    read -r -a extra_flags <<<"${target_flags[$target]:-}"
    if ! clang++ "${cxxflags[@]}" "${extra_flags[@]}" "tests/fuzz/${target}_fuzz.cpp" \
        "${target_sources[@]}" \
        "${fmt_flags[@]}" -o "$bin" 2>"$work/$target.build.log"; then
        echo "$target: BUILD FAILED (see below)"
        cat "$work/$target.build.log" >&2
        return 1
    fi

    # A dictionary of the format's words, where a target has one (tests/fuzz/NAME.dict).
    local dict=()
    if [ -f "tests/fuzz/$target.dict" ]; then dict=(-dict="tests/fuzz/$target.dict"); fi

    local log="$work/$target.log"
    if "$bin" -max_total_time="$seconds" -artifact_prefix="$artifacts" "${dict[@]}" "$corpus" \
        >"$log" 2>&1; then
        local runs
        runs="$(grep -o 'Done [0-9]* runs' "$log" | grep -o '[0-9]*' || echo '?')"
        echo "$target: ok, $runs runs in ${seconds}s, corpus $(find "$corpus" -type f | wc -l) inputs"
    else
        local crash
        crash="$(find "$artifacts" -type f | head -n 1)"
        echo "$target: CRASH, input ${crash:-<none saved>}, log $log"
        tail -n 40 "$log" >&2
        return 1
    fi
}

for target in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    fuzz_one "$target" >"$work/$target.verdict" 2>"$work/$target.stderr" &
done
wait

status=0
for target in "${targets[@]}"; do
    verdict="$(cat "$work/$target.verdict" 2>/dev/null || true)"
    if [ -z "$verdict" ]; then
        verdict="$target: CRASH, no verdict (the run ended without one), logs in $work"
    fi
    echo "$verdict"
    cat "$work/$target.stderr" >&2 2>/dev/null || true
    case "$verdict" in
        *": ok, "*) ;;
        *) status=1; keep_work=1 ;;
    esac
done
exit "$status"
