#!/usr/bin/env bash
# Fails when clang-format (the repo's .clang-format) would change a C++ file: `make test` runs it
# over every tracked .h and .cpp, so the declared format is the code's. `make format` fixes it.
#
#   scripts/check_format.sh              every tracked .h/.cpp
#   scripts/check_format.sh FILE...      just these
set -euo pipefail
# Files named on the command line are the caller's paths, relative to where it runs.
given=()
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "format: $f: no such file" >&2
    exit 1
  fi
  given+=("$(readlink -f "$f")")
done
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$fmt" ]; then
  echo "format: clang-format not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
if [ ${#given[@]} -gt 0 ]; then
  files=("${given[@]}")
else
  mapfile -t files < <(git ls-files '*.h' '*.cpp')
fi
# One clang-format per batch of files, as many batches at once as there are cores: one process
# per file spent most of the check's minute starting 467 processes. Each file that would change
# is named on stderr ("FILE:LINE:COL: error: code should be clang-formatted").
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
printf '%s\0' "${files[@]}" | xargs -0 -n 32 -P "$(nproc)" "$fmt" --dry-run -Werror >/dev/null 2>"$log" ||
  status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" | sort -u)
if [ "$status" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "format: clang-format failed:" >&2
  cat "$log" >&2
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: clang-format would change ${#bad[@]} file(s); run 'make format':" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} file(s) as .clang-format declares"
