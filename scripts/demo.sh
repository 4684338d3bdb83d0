#!/usr/bin/env bash
# Sets everything up, builds (release) and runs the main job.
# Until the training runtime lands (issue 7) the main job is the kernel benchmark: the sign
# packing and bit-sliced majority vote that every training round runs, measured against the
# machine's memory bandwidth and the reference implementation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
build/release/apps/ballot info
exec build/release/bench/kernels_bench "$@"
