# bench_dispute: what settling a dispute by one operator costs (docs/dispute.md): evidence bytes
# against one committed state, the referee's time (and the numpy referee's), the auditor's extra
# work in step replays, and what a trace costs when off and on; zoo gpt and cnn at their defaults.
if(TARGET vt_verifier AND TARGET vt_dispute)
  vt_bench(bench_dispute SOURCES bench_dispute.cpp LIBS vt_verifier vt_dispute)
  target_compile_definitions(bench_dispute PRIVATE VT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
