vt_bench(bench_fingerprint SOURCES bench_fingerprint.cpp LIBS vt_fingerprint)
