#!/usr/bin/env bash
# clang-tidy with the checks in .clang-tidy, warnings as errors (`make lint`, and `make test` over
# what changed). Needs a configured build folder for compile_commands.json.
#
#   scripts/lint.sh BUILD            the .cpp files changed relative to the merge base with
#                                    $LINT_BASE (default main), working-tree edits included;
#                                    a changed header brings in the .cpp beside it
#   scripts/lint.sh BUILD --all      every .cpp in compile_commands.json (minutes: torch files)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: lint.sh BUILD [--all]}
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
if [ -z "$tidy" ]; then
  echo "lint: clang-tidy not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint: $build/compile_commands.json missing; configure the build first" >&2
  exit 1
fi

root=$(pwd)
# Unity builds (cmake/build_speed.cmake) compile some files in batches, and the build's
# compile_commands.json names the batches: clang-tidy gets one entry per source file instead,
# each with its batch's command.
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
python3 - "$build/compile_commands.json" "$db/compile_commands.json" <<'PY'
import json, re, sys
entries = []
for e in json.load(open(sys.argv[1])):
    if "/Unity/unity_" not in e["file"]:
        entries.append(e)
        continue
    for line in open(e["file"]):
        included = re.match(r'#include "(.+)"', line)
        if included:
            source = included.group(1)
            entries.append(dict(e, file=source, command=e["command"].replace(e["file"], source)))
json.dump(entries, open(sys.argv[2], "w"))
PY
if [ "${2:-}" = "--all" ]; then
  mapfile -t files < <(python3 -c 'import json,sys; [print(e["file"]) for e in json.load(open(sys.argv[1]))]' \
                         "$db/compile_commands.json" | grep "^$root/" | grep -v "^$root/build" | sort -u)
else
  base=$(git merge-base HEAD "${LINT_BASE:-main}" 2>/dev/null || true)
  if [ -z "$base" ]; then
    echo "lint: no merge base with ${LINT_BASE:-main}; nothing to compare, skipped"
    exit 0
  fi
  files=()
  while IFS= read -r f; do
    case "$f" in
      *.h) f="${f%.h}.cpp" ;;
    esac
    [ -f "$f" ] && files+=("$root/$f")
  done < <(git diff --name-only --diff-filter=d "$base" -- '*.cpp' '*.h' | sort -u)
fi
# Only files the build compiles (a header with no .cpp beside it is linted through its users).
mapfile -t files < <(printf '%s\n' "${files[@]}" | grep -v '^$' | sort -u |
                     python3 -c 'import json,sys; known={e["file"] for e in json.load(open(sys.argv[1]))}
[print(l.strip()) for l in sys.stdin if l.strip() in known]' "$db/compile_commands.json")
if [ ${#files[@]} -eq 0 ]; then
  echo "lint: no changed source files"
  exit 0
fi
echo "lint: clang-tidy over ${#files[@]} file(s)"
# Headers of this project, never system or third-party ones.
filter="^$root/(common|kernels|fingerprint|compression|protocol|training|provider|verifier|cli|tests|bench)/"
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 "$tidy" -p "$db" --quiet --header-filter="$filter"
