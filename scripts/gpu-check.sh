#!/usr/bin/env bash
# One device session's checks, in the order that spends the fewest minutes of a lent GPU: build
# (every error at once), the `gpu` tests, a CLI round trip on CUDA, then bench_gpu. Everything a
# person reads afterwards lands in RESULTS (default: $OUT, the device tool's return folder):
#   build.log        configure + build
#   gpu_tests.log    ctest -L gpu
#   machine.txt      GPU, driver, compilers, LibTorch
#   cli.log          task init / train / verify of exact CUDA tasks on this GPU
#   cuda_workdir.tar.gz    the cnn workdir, to verify on a CPU-only machine afterwards:
#                    `veritrain verify --task task.json --workdir work` there must end
#                    inconclusive (a CUDA exact task cannot be replayed on a CPU), not rejected
#   bench_gpu.txt    bench_gpu's figures, one per line (docs/benchmarks.md, "GPU")
# Carry .dev (scripts/gpu-build.sh --fetch). BENCH_TIMEOUT bounds the benchmark (seconds).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESULTS=${RESULTS:-${OUT:-$ROOT/gpu-results}}
BUILD=${BUILD:-$ROOT/build-gpu}
mkdir -p "$RESULTS"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  g++ --version | head -n 1
  cmake --version | head -n 1
  nvcc --version 2>/dev/null | tail -n 1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
  nproc
} >"$RESULTS/machine.txt" 2>&1
cat "$RESULTS/machine.txt"

KEEP_GOING=1 VT_SKIP_RUN=1 BUILD=$BUILD \
  TARGETS="veritrain veritrain-torch replay_tool training_test bench_gpu" \
  bash "$ROOT/scripts/gpu-build.sh" >"$RESULTS/build.log" 2>&1
build_rc=$?
if [ $build_rc != 0 ]; then
  grep -E 'error|Error|FAILED' "$RESULTS/build.log" | head -n 80
  tail -n 15 "$RESULTS/build.log"
  echo "gpu-check: build failed (rc $build_rc)"
  exit $build_rc
fi
grep '^gpu-build' "$RESULTS/build.log"
(cd "$BUILD" && timeout 150 ctest -L gpu --output-on-failure) >"$RESULTS/gpu_tests.log" 2>&1
tests_rc=$?
echo "gpu-check: ctest -L gpu rc $tests_rc"
grep -E 'tests passed|tests failed|Passed|Failed|Skipped|Expected|Which is|differs' "$RESULTS/gpu_tests.log" | tail -n 25
# On 2026-11-28 (H200, LibTorch 2.11) every gpu test died of a call through a null pointer
# (SIGSEGV at pc 0, where the backtrace stops). At pc 0 the word at the stack pointer is the
# caller's return address: name it.
if [ $tests_rc != 0 ] && command -v cuda-gdb >/dev/null; then
  timeout 120 cuda-gdb -q -batch -ex run -ex 'x/4a $sp' -ex 'info symbol *(void**)$sp' \
    -ex 'thread apply all bt 8' --args "$BUILD/tests/training/training_test" \
    --gtest_filter='Zoo/CudaReplay*/0' >"$RESULTS/gdb_test.txt" 2>&1
  grep -v 'Cuda Driver error' "$RESULTS/gdb_test.txt" | tail -n 40 | cut -c1-240
fi

V=$BUILD/cli/veritrain
W=$(mktemp -d)
step() { echo "+ veritrain $*"; (cd "$W" && "$V" "$@"); echo "rc $?"; }
{
  step --version
  step task init --model cnn --device cuda --determinism exact --epochs 3 --out task.json
  step train --task task.json --workdir work
  step verify --task task.json --workdir work --report cnn-report
  step task init --model gpt --device cuda --determinism exact --precision bf16 --epochs 2 --out gpt.json
  step train --task gpt.json --workdir gpt-work
  step verify --task gpt.json --workdir gpt-work --report gpt-report
  # The gpu tests' settings (AdamW, fp32), which crashed there while the two above trained.
  step task init --model cnn --device cuda --determinism exact --optimizer adamw --precision fp32 \
    --epochs 2 --out cnn-adamw.json
  step train --task cnn-adamw.json --workdir cnn-adamw
  step verify --task cnn-adamw.json --workdir cnn-adamw --report cnn-adamw-report
} >"$RESULTS/cli.log" 2>&1
grep -iE '^(\+|rc )|verdict|accepted|rejected|inconclusive' "$RESULTS/cli.log" | head -n 40
tar -C "$W" -czf "$RESULTS/cuda_workdir.tar.gz" task.json work

# Plain output, not --json: each figure is printed as it is measured, so a run cut short by the
# timeout still returns the figures it reached.
timeout "${BENCH_TIMEOUT:-300}" "$BUILD/bench/bench_gpu" >"$RESULTS/bench_gpu.txt" 2>"$RESULTS/bench_gpu.err"
echo "gpu-check: bench_gpu rc $?"
cat "$RESULTS/bench_gpu.txt"
tail -n 5 "$RESULTS/bench_gpu.err"
