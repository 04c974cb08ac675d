# bench_scale: peak memory of `train` and of one replay against plain PyTorch training of the same
# gpt (bench/plain_gpt.py, a child process), the estimate's error, the step time against the
# same peer on OpenBLAS and the commitments' share of an epoch (docs/benchmarks.md, "Scale").
# Not a ctest: at GPT-2 sizes it takes minutes.
if(TARGET veritrain)
  vt_bench(bench_scale SOURCES bench_scale.cpp LIBS vt_common)
  target_compile_definitions(bench_scale PRIVATE VT_BINARY="$<TARGET_FILE:veritrain>"
                                                 VT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(bench_scale veritrain)
endif()
