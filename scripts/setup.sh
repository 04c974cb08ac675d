#!/usr/bin/env bash
# Installs every Debian package veritrain needs to build, test and demo. Idempotent: a no-op
# when all are present. Nothing is downloaded from anywhere but Debian's archive.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  lld                               # links in a sixth of GNU ld's time (cmake/build_speed.cmake)
  libtorch-dev                      # LibTorch 1.13.1, CPU
  libssl-dev openssl                # EVP hashing/signing, TLS; the CLI for tests
  libzstd-dev zstd liblzma-dev xz-utils
  libboost-dev                      # Asio and Beast (header-only)
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libxxhash-dev
  libgtest-dev
  libgloo-dev                       # training/distributed.cpp: c10d ProcessGroupGloo headers (ranks)
  python3                           # the layering test, reference scripts
  python3-torch python3-numpy       # reference/replay_ref.py: the independent reference replayer
  python3-torchvision               # real model definitions (resnet18, mobilenet_v2) for portable tests
  python3-torchaudio                # real speech models (wav2vec2) for the exact-mode replay tests
  clang-tidy clang-format           # make lint (clang-tidy 14); the format check of make test
  python3-sklearn fortunes zlib1g-dev  # dataset tests: digits (make_digits.py), fortunes text; MNIST .gz
  chromium                          # renders report.html to PNG in the verifier's test
  curl                              # scrapes train --metrics and /healthz in tests/cli/cli_json_test.cpp
)
# `setup.sh --fuzz` (make fuzz) adds clang and its libFuzzer/sanitizer runtimes.
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root (or: sudo apt-get install --no-install-recommends ${missing[*]})" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has empty package lists; refresh them when they are missing or a day old.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages' -mtime -1 2>/dev/null | head -1)" ]; then
  apt-get update -qq
fi
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "setup: retrying after refreshing the package lists" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: done"
