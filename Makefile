# The two commands a newcomer needs: `make demo` and `make test` (README.md).
# Every target sets up its own dependencies first, so each works on a fresh Debian 12 machine.

BUILD       ?= build
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup configure build demo test lint lint-changed bench sanitize format clean

setup:
	@echo "== setup: Debian packages"
	@bash scripts/setup.sh

configure: setup
	@echo "== configure: $(BUILD) (Release)"
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_TESTS=ON $(CMAKE_FLAGS) >/dev/null

build: configure
	@echo "== build: $(JOBS) jobs"
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@echo "== demo: veritrain demo"
	@$(BUILD)/cli/veritrain demo

test: build lint-changed
	@echo "== test: ctest (labels unit, integration, slow, gpu; gpu skips without CUDA)"
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# clang-format (.clang-format) over every tracked C++ file, then clang-tidy with .clang-tidy's
# checks, warnings as errors. `make lint` reads every source file
# (minutes: the LibTorch files are slow to parse); `make test` runs it over the files changed
# relative to the merge base with $(LINT_BASE), which is none on a clean clone of main.
LINT_BASE ?= main
lint: configure
	@echo "== lint: clang-tidy, every file"
	@bash scripts/lint.sh $(BUILD) --all

lint-changed: configure
	@echo "== lint: clang-format, every file; clang-tidy, files changed since the merge base with $(LINT_BASE)"
	@bash scripts/check_format.sh
	@LINT_BASE=$(LINT_BASE) bash scripts/lint.sh $(BUILD)

bench: setup
	@cmake -S . -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_BENCH=ON -DVT_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD)-bench -j $(JOBS)
	@# bench_portable's peer: LibTorch on OpenBLAS, loaded for that bench alone.
	@VT_OPENBLAS_DIR=$$(bash scripts/openblas_for_bench.sh $(BUILD)-bench/openblas) && export VT_OPENBLAS_DIR && \
	  for b in $(BUILD)-bench/bench/bench_*; do echo "== $$b"; $$b || exit 1; done
	@echo "== bench/script_executor.py"; /usr/bin/python3 bench/script_executor.py

# Debug (asserts on) at -O1 with line tables only: at -O0 the portable kernels ran the tests'
# training runs several times slower (88 of the 2 h 24 min the run took on 2 cores), and full
# debug information only slowed the compiles; -O1 is what the sanitizers' own docs advise.
sanitize: setup
	@echo "== sanitize: ASan + UBSan build and tests"
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
	  -DVT_SANITIZE="address;undefined" >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	@cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS) -LE slow --timeout 1800

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-bench $(BUILD)-asan

# libFuzzer targets (tests/fuzz/, docs/reliability.md): a clang build with ASan + UBSan in
# $(BUILD)-fuzz, then each fuzzer for FUZZ_SECONDS on its seed corpus. New inputs go to
# $(BUILD)-fuzz/corpus/<name>, crashes to $(BUILD)-fuzz/crash-<name>-*; the checked-in seeds
# are only read. Any crash fails the target.
FUZZ_SECONDS ?= 60
FUZZERS      ?= container frame safetensors log_record task evidence json task_sizes
.PHONY: fuzz
fuzz:
	@bash scripts/setup.sh --fuzz
	@echo "== fuzz: clang, libFuzzer, ASan + UBSan; $(FUZZ_SECONDS) s per target"
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVT_BUILD_TESTS=ON \
	  -DVT_BUILD_FUZZ=ON -DVT_SANITIZE="address;undefined" >/dev/null
	@cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZERS))
	@for f in $(FUZZERS); do \
	  bin=$$(find $(BUILD)-fuzz/tests -name fuzz_$$f -type f -perm -u+x | head -n 1); \
	  echo "== fuzz_$$f ($$bin)"; mkdir -p $(BUILD)-fuzz/corpus/$$f; \
	  $$bin -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/crash-$$f- \
	    $(BUILD)-fuzz/corpus/$$f tests/fuzz/corpus/$$f || exit 1; \
	done
