# bench_provider: epoch time with commitments and storage on vs off, one run, same task
# (docs/benchmarks.md). No torch headers: the provider reaches training/ through its API.
if(TARGET vt_provider)
  vt_bench(bench_provider SOURCES bench_provider.cpp LIBS vt_provider)
endif()
