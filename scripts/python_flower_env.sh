#!/usr/bin/env bash
# Creates build/venv-flower: a separate virtual environment for ballot.flower and its tests, with
# Flower (flwr, plus its `simulation` extra: Ray, which runs the ClientApps of an in-process
# simulation) and pytest from PyPI. Flower needs numpy >= 1.26, while the project's main test
# environment uses Debian's numpy 1.24 and torch, so the two are kept apart; this one is made by
# the same /usr/bin/python3 the extension is built for, without the system site packages.
#
# Use:   bash scripts/python_flower_env.sh
#        PYTHONPATH=build/default/python build/venv-flower/bin/python -m pytest -q tests/python/test_flower.py
# or     flower_python=$(scripts/python_flower_env.sh)
# Progress goes to stderr; the venv's python path is printed last, alone on stdout.
#
# Idempotent: a stamp file records the pinned requirements it installed; when they match and the
# interpreter is there, it only says so and exits (well under a second). A fresh install takes
# about 30-60 s (roughly 150 MB of wheels, Ray being most of it). pip is retried at most 3 times.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${BALLOT_FLOWER_VENV:-$root/build/venv-flower}
python=/usr/bin/python3

# The pins: flwr 1.42.0 and the Ray version its `simulation` extra requires on Python 3.11, the
# numpy it resolves to, and pytest. Changing this list re-runs the install.
requirements=(
  "flwr[simulation]==1.42.0"
  "ray==2.55.1"
  "numpy==2.4.6"
  "pytest==9.2.0"
)
stamp=$venv/.ballot-flower-stamp
wanted=$(printf '%s\n' "${requirements[@]}")

if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "$wanted" ]]; then
  echo "python_flower_env: $venv is up to date (${requirements[*]})" >&2
  echo "$venv/bin/python"
  exit 0
fi

if [[ ! -x $venv/bin/python ]]; then
  echo "python_flower_env: creating $venv with $python ($("$python" --version 2>&1))" >&2
  "$python" -m venv "$venv"
fi

echo "python_flower_env: installing ${requirements[*]}" >&2
start=$SECONDS
for attempt in 1 2 3; do
  if "$venv/bin/python" -m pip install --quiet "${requirements[@]}" >&2; then
    break
  fi
  if ((attempt == 3)); then
    echo "python_flower_env: pip install failed 3 times; giving up" >&2
    exit 1
  fi
  echo "python_flower_env: pip install failed (attempt $attempt of 3); retrying in $((attempt * 5)) s" >&2
  sleep $((attempt * 5))
done

"$venv/bin/python" -c 'import flwr, ray, numpy, pytest; print("python_flower_env: flwr", flwr.__version__, "| ray", ray.__version__, "| numpy", numpy.__version__)' >&2
printf '%s\n' "$wanted" >"$stamp"
echo "python_flower_env: done in $((SECONDS - start)) s" >&2
echo "$venv/bin/python"
