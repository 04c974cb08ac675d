# bench_distributed: the gradient-group tree all-reduce against c10d Gloo's allreduce on 10M
# floats, and a W = 2 training step against W = 1 (docs/benchmarks.md).
if(TARGET vt_training)
  vt_bench(bench_distributed SOURCES bench_distributed.cpp LIBS vt_training)
endif()
