# bench_cli: start-up of the commands that neither train nor replay (`--help`, `task show`,
# `plan --cost`, `log verify`, `inspect`) against `--version`, which loads LibTorch.
if(TARGET veritrain)
  vt_bench(bench_cli SOURCES bench_cli.cpp LIBS vt_common)
  target_compile_definitions(bench_cli PRIVATE VT_BINARY="$<TARGET_FILE:veritrain>")
  add_dependencies(bench_cli veritrain)
endif()
