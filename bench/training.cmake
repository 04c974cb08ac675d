# bench_training: steps/s, snapshot capture as a fraction of epoch time, replay vs training
# throughput for the cnn and gpt zoo models (docs/benchmarks.md). training/ keeps LibTorch
# private, so this links vt_training alone and never sees torch headers.
if(TARGET vt_training)
  vt_bench(bench_training SOURCES bench_training.cpp LIBS vt_training)
endif()
