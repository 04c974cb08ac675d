#!/usr/bin/env bash
# A compiler launcher that appends "<wall seconds> <source file>" for each compile to
# $VT_COMPILE_LOG (default ./compile-times.log), for measuring where a build spends its time
# (docs/development.md):
#
#   cmake -S . -B build -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/compile_timer.sh
#   VT_COMPILE_LOG=$PWD/times.log cmake --build build -j2
#   sort -rn times.log | head
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
source_file=""
previous=""
for arg in "$@"; do
  if [ "$previous" = "-c" ]; then source_file=$arg; fi
  previous=$arg
done
awk -v s="$start" -v e="$end" -v f="$source_file" 'BEGIN { printf "%.2f %s\n", e - s, f }' \
  >>"${VT_COMPILE_LOG:-compile-times.log}"
exit $rc
