# specd: `make demo` builds everything and runs a demo; `make test` runs all tests.
# Everything else (apt packages, llama.cpp) is installed by scripts/deps.sh on first use.
# GPU=cuda or GPU=vulkan: llama.cpp with that backend (deps/llama-$(GPU), built when its toolkit
# is there) and specd on it, in build-$(GPU); without GPU the CPU build, unchanged.
GPU ?=
ifeq ($(GPU),)
BUILD ?= build
CMAKE_FLAGS ?=
else
BUILD ?= build-$(GPU)
CMAKE_FLAGS ?= -DLLAMA_CPP_DIR=$(CURDIR)/deps/llama-$(GPU)/install
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

BENCH_MODELS ?= $(HOME)/.cache/specd-bench
BENCH_ARGS ?=

FUZZ_SECONDS ?= 60

.PHONY: all deps build demo test asan tsan fuzz bench bench-serve bench-deps bench-models gpu-bench clean

all: build

deps:
	@SPECD_GPU=$(GPU) scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

test: build
	@SPECD_GPU=$(GPU) scripts/deps.sh --test-tools
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS); rc=$$?; scripts/skipped_tests.py $(BUILD); exit $$rc

# Unit and engine tests under AddressSanitizer + UndefinedBehaviorSanitizer (our code).
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPECD_SANITIZE=address,undefined >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		ctest --test-dir build-asan --output-on-failure -j $(JOBS)

# The threaded parts under ThreadSanitizer: the JSON API (async poll and cancel from several
# threads, two servers side by side) and `specd serve` over HTTP (slots, the queue, disconnects,
# the stop with every slot busy, limits, the call lanes and a client's share, slot actions, bounded
# request fields). tests/tsan.supp: what TSan cannot see in llama.cpp's
# OpenMP threads. The first report stops the process (halt_on_error), and its test fails.
TSAN_TESTS = make_tiny_models|test_rpc|test_rpc_slots|test_servers|serve_curl|serve_llama_routes|serve_slots|serve_stop|serve_limits|serve_stalls|serve_parity|serve_bounds
tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSPECD_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target test_rpc test_rpc_slots test_servers make_tiny_model make_tiny_mmproj specd
	@TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp:halt_on_error=1 \
		ctest --test-dir build-tsan -R '^($(TSAN_TESTS))$$' --output-on-failure

# libFuzzer on the JSON-RPC dispatcher (tests/fuzz): FUZZ_SECONDS with no model, then as long
# with the tiny models. Our code with clang + ASan + UBSan + coverage; llama.cpp is the gcc build.
fuzz:
	@scripts/deps.sh --fuzz
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPECD_FUZZ=ON \
		-DSPECD_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_rpc fuzz_rpc_model make_tiny_model make_tiny_mmproj
	@ctest --test-dir build-fuzz -R make_tiny_models --output-on-failure >/dev/null
	@tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# llama.cpp's own tools (llama-completion, llama-speculative, llama-speculative-simple), gnuplot.
bench-deps:
	@SPECD_GPU=$(GPU) scripts/deps.sh --bench-tools

# The benchmark pair, grown from stories260K by ../shared/bench/make_pairs.sh (about a minute).
bench-models: deps
	@[ -s $(BENCH_MODELS)/target.gguf ] || ../shared/bench/make_pairs.sh deps/llama/src $(BENCH_MODELS)

# specd against llama.cpp's tools; the report goes to results/bench and docs/benchmarks.md.
# BENCH_ARGS=--quick for 3 prompts.
bench: build bench-deps bench-models
	@$(BUILD)/bin/specd bench --models $(BENCH_MODELS) --prompts ../shared/bench/prompts.txt \
		--out results/bench $(if $(GPU),--llama-bin deps/llama-$(GPU)/build-lib/bin -ngl 99 -ngld 99) $(BENCH_ARGS)
	@mkdir -p docs/bench && cp results/bench/*.png docs/bench/ 2>/dev/null || true
	@sed 's|](g\([0-9]*\)-|](bench/g\1-|g' results/bench/benchmarks.md > docs/benchmarks.md
	@echo "bench: docs/benchmarks.md updated"

# specd serve against llama-server with concurrent clients, on both pairs.
bench-serve: build bench-deps bench-models
	@$(BUILD)/bin/specd bench --serve --models $(BENCH_MODELS) --out results/bench-serve $(BENCH_ARGS)
	@$(BUILD)/bin/specd bench --serve --models $(BENCH_MODELS) --target target-f32.gguf \
		--out results/bench-serve-f32 $(BENCH_ARGS)

# On a machine with an NVIDIA GPU: the CUDA build, the tests on it and the benchmark of both pairs
# with every layer on the GPU, in one command (docs/benchmarks-gpu.md). GPU_BENCH_ARGS="--heads
# --minutes 13" adds the drafting heads on real-shaped models.
gpu-bench:
	@scripts/gpu_bench.sh $(GPU_BENCH_ARGS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-cuda build-vulkan
