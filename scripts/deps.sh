#!/usr/bin/env bash
# Install what specd needs to build, on Debian 12 with only apt and npm reachable.
#
#   scripts/deps.sh [--bench-tools | --fuzz | --test-tools]
#
# 1. apt packages we build and test with (only those missing; needs root or sudo).
# 2. llama.cpp: the exact release node-llama-cpp@3.22.1 builds from (llama.cpp 0.5.0), taken
#    from that npm package's git bundle, built once (libllama + ggml CPU backend, static, PIC,
#    Release, native CPU) and installed into deps/llama/install. Later runs find it and exit.
#    Its common library (Jinja chat templates, tool-call parsers) is built with it and copied
#    there too (lib/libllama-common*.a, include/llama-common/); an install without it gets it
#    once, incrementally.
#    llama-simple (llama.cpp's greedy reference) is built beside it for the tests, and
#    llama.cpp's rpc-server (its distributed backend is built in: GGML_RPC=ON, for --rpc).
#    An install from before GGML_RPC was on is rebuilt once (incrementally, in the same build
#    directory).
#    SPECD_GPU=cuda or SPECD_GPU=vulkan (make GPU=...) builds llama.cpp with that backend
#    instead, into deps/llama-cuda or deps/llama-vulkan (the CPU build stays as it is), when the
#    toolkit is there (nvcc; the Vulkan headers, loader and glslc); else it says what is missing.
#    --bench-tools also builds llama.cpp's own tools (llama-completion, llama-speculative,
#    llama-speculative-simple, llama-server) into deps/llama/build-tools/bin for comparisons; on a
#    GPU build into deps/llama-GPU/build-lib/bin, from the library's own build tree, so that the
#    backend's kernels (minutes of nvcc) are compiled once.
#    --test-tools also installs what only some tests need (chromium for the page's browser test),
#    going on without it when it cannot (those tests then skip, saying why).
#    --fuzz also installs clang, its sanitizer and libFuzzer runtimes and OpenMP for clang
#    (`make fuzz`; llama.cpp itself stays the gcc build above).
#
# A llama.cpp you already have: set LLAMA_CPP_DIR to its source tree (we build it the same way)
# or to an install prefix holding lib/cmake/llama (we use it as is); see docs/build.md.
# SPECD_LLAMA_CMAKE_ARGS: more cmake arguments for llama.cpp's builds, space-separated (e.g.
# -DGGML_CUDA_FA_ALL_QUANTS=ON).
# SPECD_NO_APT=1: never call apt-get (a machine with no package registry, the packages installed
# some other way); missing packages are named and the build goes on.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
gpu=${SPECD_GPU:-}
deps=$root/deps/llama${gpu:+-$gpu}
src_default=$root/deps/llama/src
npm_pkg=node-llama-cpp@3.22.1
apt_pkgs=(cmake make gcc g++ git pkg-config libjansson-dev libcmocka-dev libmicrohttpd-dev
          curl python3 python3-numpy)
jobs=$(nproc 2>/dev/null || echo 2)
# Native CPU build, but without AMX: some virtual machines report AMX in cpuid while the kernel
# refuses its tile state, and ggml's AMX kernels then die with SIGILL (seen on our CI machines).
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cpu_flags=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
# llama.cpp's RPC backend (ggml-rpc: two source files, a backend with no device until --rpc
# names a server): on in every build, so `--rpc` works without a rebuild.
backend_flags=(-DGGML_RPC=ON)
# shellcheck disable=SC2206
[ -n "${SPECD_LLAMA_CMAKE_ARGS:-}" ] && backend_flags+=(${SPECD_LLAMA_CMAKE_ARGS})

log() { printf 'deps: %s\n' "$*" >&2; }

install_apt_packages() {
  local missing=()
  for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # npm may come from outside Debian (nodesource): only ask apt for it when there is none at all.
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -n "${SPECD_NO_APT:-}" ]; then
    log "SPECD_NO_APT: not installing ${missing[*]} (the build needs them, or their files, some other way)"
    return 0
  fi
  log "installing apt packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Fetch the llama.cpp source tree from the npm package's git bundle into deps/llama/src (one
# source tree for the CPU and the GPU builds).
fetch_llama_source() {
  [ -f "$src_default/include/llama.h" ] && return 0
  log "fetching llama.cpp from $npm_pkg (npm pack)"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$npm_pkg" >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama)
  rm -rf "$src_default"
  mkdir -p "$(dirname "$src_default")"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$src_default"
  cp "$tmp/package/llama/llama.cpp.info.json" "$src_default/.specd-release.json"
  rm -rf "$tmp"
}

# SPECD_GPU: the backend's cmake flag, once its toolkit is found; exits naming what is missing.
check_gpu_toolkit() {
  local missing=()
  case "$gpu" in
    cuda)
      if ! command -v nvcc >/dev/null 2>&1; then
        if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH
        else missing+=("nvcc (the CUDA toolkit: Debian's nvidia-cuda-toolkit or NVIDIA's cuda-toolkit)"); fi
      fi
      # NCCL (collectives between GPUs) only serves several GPUs, and ggml's CMake package does not
      # name it for the programs that link the static backend: off, unless asked for
      # (SPECD_LLAMA_CMAKE_ARGS=-DGGML_CUDA_NCCL=ON).
      backend_flags=(-DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF "${backend_flags[@]}")
      # GGML_NATIVE (on, for the CPU) makes ggml build CUDA code for the GPUs it sees; with none
      # visible (a build machine) that fails: then the architectures ggml would pick for a
      # portable build, or SPECD_CUDA_ARCHS (e.g. "89-real" for one card).
      if [ -n "${SPECD_CUDA_ARCHS:-}" ]; then
        backend_flags+=("-DCMAKE_CUDA_ARCHITECTURES=$SPECD_CUDA_ARCHS")
      elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        log "no NVIDIA GPU visible: building CUDA code for 75-virtual;80-virtual;86-real;89-real;90-virtual (SPECD_CUDA_ARCHS overrides)"
        backend_flags+=("-DCMAKE_CUDA_ARCHITECTURES=75-virtual;80-virtual;86-real;89-real;90-virtual")
      fi ;;
    vulkan)
      [ -f /usr/include/vulkan/vulkan.h ] || missing+=("the Vulkan headers (apt install libvulkan-dev)")
      pkg-config --exists vulkan 2>/dev/null || missing+=("the Vulkan loader (apt install libvulkan-dev)")
      command -v glslc >/dev/null 2>&1 || missing+=("glslc, the shader compiler (apt install glslc)")
      backend_flags+=(-DGGML_VULKAN=ON) ;;
    *) log "GPU=$gpu: unknown backend; use GPU=cuda or GPU=vulkan"; exit 2 ;;
  esac
  if [ ${#missing[@]} -gt 0 ]; then
    log "GPU=$gpu cannot build llama.cpp's $gpu backend; missing:"
    for m in "${missing[@]}"; do log "  - $m"; done
    log "install them and run again (the CPU build, plain make, needs none of this)"
    exit 2
  fi
}

# What a program linking the static GPU backend needs besides it (ggml's CMake package names the
# CUDA libraries only for GGML_STATIC builds): the CUDA runtime, cuBLAS and the driver.
gpu_link_flags() {
  case "$gpu" in
    cuda)
      local cuda nccl=""
      cuda=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
      # a backend built with NCCL (an install of the user's own) needs it on the link line too
      # (grep reads all of nm's output: -q would close the pipe early, and pipefail fail the test)
      if nm "$deps/install/lib/libggml-cuda.a" 2>/dev/null | grep ' U ncclCommInitAll' >/dev/null; then nccl="-L$cuda/lib -lnccl"; fi
      echo "-lggml-cuda -L$cuda/lib64 -L$cuda/lib64/stubs $nccl -lcublas -lcublasLt -lcudart -lcuda" ;;
    vulkan) echo "-lggml-vulkan -lvulkan" ;;
  esac
}

# ggml's RPC backend built with RDMA (where the machine has libibverbs) needs it on a link line too.
rdma_link_flags() {
  if nm "$deps/install/lib/libggml-rpc.a" 2>/dev/null | grep ' U ibv_' >/dev/null; then echo "-libverbs"; fi
}

# The library: libllama + ggml (CPU backend only), static and position-independent so it links
# into both libspecd.so and the specd program; with it llama.cpp's common library (its Jinja chat
# templates and tool-call parsers, for src/engine/chat_jinja.cpp), put beside it by
# install_llama_common.
build_llama_library() {
  local src=$1
  if [ -f "$deps/install/lib/cmake/llama/llama-config.cmake" ]; then
    if [ ! -f "$deps/install/lib/libggml-rpc.a" ]; then
      log "rebuilding llama.cpp with its RPC backend (GGML_RPC=ON, for --rpc; once)"
      rm -f "$deps/install/bin/llama-simple" # linked without ggml-rpc
    elif [ ! -f "$deps/install/lib/libllama-common.a" ] || [ ! -f "$deps/install/include/llama-common/chat.h" ]; then
      log "building llama.cpp's common library too (Jinja chat templates, tool calls; once)"
    else
      return 0
    fi
  fi
  log "building libllama + ggml ${gpu:-CPU} backend (a few minutes on 2 cores)"
  cmake -S "$src" -B "$deps/build-lib" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${cpu_flags[@]}" "${backend_flags[@]}" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMON=ON \
    -DLLAMA_OPENSSL=OFF -DCMAKE_INSTALL_PREFIX="$deps/install" >/dev/null
  cmake --build "$deps/build-lib" -j "$jobs"
  cmake --install "$deps/build-lib" >/dev/null
  install_llama_common "$src"
}

# llama.cpp does not install its common library: its two archives go into lib/ and its headers
# (with their jinja/ folder) into include/llama-common/, where CMakeLists.txt looks for them.
install_llama_common() {
  local src=$1 inc=$deps/install/include/llama-common
  cp "$deps/build-lib/common/libllama-common.a" "$deps/build-lib/common/libllama-common-base.a" "$deps/install/lib/"
  rm -rf "$inc"
  mkdir -p "$inc"
  (cd "$src/common" && find . \( -name '*.h' -o -name '*.hpp' \) -exec cp --parents {} "$inc/" \;)
}

# llama-simple (llama.cpp's minimal greedy generator, one file on llama.h): the reference our
# tests compare `specd run --spec none` against. Built on the library above, so it is cheap.
build_llama_simple() {
  local src=$1 out=$deps/install/bin/llama-simple
  [ -x "$out" ] && return 0
  mkdir -p "$deps/install/bin"
  g++ -std=c++17 -O2 -I"$deps/install/include" "$src/examples/simple/simple.cpp" -o "$out" \
    -L"$deps/install/lib" -lllama -lggml -lggml-rpc $(rdma_link_flags) $(gpu_link_flags) -lggml-cpu -lggml-base -fopenmp -lpthread -lm
}

# llama.cpp's rpc-server (tools/rpc, one file on ggml's public headers): what holds a target's
# layers on another machine (--rpc), and what the RPC test starts twice on 127.0.0.1.
build_rpc_server() {
  local src=$1 out=$deps/install/bin/rpc-server
  [ -x "$out" ] && return 0
  mkdir -p "$deps/install/bin"
  g++ -std=c++17 -O2 -I"$deps/install/include" "$src/tools/rpc/rpc-server.cpp" -o "$out" \
    -L"$deps/install/lib" -lggml -lggml-rpc $(rdma_link_flags) $(gpu_link_flags) -lggml-cpu -lggml-base -fopenmp -lpthread -lm
}

# llama.cpp's own tools, for benchmarks only (they need llama.cpp's C++ common library). On the
# CPU in a tree of their own; on a GPU in the library's tree, configured again with the tools on:
# the backend's objects are kept, and its kernels take minutes of nvcc per build.
build_llama_tools() {
  local src=$1 want=(llama-completion llama-speculative llama-speculative-simple llama-server) t missing=()
  local tree=$deps/build-tools
  [ -n "$gpu" ] && tree=$deps/build-lib
  for t in "${want[@]}"; do [ -x "$tree/bin/$t" ] || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "building llama.cpp tools: ${missing[*]}"
  cmake -S "$src" -B "$tree" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    "${cpu_flags[@]}" "${backend_flags[@]}" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_COMMON=ON -DLLAMA_OPENSSL=OFF >/dev/null
  cmake --build "$tree" -j "$jobs" --target "${missing[@]}"
}

# What only some tests need (make test runs this): Debian's chromium for the chat page's browser
# test. Optional: when it cannot be installed the test skips, saying so, and make test goes on.
install_test_tools() {
  command -v chromium >/dev/null 2>&1 && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  log "installing chromium (headless browser for the chat page's test)"
  if ! { $sudo apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
    log "chromium could not be installed: the page test (serve_page) will skip"
  fi
  return 0
}

main() {
  [ "${1:-}" = --bench-tools ] && apt_pkgs+=(gnuplot-nox)
  # clang 14 (Debian 12): -fsanitize=fuzzer needs libclang-rt-14-dev; ggml's CMake package asks
  # for OpenMP, which clang finds only with libomp-dev.
  [ "${1:-}" = --fuzz ] && apt_pkgs+=(clang libclang-rt-14-dev libomp-dev)
  install_apt_packages
  [ -n "$gpu" ] && check_gpu_toolkit
  [ "${1:-}" = --test-tools ] && install_test_tools
  local src
  if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -d "$LLAMA_CPP_DIR/lib/cmake/llama" ]; then
    log "using installed llama.cpp at $LLAMA_CPP_DIR"
    [ "${1:-}" = --bench-tools ] && log "note: --bench-tools needs a source tree, not an install prefix"
    return 0
  fi
  if [ -n "${LLAMA_CPP_DIR:-}" ]; then
    [ -f "$LLAMA_CPP_DIR/include/llama.h" ] || { log "LLAMA_CPP_DIR=$LLAMA_CPP_DIR is neither a llama.cpp source tree nor an install prefix"; exit 2; }
    src=$LLAMA_CPP_DIR
  else
    fetch_llama_source
    src=$src_default
  fi
  build_llama_library "$src"
  build_llama_simple "$src"
  build_rpc_server "$src"
  [ "${1:-}" = --bench-tools ] && build_llama_tools "$src"
  return 0
}

main "$@"
