# specd: `make demo` builds everything and runs a demo; `make test` runs all tests.
# Everything else (apt packages, llama.cpp) is installed by scripts/deps.sh on first use.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

BENCH_MODELS ?= $(HOME)/.cache/specd-bench
BENCH_ARGS ?=

.PHONY: all deps build demo test asan tsan bench bench-deps bench-models clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Unit and engine tests under AddressSanitizer + UndefinedBehaviorSanitizer (our code).
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPECD_SANITIZE=address,undefined >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ctest --test-dir build-asan --output-on-failure -j $(JOBS)

# The JSON API's threads (async poll and cancel from several threads) under ThreadSanitizer.
tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSPECD_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target test_rpc make_tiny_model
	@ctest --test-dir build-tsan -R 'make_tiny_models|test_rpc' --output-on-failure

# llama.cpp's own tools (llama-completion, llama-speculative, llama-speculative-simple), gnuplot.
bench-deps:
	@scripts/deps.sh --bench-tools

# The benchmark pair, grown from stories260K by ../shared/bench/make_pairs.sh (about a minute).
bench-models: deps
	@[ -s $(BENCH_MODELS)/target.gguf ] || ../shared/bench/make_pairs.sh deps/llama/src $(BENCH_MODELS)

# specd against llama.cpp's tools; the report goes to results/bench and docs/benchmarks.md.
# BENCH_ARGS=--quick for 3 prompts.
bench: build bench-deps bench-models
	@$(BUILD)/bin/specd bench --models $(BENCH_MODELS) --prompts ../shared/bench/prompts.txt \
		--out results/bench $(BENCH_ARGS)
	@mkdir -p docs/bench && cp results/bench/*.png docs/bench/ 2>/dev/null || true
	@sed 's|](g\([0-9]*\)-|](bench/g\1-|g' results/bench/benchmarks.md > docs/benchmarks.md
	@echo "bench: docs/benchmarks.md updated"

clean:
	rm -rf $(BUILD) build-asan build-tsan
