#!/usr/bin/env bash
# Unpacks Debian's libopenblas0-pthread into DIR for bench_portable's peer, without installing
# it: installed, it registers itself as the machine's libblas.so.3 and changes the arithmetic of
# every exact-mode task and test here. Prints the folder that holds its libblas.so.3.
#
#   scripts/openblas_for_bench.sh DIR
set -euo pipefail
dir=$(realpath -m "${1:?usage: openblas_for_bench.sh DIR}")
found() { find "$dir/root" -path '*openblas-pthread/libblas.so.3' -printf '%h\n' 2>/dev/null | head -n1; }
if [ -z "$(found)" ]; then
  mkdir -p "$dir"
  rm -rf "$dir/root" "$dir"/*.deb
  # apt-get download writes as the _apt user where it can; a folder root owns is fine too.
  (cd "$dir" && apt-get download -q libopenblas0-pthread >&2)
  dpkg -x "$dir"/libopenblas0-pthread_*.deb "$dir/root"
fi
lib=$(found)
if [ -z "$lib" ]; then
  echo "openblas_for_bench: no openblas-pthread/libblas.so.3 in $dir" >&2
  exit 1
fi
echo "$lib"
