#!/usr/bin/env bash
# One command on a machine with an NVIDIA GPU: the CUDA build, the test suite on it, and specd
# against llama.cpp's own tools on both benchmark pairs with every layer on the GPU. Meant to fit
# in 9 minutes on a 16-core machine; writes docs/benchmarks-gpu.md.
#
#   scripts/gpu_bench.sh [--minutes N] [--models DIR] [--prompts FILE] [--out DIR] [--report FILE]
#                        [--no-tests] [--threads N] [--heads] [--big] [--big-easy] [--serve]
#   scripts/gpu_bench.sh --report-from DIR [--report FILE]
#
# Steps (each one's wall time goes into the report):
#   1. `make GPU=cuda` pieces: scripts/deps.sh builds llama.cpp with CUDA for this machine's GPU
#      only (GGML_NATIVE), then llama.cpp's tools in the same tree (the kernels are compiled once);
#      specd is built on it into build-cuda.
#   2. the test suite (ctest) on build-cuda: the tests that assert bit-for-bit output run with the
#      GPU hidden (GPU kernels are not batch-invariant; tests/CMakeLists.txt), cli_gpu on the GPU.
#   3. the benchmark pairs (../shared/bench: target.gguf, target-f32.gguf, draft.gguf), grown in the
#      background while 1 builds, when the models folder lacks them.
#   4. specd bench on both pairs, -ngl 99 -ngld 99 for specd and llama.cpp's tools alike; as many
#      prompts as the time left allows (3, 2 or 1). The report carries each target's pass costs.
#   4b. where the time goes (about 50 s): target.gguf, one prompt, 256 tokens at temperature 0:
#      llama-completion, llama-speculative (draft 3) and specd (off, fixed 3 and 6, the default's
#      held lengths and the planner, --draft-hold off), each with CUDA graphs and without (GGML_CUDA_DISABLE_GRAPHS=1),
#      specd with SPECD_LLAMA_PERF=1 (llama.cpp's graph reuses per context): on a GPU a small model's speed is decided by whether its passes
#      keep one shape, so that CUDA graphs replay (docs/benchmarks-gpu.md).
#   5. with --heads: the drafting heads (MTP, EAGLE-3, DFlash, DSpark) on real-shaped models that
#      make_tiny_model writes (hidden 2048, 16 layers; its small vocabulary), specd bench --head each
#      against llama-speculative-simple with the same head, one prompt at temperature 0. Step 4
#      leaves it 4 minutes (give --minutes 13 so that 4 keeps its 3 prompts).
#   --big: a third pair in the shape where a GPU gains from speculation: target-big.gguf (F16,
#      stories260K grown to dim 4096, 32 layers, 4.4B parameters, 8.8 GB; grown in step 3, about two
#      minutes) with the same draft, whose token should cost about a sixth of a target pass there
#      (0.4 with the two pairs above, which are small for an H200: with them no speculation won,
#      docs/benchmarks-gpu.md). Steps 4 and 4b run on target-big.gguf alone: its loads take
#      seconds each, and 9 minutes hold the build, 4b and one pair's bench.
#   --big-easy: with --big, a fourth: target-big-easy.gguf, the same shape grown with the easy CPU
#      pair's --eps 0.10 (the draft accepted 32% at draft 6 on target-big.gguf, where the Q8 pair
#      accepts 72% at draft 3: little room for speculation), benched beside target-big.gguf (step
#      4's time split between them; give --minutes 13).
#   --serve: after step 4, specd bench --serve on the pair it benched (the big one with --big, else
#      target.gguf): specd serve against llama-server with and without the draft, 1, 4 and 8 clients
#      at temperature 0, 2 requests each, -np 4, -ngl 99 -ngld 99 for every server; step 4 leaves it
#      90 s (1 and 4 clients took 23 s on an H200 with the big pair: 6 server starts).
# --report-from DIR writes the report from an earlier run's DIR (its logs and bench/benchmarks.md)
# and needs no GPU: that is how the report's shape is tested on CPU-only machines.
# Exit codes: 0 done (a failed test is in the report, not the exit code), 2 bad arguments, no GPU,
# or (SPECD_NO_APT, a machine without a package registry) what specd's build needs is missing,
# 1 a build or a benchmark (the pairs' or the heads') failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
minutes=9
models=${HOME:-/tmp}/.cache/specd-bench
shared=${SPECD_SHARED:-$root/../shared}
prompts=""
out=$root/results/gpu
report=$root/docs/benchmarks-gpu.md
report_from=""
run_tests=1
heads=0
big=0
big_easy=0
serve=0
threads=""
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS

usage() { # the comment block at the top of this file
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

die() { # code message...
  local code=$1
  shift
  printf 'gpu_bench: %s\n' "$*" >&2
  exit "$code"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die 2 "--minutes takes a whole number of minutes >= 1"
               minutes=$2; shift ;;
    --models) [ $# -ge 2 ] || die 2 "--models takes a folder"; models=$2; shift ;;
    --prompts) [ $# -ge 2 ] || die 2 "--prompts takes a file"; prompts=$2; shift ;;
    --out) [ $# -ge 2 ] || die 2 "--out takes a folder"; out=$2; shift ;;
    --report) [ $# -ge 2 ] || die 2 "--report takes a file"; report=$2; shift ;;
    --report-from) [ $# -ge 2 ] || die 2 "--report-from takes the folder of an earlier run"; report_from=$2; shift ;;
    --threads) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die 2 "--threads takes a number >= 1"
               threads=$2; shift ;;
    --no-tests) run_tests=0 ;;
    --heads) heads=1 ;;
    --big) big=1 ;;
    --big-easy) big=1; big_easy=1 ;;
    --serve) serve=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die 2 "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ -n "$prompts" ] || prompts=$shared/bench/prompts.txt
budget=$((minutes * 60))
# the seconds step 4 leaves to step 5: making the heads' models (about 8 GB of F32 weights) and 4
# heads x 6 configurations, each run loading its target (measured nowhere yet: a first estimate)
heads_reserve=0
[ "$heads" = 1 ] && heads_reserve=240
# what step 4 leaves to step 4c: 150 s, as first guessed, left a fresh machine (its CUDA build 316 s)
# too little for one prompt of the big pair's bench, whose timeout then lost the whole report
serve_reserve=0
[ "$serve" = 1 ] && serve_reserve=90
heads_reserve=$((heads_reserve + serve_reserve)) # what step 4 leaves to the steps after it
elapsed() { echo $((SECONDS - start)); }
left() { echo $((budget - (SECONDS - start))); }
note() { printf 'gpu_bench: [%4d s] %s\n' "$(elapsed)" "$*" >&2; }

# The report: the machine, each step's time and outcome, then specd bench's tables (which carry
# the pass costs). Reads only what the run left in $1, so it works without a GPU.
write_report() {
  local dir=$1 file=$2
  [ -f "$dir/steps.tsv" ] || die 2 "no run in '$dir' (its steps.tsv is missing)"
  mkdir -p "$(dirname "$file")" || die 1 "cannot make the folder of '$file'"
  local diag_target="" pairs_benched="both benchmark pairs"
  [ -s "$dir/diagnosis.txt" ] && diag_target=$(sed -n 's/^target: //p' "$dir/diagnosis.txt" | head -1)
  [ "$diag_target" = target-big.gguf ] && pairs_benched="the big pair (--big: target-big.gguf and draft.gguf)"
  {
    echo "# specd on a GPU"
    echo
    echo "Written by \`scripts/gpu_bench.sh\` (one command: the CUDA build, the tests on it, and \`specd bench\`"
    echo "on $pairs_benched with every layer on the GPU, \`-ngl 99 -ngld 99\` for specd and llama.cpp's"
    echo "tools alike). Pass costs (\`tools/pass_costs --short\`) are printed with each pair's tables."
    echo
    [ -f "$dir/gpu.txt" ] && echo "GPU: $(head -1 "$dir/gpu.txt")."
    [ -f "$dir/started.txt" ] && echo "Run: $(cat "$dir/started.txt")."
    echo
    echo "| step | wall s | outcome |"
    echo "|---|---|---|"
    while IFS=$'\t' read -r step secs outcome; do
      echo "| $step | $secs | $outcome |"
    done <"$dir/steps.tsv"
    echo
    if [ -s "$dir/tests-failed.txt" ]; then
      echo "Tests that failed on the GPU:"
      echo
      sed 's/^/- /' "$dir/tests-failed.txt"
      echo
    fi
    if [ -f "$dir/bench/benchmarks.md" ]; then
      # the bench report without its own title; its plots are not kept
      sed -e '1{/^# /d}' -e '/^!\[/d' -e '/^(Plots skipped/d' "$dir/bench/benchmarks.md"
    else
      echo "No benchmark report: the benchmark did not run (see the steps above)."
    fi
    if [ -s "$dir/diagnosis.txt" ]; then
      echo
      echo "## Where the time goes (step 4b: ${diag_target:-target.gguf}, one prompt, 256 tokens, temperature 0)"
      echo
      echo "tokens/s with CUDA graphs and (not with --big) without (GGML_CUDA_DISABLE_GRAPHS=1); specd's lines add llama.cpp's"
      echo "counters per context (SPECD_LLAMA_PERF=1): how often each reused its graph."
      echo
      echo '```'
      grep -v '^target: ' "$dir/diagnosis.txt"
      echo '```'
    fi
    if [ -f "$dir/serve/serve.md" ]; then
      echo
      echo "## Serving (--serve: specd serve against llama-server, every layer on the GPU)"
      echo
      sed -e '/^!\[/d' -e '/^(No plot/d' "$dir/serve/serve.md"
    fi
    if [ -f "$dir/heads/benchmarks.md" ]; then
      echo
      echo "## Drafting heads (real-shaped models from make_tiny_model, --heads)"
      sed -e '1{/^# /d}' -e '/^!\[/d' -e '/^(Plots skipped/d' "$dir/heads/benchmarks.md"
    fi
  } >"$file.tmp" && mv "$file.tmp" "$file" || die 1 "cannot write '$file'"
  note "report: $file"
}

if [ -n "$report_from" ]; then
  write_report "$report_from" "$report"
  exit 0
fi

command -v nvidia-smi >/dev/null 2>&1 && gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ -n "${gpu_name:-}" ] || die 2 "no NVIDIA GPU visible (nvidia-smi lists none): this script measures specd on a GPU; on the CPU use make test and make bench"
# What specd's own build asks pkg-config for. deps.sh installs them with apt; where it may not
# (SPECD_NO_APT), say so now, not after the minutes of llama.cpp's CUDA build (a bare GPU machine
# once built llama.cpp for 316 s and then stopped at specd's configure, libmicrohttpd missing).
missing_build_packages() {
  local p missing=()
  for p in jansson libmicrohttpd cmocka; do
    pkg-config --exists "$p" 2>/dev/null || missing+=("$p")
  done
  echo "${missing[*]}"
}
if [ -n "${SPECD_NO_APT:-}" ]; then
  missing=$(missing_build_packages)
  [ -z "$missing" ] || die 2 "specd's build needs $missing, which pkg-config does not find (with what they require)," \
    "and SPECD_NO_APT forbids installing them: apt install libjansson-dev libmicrohttpd-dev libcmocka-dev," \
    "or point PKG_CONFIG_PATH at their .pc files (scripts/gpu_offline.sh packs them for such a machine); nothing was built"
fi

rm -rf "$out" && mkdir -p "$out" || die 1 "cannot make '$out'"
echo "$gpu_name" >"$out/gpu.txt"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $jobs CPU cores, budget $minutes min" >"$out/started.txt"
: >"$out/steps.tsv"
step_done() { # name seconds outcome
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$out/steps.tsv"
  note "$1: $3 ($2 s)"
}
[ -n "$threads" ] || threads=$((jobs < 8 ? jobs : 8))

# 3. the pairs, in the background while the build runs: grow_model.py needs python3 with numpy.
pair_files=(target.gguf target-f32.gguf draft.gguf)
[ "$big" = 1 ] && pair_files=(target-big.gguf draft.gguf)
[ "$big_easy" = 1 ] && pair_files+=(target-big-easy.gguf)
grow_pairs() {
  local py=${SPECD_PYTHON:-python3} gguf_py=$root/deps/llama/src/gguf-py
  [ -d "${LLAMA_CPP_DIR:-}/gguf-py" ] && gguf_py=$LLAMA_CPP_DIR/gguf-py
  $py -c 'import numpy' 2>/dev/null || { echo "python3 has no numpy (apt-get install python3-numpy)"; return 1; }
  [ -f "$shared/bench/grow_model.py" ] || { echo "no $shared/bench/grow_model.py (SPECD_SHARED names the shared folder)"; return 1; }
  mkdir -p "$models"
  # the same settings as ../shared/bench/make_pairs.sh
  local -A spec=(
    [target.gguf]="--dim 1536 --layers 12 --ffn 6144 --heads 16 --eps 0.15 --seed 2 --q8 --name bench-target"
    [target-f32.gguf]="--dim 1536 --layers 12 --ffn 6144 --heads 16 --eps 0.15 --seed 2 --f32 --name bench-target-f32"
    [draft.gguf]="--dim 768 --layers 6 --ffn 3072 --heads 8 --eps 0 --seed 3 --q8 --name bench-draft"
    [target-big.gguf]="--dim 4096 --layers 32 --ffn 11008 --heads 32 --eps 0.12 --seed 4 --name bench-target-big"
    [target-big-easy.gguf]="--dim 4096 --layers 32 --ffn 11008 --heads 32 --eps 0.10 --seed 4 --name bench-target-big-easy")
  local f pids=() rc=0
  for f in "${pair_files[@]}"; do
    [ -s "$models/$f" ] && continue
    # shellcheck disable=SC2086
    ( $py "$shared/bench/grow_model.py" --gguf-py "$gguf_py" --base "$shared/models/stories260K.gguf" \
        --out "$models/$f.tmp" ${spec[$f]} >/dev/null && mv "$models/$f.tmp" "$models/$f" ) &
    pids+=($!)
  done
  for f in "${pids[@]}"; do wait "$f" || rc=1; done
  return $rc
}

# Steps 4b and 5 run these; every function is defined before the first step runs (a step
# that names one defined further down finds nothing: the first H100 run lost step 4b so).
# 4b. where the time goes: each tool's tokens/s with and without CUDA graphs, specd's graph reuses.
diagnose() { # models_dir prompt target
  local m=$1 prompt=$2 target=$3 bin=$root/deps/llama-cuda/build-lib/bin specd=$root/build-cuda/bin/specd graphs
  echo "target: $target"
  local common=(-m "$m/$target" -p "$prompt" -n 256 -c 1024 -t "$threads" --temp 0 --seed 42 --ignore-eos -ngl 99)
  local graph_runs="on off"
  # 8.8 GB a load: the big pair times CUDA graphs on alone (what graphs change was seen on the small pairs)
  [ "$target" = target-big.gguf ] && graph_runs=on
  for graphs in $graph_runs; do
    local env=()
    [ "$graphs" = off ] && env=(GGML_CUDA_DISABLE_GRAPHS=1)
    printf 'llama-completion, CUDA graphs %s: %s\n' "$graphs" "$(env "${env[@]}" "$bin/llama-completion" "${common[@]}" \
      -no-cnv 2>&1 | grep -o '[0-9.]* tokens per second' | tail -1)"
    printf 'llama-speculative draft 3, CUDA graphs %s: %s\n' "$graphs" "$(env "${env[@]}" "$bin/llama-speculative" \
      "${common[@]}" -md "$m/draft.gguf" -ngld 99 --spec-draft-n-max 3 2>&1 | grep -o 'speed: *[0-9.]* t/s' | tail -1)"
    local label args
    for label in "off:--spec none" "fixed 3:-md $m/draft.gguf -ngld 99 --draft-fixed --draft-max 3" \
                 "fixed 6:-md $m/draft.gguf -ngld 99 --draft-fixed --draft-max 6" \
                 "default (held lengths):-md $m/draft.gguf -ngld 99" \
                 "planner (--draft-hold off):-md $m/draft.gguf -ngld 99 --draft-hold off"; do
      # shellcheck disable=SC2086
      args=(${label#*:})
      printf 'specd %s, CUDA graphs %s: %s tokens/s; %s\n' "${label%%:*}" "$graphs" "$(env "${env[@]}" SPECD_LLAMA_PERF=1 \
        "$specd" run "${common[@]}" "${args[@]}" --calibration-cache off --json 2>"$out/diag-err.txt" |
        sed -n 's/.*"decode_tokens_per_s": *\([0-9.]*\).*/\1/p' | head -1)" \
        "$(grep 'llama.cpp counters' "$out/diag-err.txt" | sed 's/^specd: llama.cpp counters of the //' | tr '\n' ' ')"
    done
  done
}

# Step 4's timeout with $1 s left to it, and the prompts (3 at most, 1 at least) that fit in it at
# $2 s a prompt: a bench stopped by its timeout writes no report.
bench_timeout() { echo $(( $1 > 60 ? $1 - 15 : 45 )); }
prompts_that_fit() {
  local n=3 limit
  limit=$(bench_timeout "$1")
  while [ "$n" -gt 1 ] && [ $((n * $2)) -gt "$limit" ]; do n=$((n - 1)); done
  echo "$n"
}

# The heads' models for step 5 in $1: a target in the shapes of a small real model and its heads.
make_heads() {
  local dir=$1 make=$root/build-cuda/bin/make_tiny_model kind
  local shape=(--n-embd 2048 --n-ff 5632 --n-head 16 --n-head-kv 16)
  mkdir -p "$dir" || return 1
  "$make" --out "$dir/target.gguf" --seed 3 --n-layer 16 "${shape[@]}" --layer-scale 0.1 --logit-scale 4 || return 1
  "$make" --out "$dir/mtp-target.gguf" --arch glm4moe --seed 3 --n-layer 16 "${shape[@]}" --layer-scale 0.1 \
    --logit-scale 4 || return 1
  "$make" --out "$dir/eagle3.gguf" --arch eagle3 --target "$dir/target.gguf" --target-layers 2,8,14 --seed 5 \
    "${shape[@]}" --layer-scale 0.1 || return 1
  for kind in dflash dspark; do
    "$make" --out "$dir/$kind.gguf" --arch $kind --target "$dir/target.gguf" --target-layers 4,10 --seed 6 \
      --n-layer 2 "${shape[@]}" --block-size 16 || return 1
  done
}

# 3 starts before 1 where llama.cpp's gguf-py is already there (LLAMA_CPP_DIR, or an earlier
# deps.sh): growing target-big.gguf takes some two minutes of one core, hidden behind the build.
pairs_pid=""
start_pairs() {
  ( grow_pairs >"$out/pairs.log" 2>&1; echo $? >"$out/pairs.rc" ) &
  pairs_pid=$!
}
[ -d "${LLAMA_CPP_DIR:-/nonexistent}/gguf-py" ] || [ -d "$root/deps/llama/src/gguf-py" ] && start_pairs

# 1. the build
t=$SECONDS
export SPECD_GPU=cuda
if ! "$root/scripts/deps.sh" --bench-tools >"$out/build-llama.log" 2>&1; then
  step_done "llama.cpp CUDA build + tools" $((SECONDS - t)) "FAILED (tail of build-llama.log below)"
  tail -30 "$out/build-llama.log" >&2
  write_report "$out" "$report"
  exit 1
fi
step_done "llama.cpp CUDA build + tools" $((SECONDS - t)) "ok"
# the source tree is there now (gguf-py for the pairs), if it was not before
[ -n "$pairs_pid" ] || start_pairs
t=$SECONDS
llama_dir=$root/deps/llama-cuda/install
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if ! { cmake -S "$root" -B "$root/build-cuda" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CPP_DIR="$llama_dir" &&
       cmake --build "$root/build-cuda" -j "$jobs"; } >"$out/build-specd.log" 2>&1; then
  step_done "specd build (build-cuda)" $((SECONDS - t)) "FAILED (tail of build-specd.log below)"
  tail -30 "$out/build-specd.log" >&2
  write_report "$out" "$report"
  exit 1
fi
step_done "specd build (build-cuda)" $((SECONDS - t)) "ok"

# 2. the tests, bounded so that the benchmark keeps at least 3 minutes
if [ "$run_tests" = 1 ]; then
  t=$SECONDS
  limit=$(( $(left) - 180 ))
  [ "$limit" -gt 240 ] && limit=240
  if [ "$limit" -lt 30 ]; then
    step_done "tests (ctest on build-cuda)" 0 "not run: $(left) s left"
  else
    timeout "$limit" ctest --test-dir "$root/build-cuda" -j "$jobs" --timeout 150 --output-on-failure \
      >"$out/tests.log" 2>&1
    rc=$?
    grep -E '^[[:space:]]*[0-9]+ - ' "$out/tests.log" | grep -v '(Skipped)' | sed 's/^[[:space:]]*//' >"$out/tests-failed.txt"
    summary=$(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)
    [ $rc -eq 124 ] && summary="stopped after $limit s ($summary)"
    step_done "tests (ctest on build-cuda)" $((SECONDS - t)) "${summary:-rc $rc}"
  fi
fi

# 4. the benchmark
t=$SECONDS
wait "$pairs_pid"
if [ "$(cat "$out/pairs.rc" 2>/dev/null)" != 0 ]; then
  step_done "benchmark pairs" $((SECONDS - t)) "FAILED: $(tail -1 "$out/pairs.log")"
  write_report "$out" "$report"
  exit 1
fi
step_done "benchmark pairs (wait)" $((SECONDS - t)) "ok: ${pair_files[*]} in $models"
t=$SECONDS
diag_target=target.gguf diag_limit=90
[ "$big" = 1 ] && diag_target=target-big.gguf diag_limit=120 # 7 loads of 8.8 GB
if [ "$(left)" -gt $((heads_reserve + 200)) ]; then
  timeout $diag_limit bash -c "$(declare -f diagnose); out='$out' root='$root' threads='$threads'; diagnose '$models' \"\$1\" '$diag_target'" _ \
    "$(head -1 "$prompts")" >"$out/diagnosis.txt" 2>"$out/diagnosis.log"
  step_done "where the time goes (4b)" $((SECONDS - t)) "$(grep -c 'tokens' "$out/diagnosis.txt") lines"
else
  step_done "where the time goes (4b)" 0 "not run: $(left) s left"
fi
t=$SECONDS
# one prompt with llama.cpp's sweep and specd's three configurations costs about 50 s per pair
# and two temperatures on an H100-class machine (process start and model loads dominate)
bench_left=$(( $(left) - heads_reserve ))
pairs=(--pair "$models/target.gguf" "$models/draft.gguf" --pair "$models/target-f32.gguf" "$models/draft.gguf")
per_prompt=70 # seconds a prompt costs, both pairs
if [ "$big" = 1 ]; then
  pairs=(--pair "$models/target-big.gguf" "$models/draft.gguf")
  per_prompt=65 # 2026-11-27 on an H200: 2 prompts in 124 s, 3 in 193 (loads of 8.8 GB from the page cache)
  if [ "$big_easy" = 1 ]; then
    pairs+=(--pair "$models/target-big-easy.gguf" "$models/draft.gguf")
    per_prompt=130
  fi
fi
n_prompts=$(prompts_that_fit "$bench_left" "$per_prompt")
timeout "$(bench_timeout "$bench_left")" "$root/build-cuda/bin/specd" bench "${pairs[@]}" \
  --prompts "$prompts" --n-prompts "$n_prompts" --sweep 3,6,10 --temps 0,1 -t "$threads" \
  -ngl 99 -ngld 99 --llama-bin "$root/deps/llama-cuda/build-lib/bin" --out "$out/bench" >"$out/bench.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then step_done "specd bench, $n_prompts prompt(s)" $((SECONDS - t)) "ok"
else step_done "specd bench, $n_prompts prompt(s)" $((SECONDS - t)) "FAILED (rc $rc; bench.log)"; fi



# 4c. serving, with --serve: the pair step 4 benched, a few clients, every server on the GPU
if [ "$serve" = 1 ]; then
  t=$SECONDS
  serve_target=$models/target.gguf
  [ "$big" = 1 ] && serve_target=$models/target-big.gguf
  if [ "$(left)" -le $(( (heads_reserve - serve_reserve) + 30 )) ]; then
    step_done "serving (specd bench --serve)" 0 "not run: $(left) s left"
  else
    timeout $(( $(left) - (heads_reserve - serve_reserve) - 5 )) "$root/build-cuda/bin/specd" bench --serve \
      --pair "$serve_target" "$models/draft.gguf" --prompts "$prompts" --clients 1,4,8 --temps 0 --requests 2 \
      -np 4 -t "$threads" -ngl 99 -ngld 99 --llama-bin "$root/deps/llama-cuda/build-lib/bin" \
      --out "$out/serve" >"$out/serve.log" 2>&1
    src=$?
    if [ $src -eq 0 ]; then step_done "serving (specd bench --serve)" $((SECONDS - t)) "ok"
    else step_done "serving (specd bench --serve)" $((SECONDS - t)) "FAILED (rc $src; serve.log)"; rc=1; fi
  fi
fi

# 5. the heads: a target with its MTP layer and a target with EAGLE-3, DFlash and DSpark heads, in
# the shapes of a small real model (its next token depends mostly on the current one, so the
# heads agree with it often: what matters here is each head's cost against llama.cpp's). Run
# whatever step 4 did: the heads do not need the pairs.
if [ "$heads" = 1 ]; then
  t=$SECONDS
  if [ "$(left)" -le 90 ]; then
    step_done "heads" 0 "not run: $(left) s left"
  elif ! make_heads "$out/head-models" >>"$out/heads.log" 2>&1; then
    step_done "heads: making the models" $((SECONDS - t)) "FAILED (heads.log)"
    rc=1
  else
    step_done "heads: making the models" $((SECONDS - t)) "ok"
    t=$SECONDS
    hd=$out/head-models
    timeout $(( $(left) > 60 ? $(left) - 15 : 45 )) "$root/build-cuda/bin/specd" bench \
      --head mtp "$hd/mtp-target.gguf" - --head eagle3 "$hd/target.gguf" "$hd/eagle3.gguf" \
      --head dflash "$hd/target.gguf" "$hd/dflash.gguf" --head dspark "$hd/target.gguf" "$hd/dspark.gguf" \
      --prompts "$prompts" --n-prompts 1 --sweep 4,8 --temps 0 -t "$threads" -ngl 99 -ngld 99 \
      --llama-bin "$root/deps/llama-cuda/build-lib/bin" --out "$out/heads" >>"$out/heads.log" 2>&1
    hrc=$?
    if [ $hrc -eq 0 ]; then step_done "heads: specd bench --head, 1 prompt" $((SECONDS - t)) "ok"
    else step_done "heads: specd bench --head, 1 prompt" $((SECONDS - t)) "FAILED (rc $hrc; heads.log)"; rc=1; fi
  fi
fi
write_report "$out" "$report"
[ $rc -eq 0 ] || exit 1
note "done in $(elapsed) s"
