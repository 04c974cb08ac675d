#!/usr/bin/env bash
# Builds veritrain on the CUDA machine (Ubuntu 24.04, LibTorch 2.11 + CUDA from the PyTorch
# wheel in /opt/torch/.venv, no package registry) and runs the `gpu` tests and bench_gpu.
#
# That machine lacks some headers the build needs (liblzma, xxhash, ...) and cannot download
# them, so they travel with the tree as Debian 12 packages:
#
#   1. here (Debian 12, with network):  scripts/gpu-build.sh --fetch
#        apt-get downloads the .debs into .dev/debs (git-ignored, ~14 MB; unpacked they would
#        be over the 64 MiB the device tool carries, so they are unpacked over there).
#   2. on the CUDA machine:             scripts/gpu-build.sh          (carry: .dev)
#        unpacks each package into .dev/prefix/<package> (never into /), uses a package only
#        where the machine lacks its headers, points CMake and pkg-config at those folders,
#        configures with torch's cmake prefix, builds, checks that torch's headers reach
#        training/ alone, runs `ctest -L gpu` and `bench_gpu --json`.
#
# Without CUDA (here) the same invocation finds Debian's LibTorch 1.13 and the gpu tests skip;
# bench_gpu then measures on CPU. Environment: BUILD (default build-gpu), JOBS, TARGETS (default
# all; e.g. "bench_gpu training_test" for a quick check), KEEP_GOING=1 (build every target
# it can past a failure: one device call then shows every error), VT_FORCE_PREFIX=1 (use every
# carried package even where the system has it: tests the prefix here), BENCH_OUT (also write
# bench_gpu's JSON there), VT_SKIP_RUN=1 (build only).
#
# Torch and fmt: the 2.x wheels bundle fmt 12 headers, Debian's spdlog is built on fmt 9. Only
# training/ sees torch's include dirs (CMakeLists link it PRIVATE there) and no file there
# includes spdlog or fmt; check_torch_scope below fails the build if that ever changes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=${VT_DEV_DIR:-$ROOT/.dev}
BUILD=${BUILD:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
ARCH=x86_64-linux-gnu

# package (Debian 12 name) -> a file whose presence on the machine makes it unnecessary.
# Packages in one group (spdlog with the fmt it was built against) are used together.
declare -A NEEDS=(
  [liblzma-dev]=/usr/include/lzma.h
  [libxxhash-dev]=/usr/include/xxhash.h [libxxhash0]=/usr/include/xxhash.h
  [libzstd-dev]=/usr/include/zstd.h
  [libcli11-dev]=/usr/include/CLI/CLI.hpp
  [libspdlog-dev]=spdlog+fmt [libspdlog1.10]=spdlog+fmt [libfmt-dev]=spdlog+fmt [libfmt9]=spdlog+fmt
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp [zlib1g-dev]=/usr/include/zlib.h
  [libboost1.74-dev]=/usr/include/boost/version.hpp
  [libgtest-dev]=/usr/include/gtest/gtest.h [libgmock-dev]=/usr/include/gtest/gtest.h
  [libssl-dev]=/usr/include/openssl/ssl.h
  [pkgconf-bin]=pkg-config [libpkgconf3]=pkg-config
)

fetch() {
  mkdir -p "$DEV/debs"
  cd "$DEV/debs"
  # shellcheck disable=SC2046
  apt-get download $(printf '%s\n' "${!NEEDS[@]}" | sort)
  echo "gpu-build: $(ls "$DEV/debs" | wc -l) packages in $DEV/debs; carry .dev to the CUDA machine"
}

system_has() {
  case "$1" in
    spdlog+fmt) [ -e /usr/include/spdlog/spdlog.h ] && [ -e /usr/include/fmt/core.h ] ;;
    pkg-config) command -v pkg-config >/dev/null ;;
    *) [ -e "$1" ] ;;
  esac
}

# Unpacks the packages the machine lacks into fresh folders (runtime libraries beside the -dev
# files whose CMake targets name them); prints the usr dir of each folder used. spdlog and its
# fmt 9 get a folder of their own, .dev/prefix-log: the other prefix's include dir reaches
# training/ (through OpenSSL, nlohmann_json, ...), and fmt 9 there would sit beside torch's fmt 12.
prepare_prefix() {
  local deb pkg dest used=""
  [ -d "$DEV/debs" ] || { echo "gpu-build: no $DEV/debs; using the system's packages only" >&2; return 0; }
  rm -rf "$DEV/prefix" "$DEV/prefix-log"
  for deb in "$DEV"/debs/*.deb; do
    pkg=$(basename "$deb"); pkg=${pkg%%_*}
    [ -n "${NEEDS[$pkg]:-}" ] || continue
    if [ "${VT_FORCE_PREFIX:-0}" != 1 ] && system_has "${NEEDS[$pkg]}"; then continue; fi
    dest=$DEV/prefix
    [ "${NEEDS[$pkg]}" = spdlog+fmt ] && dest=$DEV/prefix-log
    mkdir -p "$dest" && dpkg-deb -x "$deb" "$dest"
    used+=" $pkg"
  done
  echo "gpu-build: carried packages used:${used:- none}" >&2
  for dest in "$DEV/prefix" "$DEV/prefix-log"; do
    [ -d "$dest" ] || continue
    fix_pkgconfig "$dest"
    fix_links "$dest/usr"
    echo "$dest/usr"
  done
}

# .pc files say prefix=/usr; make them point into the unpacked folder.
fix_pkgconfig() {
  local pc
  for pc in "$1"/usr/lib/$ARCH/pkgconfig/*.pc "$1"/usr/share/pkgconfig/*.pc; do
    [ -e "$pc" ] && sed -i -E "s#=/usr(/|\$)#=$1/usr\\1#" "$pc"
  done
  return 0
}

# A -dev package's libX.so points at a runtime library (libX.so.N.M) of another package: one we
# carried, or the machine's own of the same major version. Re-point links that dangle.
fix_links() {
  local usr=$1
  local link target major found d
  for link in "$usr"/lib/$ARCH/lib*.so; do
    if [ ! -L "$link" ] || [ -e "$link" ]; then continue; fi
    target=$(basename "$(readlink "$link")")
    major=$(echo "$target" | sed -E 's/^(lib[^.]*\.so\.[0-9]+).*/\1/')
    found=
    for d in "$usr/lib/$ARCH" /usr/lib/$ARCH /lib/$ARCH /usr/lib64 /lib64; do
      found=$(find "$d" -maxdepth 1 \( -name "$major" -o -name "$major.*" \) 2>/dev/null | sort | head -n 1 || true)
      [ -n "$found" ] && break
    done
    if [ -n "$found" ]; then ln -sf "$found" "$link"; else echo "gpu-build: warning: nothing for $link ($major)" >&2; fi
  done
}

# torch's include dirs must reach training/ (and the one test that builds a TorchScript module,
# and bench_portable, whose peer is LibTorch itself)
# and nothing else; the carried fmt 9 must not reach them; and nothing there may include spdlog
# or fmt.
# LibTorch's include dirs always come as a pair whose second one ends in torch/csrc/api/include
# (in the wheel the first, torch/include, is where its fmt lives).
check_torch_scope() {
  python3 - "$BUILD/compile_commands.json" "$ROOT" <<'EOF'
import json, os, sys
db, root = json.load(open(sys.argv[1])), sys.argv[2]
build = os.path.dirname(sys.argv[1])
inc = "torch/csrc/api/include"
# training/, and the two files outside it that vt_torch_sources names (unity builds compile
# training/'s batches and the test as generated files)
allowed = (root + "/training/", root + "/tests/training/torchscript_test.cpp",
           root + "/bench/bench_portable.cpp",
           build + "/training/CMakeFiles/vt_training.dir/",
           build + "/tests/training/CMakeFiles/training_torchscript_test.dir/")
bad = [e["file"] for e in db if inc in e.get("command", " ".join(e.get("arguments", [])))
       and not e["file"].startswith(allowed)]
if bad:
    sys.exit("gpu-build: torch headers reach files outside training/ and vt_torch_sources: " + ", ".join(bad))
fmt9 = [e["file"] for e in db if e["file"].startswith(allowed) and "/.dev/prefix-log/" in e.get("command", "")]
if fmt9:
    sys.exit("gpu-build: the carried spdlog/fmt 9 headers reach torch-including files: " + ", ".join(fmt9))
print("gpu-build: torch include dirs reach training/ and vt_torch_sources' files only (%d compile commands checked)" % len(db))
EOF
  if grep -rlE '#include *[<"](spdlog|fmt)/' "$ROOT/training" "$ROOT/tests/training/torchscript_test.cpp" \
    "$ROOT/bench/bench_portable.cpp"; then
    echo "gpu-build: a torch-including folder includes spdlog/fmt (clashes with the wheel's fmt)" >&2
    return 1
  fi
}

main() {
  [ "${1:-}" = --fetch ] && { fetch; return; }
  local py=python3 torch_prefix="" prefixes lib_dirs="" pc_dirs="" d gen=()
  [ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
  if torch_prefix=$("$py" -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
    echo "gpu-build: LibTorch from $py: $torch_prefix"
  else
    torch_prefix=""
    echo "gpu-build: no torch in $py; CMake looks for the system's LibTorch"
  fi
  prefixes=$(prepare_prefix)
  for d in $prefixes; do
    lib_dirs+="$d/lib/$ARCH:"
    pc_dirs+="$d/lib/$ARCH/pkgconfig:$d/share/pkgconfig:"
    [ -x "$d/bin/pkgconf" ] && export PKG_CONFIG="$d/bin/pkgconf"
  done
  export LD_LIBRARY_PATH="${lib_dirs}${LD_LIBRARY_PATH:-}"
  export PKG_CONFIG_PATH="${pc_dirs}${PKG_CONFIG_PATH:-}"
  [ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}  # Hopper; quiets torch's arch probe
  # Ninja where there is one, unless the build folder was configured with another generator.
  [ ! -e "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
  local prefix_path
  prefix_path=$(printf '%s;' $torch_prefix $prefixes)
  cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_TESTS=ON -DVT_BUILD_BENCH=ON \
    -DCMAKE_PREFIX_PATH="${prefix_path%;}" ${PKG_CONFIG:+-DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG"}
  local keep_going=()
  if [ "${KEEP_GOING:-0}" = 1 ]; then
    if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$BUILD/CMakeCache.txt"; then keep_going=(-- -k 0); else keep_going=(-- -k); fi
  fi
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j "$JOBS" ${TARGETS:+--target $TARGETS} "${keep_going[@]}"
  check_torch_scope
  [ "${VT_SKIP_RUN:-0}" = 1 ] && return
  (cd "$BUILD" && ctest -L gpu --output-on-failure)
  "$BUILD/bench/bench_gpu" --json | tee ${BENCH_OUT:+"$BENCH_OUT"}
}

main "$@"
