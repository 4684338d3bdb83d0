#!/usr/bin/env bash
# Installs every system dependency of Ballot on Debian 12 with apt-get. Idempotent, and quick
# when everything is already there (it asks dpkg first and calls apt-get only for what is missing).
set -euo pipefail

packages=(
  # toolchain
  cmake g++ ninja-build git pkg-config ccache
  clang libclang-rt-14-dev            # libFuzzer (the `fuzz` preset) and sanitizer runtimes
  clang-format-14                     # scripts/format.sh and its ctest
  # test and benchmark frameworks
  libgtest-dev libgmock-dev libbenchmark-dev
  # libraries
  libasio-dev libssl-dev libboost-graph-dev libeigen3-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev zlib1g-dev
  # the real dataset (IDX files under /usr/share/datasets/fashion-mnist)
  dataset-fashion-mnist
  # rsvg-convert: the evaluation tests render the report's SVG figures to check text extents
  librsvg2-bin
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
