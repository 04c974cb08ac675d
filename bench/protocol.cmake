vt_bench(bench_protocol SOURCES bench_protocol.cpp LIBS vt_protocol_net)
