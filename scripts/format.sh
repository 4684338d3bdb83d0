#!/usr/bin/env bash
# Formats every C++ and CUDA source of the repository with .clang-format (clang-format 14, Debian
# 12's): the tracked files and the new ones git does not ignore. --check: change nothing, list the
# files that differ and fail when there are any.
set -euo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$format" ]]; then
  echo "format.sh: clang-format is not installed (apt-get install clang-format)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.h' '*.cc' '*.cu' '*.cuh')
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for file in "${files[@]}"; do
    if ! "$format" --style=file "$file" | cmp -s - "$file"; then
      echo "not formatted: $file (run scripts/format.sh)"
      bad=1
    fi
  done
  exit "$bad"
fi
"$format" --style=file -i "${files[@]}"
