# bench_flood: the provider service under a connection flood and a delta flood, against an idle
# baseline measured in the same run (docs/benchmarks.md). It serves a real workdir, so it links
# the provider (and through it training/, which it only asks for a default task).
if(TARGET vt_provider)
  vt_bench(bench_flood SOURCES bench_flood.cpp LIBS vt_provider)
endif()
