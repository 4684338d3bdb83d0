#!/usr/bin/env bash
# Sets up the Python test environment on Debian 12: Debian's Python packages (headers, venv,
# numpy, torch and what ByzFL imports), Open MPI's mpirun and Slurm (real launchers for the launch
# tests; the Slurm tests start private daemons, none is enabled here), then build/venv — a venv of /usr/bin/python3 with the
# system site packages (so Debian's torch is used) and pinned PyPI packages: nanobind and
# scikit-build-core (to build the extension), pytest, and ByzFL (installed without its
# dependencies: it asks for torch >= 2.2, and Debian's 1.13 runs what the tests use).
# Idempotent: quick when everything is present. Prints the venv's python path last.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(python3-dev python3-venv python3-pip python3-numpy python3-torch python3-scipy
          python3-torchvision python3-matplotlib python3-seaborn openmpi-bin
          slurmctld slurmd slurm-client)
missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "python_env: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "python_env: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv=build/venv
pins=(nanobind==3.1.0 scikit-build-core==1.1.2 pytest==8.4.2)
stamp="$venv/.ballot-pins"
want="${pins[*]} byzfl==0.0.11"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "python_env: creating $venv" >&2
  mkdir -p build
  /usr/bin/python3 -m venv --system-site-packages --clear "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps byzfl==0.0.11 >&2
  echo "$want" > "$stamp"
fi
echo "$PWD/$venv/bin/python"
