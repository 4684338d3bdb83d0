#!/usr/bin/env bash
# The GPU checks in one run, for a GPU machine without package registries (../shared/gpu/README.md):
# builds only what runs on the GPU (the CUDA and NCCL tests, gpu_bench and, where nanobind and
# Python's headers are present, the Python module and the `ballot` program) against the packages that
# ../shared/gpu/prepare-deps.sh put in DEPS, then runs the CUDA tests, compute-sanitizer on them,
# the NCCL test, gpu_bench (the codecs; every kernel with FULL_BENCH=1), the torch-ops baseline,
# the Python CUDA tests (ballot.signs, ballot.torch nodes with CUDA models in a local cluster) and
# the cost of a ballot.torch node's vote against ResNet-50's backward (bench/gpu/torch_vote_cost.py).
# Usage, from the project's root: LOG_DIR=dir DEPS=.gpu-deps bash bench/gpu/device_check.sh
# (BENCH=0 skips compute-sanitizer and the benchmarks: a quicker re-check of the tests; PYTHON=0
# skips the Python module and its tests; MEMCHECK_ALL=0 runs compute-sanitizer on the codec tests
# only; PROFILE=1 times each codec kernel with ncu; PTXAS=0 skips the register report; BUDGET=seconds
# bounds the whole run, the tests first.)
set -u
began=$(date +%s)
deps=$(cd "${DEPS:-.gpu-deps}" && pwd)
log=${LOG_DIR:-/tmp/ballot-gpu-logs}
mkdir -p "$log"
exec > >(tee "$log/device_check.log") 2>&1
prefix=/tmp/ballot-deps
build=/tmp/ballot-gpu
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
mkdir -p "$prefix"
for f in "$deps"/*.deb; do dpkg -x "$f" "$prefix"; done
L=$prefix/usr/lib/x86_64-linux-gnu
ln -sf "$(ls "$prefix"/lib/x86_64-linux-gnu/libz.so.1.* "$prefix"/usr/lib/x86_64-linux-gnu/libz.so.1.* 2>/dev/null | head -1)" "$L/libz.so"
export LD_LIBRARY_PATH=$L:$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nccl_h=$(find /usr/include /usr/local -name nccl.h 2>/dev/null | head -1)
nccl_so=$(find /usr/lib /usr/local -name "libnccl.so*" 2>/dev/null | head -1)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
configure() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr" \
    -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" -DBALLOT_CUDA=ON -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
    ${nccl_h:+-DBALLOT_NCCL=ON -DBALLOT_NCCL_INCLUDE_DIR="$(dirname "$nccl_h")" -DBALLOT_NCCL_LIBRARY="$nccl_so"} \
    -DOPENSSL_ROOT_DIR="$prefix/usr" -DBoost_DIR="$L/cmake/Boost-1.74.0" \
    -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include/x86_64-linux-gnu -isystem $prefix/usr/include" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$L" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath,$L" "$@" \
    > "$log/configure.log" 2>&1
}
targets="kernels_cuda_test robust_cuda_test coding_cuda_test gpu_bench"
if [ "${PYTHON:-1}" != 0 ] && configure -DBALLOT_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)"; then
  targets="$targets ballot_python ballot"
else
  if [ "${PYTHON:-1}" != 0 ]; then
    echo "the Python module is not built here: $(grep -m1 -i error "$log/configure.log")"
  fi
  rm -rf "$build"
  configure || { tail -30 "$log/configure.log"; exit 1; }
fi
grep -q "NCCL ON" "$log/configure.log" && targets="$targets transport_nccl_test"
echo "== build: $targets"
start=$(date +%s)
cmake --build "$build" -j"$(nproc)" --target $targets > "$log/build.log" 2>&1 ||
  { grep -B2 -A12 "error" "$log/build.log" | head -60; exit 1; }
echo "built in $(($(date +%s) - start)) s"
# With BUDGET=seconds, each step below gets what is left of that budget (counted from the start of
# this script, the build included) and is skipped when less than a minimum is left. The most
# telling steps come first.
step() {  # step MIN_SECONDS MAX_SECONDS command...: runs under timeout, or says why it was skipped
  local min=$1 max=$2 left
  shift 2
  if [ "${BUDGET:-0}" != 0 ]; then
    left=$((BUDGET - ($(date +%s) - began)))
    if [ "$left" -lt "$min" ]; then echo "   (skipped: ${left} s of the budget left, this step needs ${min})"; return 0; fi
    [ "$left" -lt "$max" ] && max=$left
  fi
  timeout "$max" "$@"
}
echo "== CUDA tests ($(date +%T))"
for t in tests/kernels/kernels_cuda_test tests/robust/robust_cuda_test tests/coding/coding_cuda_test; do
  echo "-- $t"
  step 20 300 "$build/$t" > /tmp/ballot-cuda-test.out 2>&1
  # the whole output, with each failure's trace (the case it ran), in one log
  { echo "-- $t"; cat /tmp/ballot-cuda-test.out; } >> "$log/cuda-tests.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|differs|error" /tmp/ballot-cuda-test.out | head -30
done
python_built=0
[ "${PYTHON:-1}" != 0 ] && ls "$build"/python/ballot/_native*.so > /dev/null 2>&1 && python_built=1
if [ $python_built = 1 ]; then
  echo "== Python: ballot.signs, codecs and robust rules on CUDA tensors, ballot.torch nodes with CUDA models ($(date +%T))"
  PYTHONPATH="$build/python" step 60 300 python3 -m pytest -q -p no:cacheprovider -rs \
    tests/python/test_signs.py tests/python/test_codecs_cuda.py tests/python/test_robust_cuda.py \
    tests/python/test_torch_node.py -k "not fashion and not launch and not certified and not alie" \
    > "$log/pytest.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$log/pytest.log" | tail -20
fi
if [ "${BENCH:-1}" != 0 ] && [ $python_built = 1 ]; then
  echo "== a ballot.torch node's vote against ResNet-50's backward ($(date +%T))"
  for batch in 32 128; do
    PYTHONPATH="$build/python" step 45 120 python3 bench/gpu/torch_vote_cost.py --batch $batch 2>&1 | tail -16
  done
fi
if [ "${BENCH:-1}" != 0 ]; then
  echo "== gpu_bench: the codecs and Krum ($(date +%T))"
  step 40 120 "$build/bench/gpu/gpu_bench" --benchmark_filter='Encode|Bandwidth|Krum' --benchmark_counters_tabular=true 2>&1 | tail -20
fi
if [ -x "$build/tests/transport/transport_nccl_test" ]; then
  echo "== NCCL test"
  step 10 60 "$build/tests/transport/transport_nccl_test" 2>&1 | tail -6
fi
if [ $python_built = 1 ]; then
  echo "== a group of CUDA processes as one node ($(date +%T))"
  PYTHONPATH="$build/python" step 60 180 python3 -m pytest -q -p no:cacheprovider -rs \
    tests/python/test_torch_launch.py -k cuda 2>&1 | tail -6
fi
if [ "${BENCH:-1}" != 0 ]; then
  echo "== compute-sanitizer memcheck (CUDA tests, $(date +%T))"
  step 60 150 compute-sanitizer --tool memcheck "$build/tests/coding/coding_cuda_test" \
    --gtest_filter='-*LargeGradient*:*LargeSegment*' > "$log/memcheck-coding.log" 2>&1
  grep -E "ERROR SUMMARY|PASSED|FAILED" "$log/memcheck-coding.log" | tail -4
  if [ "${MEMCHECK_ALL:-1}" != 0 ]; then
    step 60 150 compute-sanitizer --tool memcheck "$build/tests/kernels/kernels_cuda_test" > "$log/memcheck.log" 2>&1
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$log/memcheck.log" | tail -4
    step 60 150 compute-sanitizer --tool memcheck "$build/tests/robust/robust_cuda_test" \
      --gtest_filter='DistanceRules*' > "$log/memcheck-distances.log" 2>&1
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$log/memcheck-distances.log" | tail -4
  fi
  echo "== torch ops (same GPU, $(date +%T))"
  step 40 150 python3 bench/gpu/torch_ops.py 2>&1
fi
if [ "${PTXAS:-1}" != 0 ]; then
  echo "== kernel resources (ptxas -v, sm_${arch:-90})"
  for unit in kernels/cuda/launch.cu coding/cuda/launch.cu; do
    nvcc -std=c++20 -I. -I"$build/generated" -arch=sm_"${arch:-90}" -Xptxas -v -c "$unit" -o /dev/null 2>&1 |
      awk '/Compiling entry/ { name = $0; sub(/.*launch_cu_[0-9a-f]+/, "", name); name = substr(name, 1, 36) }
           /stack frame/ { frame = $0; sub(/.*info *: */, "", frame) }
           /Used/ { regs = $0; sub(/.*info *: */, "", regs); if (name !~ /cub/) print name ": " regs "; " frame }'
  done
fi
if [ "${PROFILE:-0}" != 0 ] && command -v ncu > /dev/null; then
  echo "== ncu: time and throughput of each codec kernel ($(date +%T))"
  for run in qsgd:3 terngrad:3 topk:36; do
    codec=${run%%:*}
    timeout 120 ncu --clock-control none --launch-count "${run##*:}" \
      -k 'regex:chunk|factors|quantize|topk|Select|gather|Scan|Init|sample|candidates|map|Onesweep|Histogram' \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      "$build/bench/gpu/gpu_bench" --benchmark_filter="Encode/$codec" --benchmark_min_time=0.001 > "$log/ncu-$codec.log" 2>&1
    grep -E "Context|gpu__time_duration|dram__throughput" "$log/ncu-$codec.log" |
      sed -e 's/(anonymous namespace):://' -e 's/<unnamed>:://' -e 's/^ *void //' -e 's/ \{2,\}/ /g' |
      sed -e 's/gpu__time_duration.sum us//' -e 's/dram__throughput.avg.pct_of_peak_sustained_elapsed %/dram %/' |
      cut -c1-50 | paste -d'|' - - - | head -40
  done
fi
if [ "${FULL_BENCH:-0}" != 0 ]; then
  echo "== gpu_bench (every kernel)"
  timeout 240 "$build/bench/gpu/gpu_bench" --benchmark_counters_tabular=true 2>&1
fi
