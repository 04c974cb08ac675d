# bench_portable: the portable GEMM against LibTorch's mm, and a portable training step against
# the exact-mode (LibTorch) step of the same task, one thread, in one run (docs/portable.md).
if(TARGET vt_training AND TARGET vt_kernels)
  vt_bench(bench_portable SOURCES bench_portable.cpp LIBS vt_training vt_kernels ${TORCH_LIBRARIES})
  target_include_directories(bench_portable SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
endif()
