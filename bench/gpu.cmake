# bench_gpu: what verification costs on CUDA (or, without CUDA, the same keys on CPU with smaller
# models); scripts/gpu-build.sh runs it on the CUDA machine (docs/benchmarks.md).
if(TARGET vt_verifier)
  vt_bench(bench_gpu SOURCES bench_gpu.cpp LIBS vt_verifier vt_provider vt_training)
endif()
