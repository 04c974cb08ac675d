# The two commands a newcomer needs: `make demo` and `make test` (README.md).
# Every target sets up its own dependencies first, so each works on a fresh Debian 12 machine.

BUILD       ?= build
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup configure build demo test bench sanitize format clean

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

test: build
	@echo "== test: ctest (labels unit, integration, slow, gpu; gpu skips without CUDA)"
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

bench: setup
	@cmake -S . -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DVT_BUILD_BENCH=ON -DVT_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD)-bench -j $(JOBS)
	@for b in $(BUILD)-bench/bench/bench_*; do echo "== $$b"; $$b || exit 1; done

sanitize: setup
	@echo "== sanitize: ASan + UBSan build and tests"
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DVT_SANITIZE="address;undefined" >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	@cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS) -LE slow --timeout 1800

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-bench $(BUILD)-asan
