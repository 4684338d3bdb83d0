#!/usr/bin/env bash
# Sets everything up and runs every test: the normal build's suite (unit, integration over
# loopback, examples, fuzz replays, the installed-package consumer) with the Python package and
# its pytest suite (numpy, Debian's torch, the real ByzFL, a real Flower simulation), the package
# installed with `pip install .` into a fresh venv, then the C++ suite under AddressSanitizer +
# UndefinedBehaviorSanitizer, the transport's threaded tests under ThreadSanitizer, then each
# libFuzzer target for a bounded time.
# Usage: scripts/test.sh [--quick]   (--quick: only the normal build's suites, no packaging test)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh
python=$(scripts/python_env.sh)

# ctest of a preset; when the only failure is the one test that used to stall now and then in full
# runs (a server under a flood of idle loopback connections: docs/security.md, "Fixed: a server
# stalled"; its cause is fixed, this stays until full runs have shown it gone), that test is run
# once more, alone, and must pass. Any other failure fails the run at once.
ctest_preset() {
  local preset=$1 flaky='ProcessCluster.RejoinsThroughAFloodOfIdleSockets'
  if ctest --preset "$preset" -j "$jobs"; then return 0; fi
  local failed
  failed=$(cut -d: -f2- "build/$preset/Testing/Temporary/LastTestsFailed.log")
  if [[ "$failed" != "$flaky" ]]; then return 1; fi
  echo "== $flaky failed in the full run: once more, alone"
  ctest --preset "$preset" -R "^${flaky}\$"
}

echo "== build and test: default preset (C++ and the Python extension)"
scripts/build.sh default -DBALLOT_PYTHON=ON -DPython_EXECUTABLE="$python"
ctest_preset default

echo "== Python tests (pytest, build tree's package, Debian's torch, ByzFL)"
export PYTHONPATH="$PWD/build/default/python"
"$python" -m pytest -q tests/python

echo "== Flower tests (pytest, real flwr in build/venv-flower)"
flower_python=$(scripts/python_flower_env.sh)
"$flower_python" -m pytest -q tests/python/test_flower.py
unset PYTHONPATH

if [[ "${1:-}" == "--quick" ]]; then exit 0; fi

echo "== packaging: pip install . into a fresh venv, then an example and the ballot program"
source scripts/ccache_env.sh
BALLOT_TEST_PACKAGING=1 "$python" -m pytest -q tests/python/test_packaging.py

echo "== build and test: debug-asan preset (ASan + UBSan)"
scripts/build.sh debug-asan -DBALLOT_PYTHON=ON -DPython_EXECUTABLE="$python"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest_preset debug-asan

echo "== Python tests under ASan + UBSan (the sanitized extension in the system interpreter)"
# The interpreter is not instrumented, so the runtime is preloaded (with libstdc++, whose
# __cxa_throw ASan must find at start-up); Python's own allocations are not leak-checked.
LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  PYTHONPATH="$PWD/build/debug-asan/python" "$python" -m pytest -q -p no:cacheprovider tests/python

echo "== ThreadSanitizer: the transport's tests (TLS sessions, io threads, loopback clusters)"
# runtime_test (sessions, simulator, process clusters) passes under TSan too but takes 10 minutes
# on 2 cores: run it by hand (`cmake --build --preset debug-tsan --target runtime_test`).
source scripts/ccache_env.sh
cmake --preset debug-tsan >/dev/null
cmake --build --preset debug-tsan -j "$jobs" --target transport_test transport_net_test
for test in transport_test transport_net_test; do
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "build/debug-tsan/tests/transport/$test" --gtest_brief=1
done

echo "== libFuzzer targets (clang), bounded time each"
source scripts/ccache_env.sh
cmake --preset fuzz -DBALLOT_FUZZ_SECONDS="${BALLOT_FUZZ_SECONDS:-20}" >/dev/null
cmake --build --preset fuzz -j "$jobs" --target fuzzers
ctest --test-dir build/fuzz -R '^fuzz\.' --output-on-failure
