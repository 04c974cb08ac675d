# bench_verify: `verify` wall time against the sum of its replay times, and the bytes an exact
# check fetches (docs/benchmarks.md). Its parallel replays run in the veritrain binary built here.
if(TARGET vt_verifier AND TARGET vt_provider AND TARGET veritrain)
  vt_bench(bench_verify SOURCES bench_verify.cpp LIBS vt_verifier vt_provider)
  target_compile_definitions(bench_verify PRIVATE VT_BINARY="$<TARGET_FILE:veritrain>")
  add_dependencies(bench_verify veritrain)
endif()
