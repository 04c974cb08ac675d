# bench_portable: the portable GEMM against LibTorch's mm, and a portable training step against
# the exact-mode (LibTorch) step of the same task, one thread, in one run (docs/portable.md);
# the zoo's models and two scripted ones (scripts/make_digits.py writes their data); the
# OpenBLAS peer with --openblas (scripts/openblas_for_bench.sh).
if(TARGET vt_training AND TARGET vt_kernels)
  vt_bench(bench_portable SOURCES bench_portable.cpp LIBS vt_training vt_kernels ${TORCH_LIBRARIES})
  target_include_directories(bench_portable SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
  target_compile_definitions(bench_portable PRIVATE VT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  vt_torch_sources(bench_portable.cpp)
endif()
