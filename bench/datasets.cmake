# bench_datasets: a gpt on a 2 GiB memory-mapped tokens file vs synthetic tokens: peak RSS
# against the model state, samples/s ratio (docs/benchmarks.md, "Datasets").
if(TARGET vt_training)
  vt_bench(bench_datasets SOURCES bench_datasets.cpp LIBS vt_training)
endif()
