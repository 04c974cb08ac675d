#!/usr/bin/env bash
# Fails when clang-format (the repo's .clang-format) would change a C++ file: `make test` runs it
# over every tracked .h and .cpp, so the declared format is the code's. `make format` fixes it.
#
#   scripts/check_format.sh              every tracked .h/.cpp
#   scripts/check_format.sh FILE...      just these
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$fmt" ]; then
  echo "format: clang-format not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.h' '*.cpp')
fi
bad=()
for f in "${files[@]}"; do
  "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: clang-format would change ${#bad[@]} file(s); run 'make format':" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} file(s) as .clang-format declares"
