#!/usr/bin/env bash
# Sets everything up, builds (release) and runs the main job: `ballot train` on its embedded
# defaults — a local cluster of one server and 7 node processes on loopback, talking mutual TLS
# 1.3 with Ed25519-signed messages, training an MLP on Fashion-MNIST with signSGD/Signum majority
# votes through a deterministic election code that certifiably tolerates one Byzantine node.
# Extra arguments go to `ballot train` (see `ballot train --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_TARGET=ballot scripts/build.sh release  # the program only: not the tests and benchmarks
build/release/apps/ballot info
exec build/release/apps/ballot train "$@"
