# bench_compression: container ratios and throughput against plain zstd-3 and xz-6 (docs/benchmarks.md).
if(TARGET vt_compression)
  vt_bench(bench_compression SOURCES bench_compression.cpp LIBS vt_compression PkgConfig::ZSTD PkgConfig::LZMA)
endif()
