#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release). Usage: scripts/build.sh [preset] [cmake -D...]
# BUILD_TARGET=NAME builds that target (and what it needs) instead of everything.
# Uses ccache when it is installed (scripts/setup.sh installs it): paths are taken relative to the
# repository, so another clone on the same machine reuses the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache_env.sh
preset=${1:-release}
shift || true
cmake --preset "$preset" "$@" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
