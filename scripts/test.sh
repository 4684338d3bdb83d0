#!/usr/bin/env bash
# Sets everything up and runs every test: the normal build's suite (unit, integration over
# loopback, examples, fuzz replays, the installed-package consumer), then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer target for a bounded time.
# Usage: scripts/test.sh [--quick]   (--quick: only the normal build's suite)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh

echo "== build and test: default preset"
scripts/build.sh default
ctest --preset default -j "$jobs"

if [[ "${1:-}" == "--quick" ]]; then exit 0; fi

echo "== build and test: debug-asan preset (ASan + UBSan)"
scripts/build.sh debug-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset debug-asan -j "$jobs"

echo "== libFuzzer targets (clang), bounded time each"
cmake --preset fuzz -DBALLOT_FUZZ_SECONDS="${BALLOT_FUZZ_SECONDS:-20}" >/dev/null
cmake --build --preset fuzz -j "$jobs" --target fuzzers
ctest --test-dir build/fuzz -R '^fuzz\.' --output-on-failure
