#!/usr/bin/env bash
# The demo: the same greedy generation with speculation off and on, side by side (tokens/s and
# the ratio), on a setting where speculation pays on this machine.
#   scripts/demo.sh [BUILD_DIR]
# What it runs, best first:
#  1. the benchmark pair (348M target, 44M draft; ~/.cache/specd-bench, or SPECD_BENCH_DIR), made
#     by ../shared/bench/make_pairs.sh when ../shared is there and the pair is not (about a minute,
#     once); its F32 target, the memory-bound shape of large models and GPUs, where a pass of
#     several tokens costs about what one does on any machine (the Q8_0 target is compute-bound:
#     on an AMD EPYC a pass of 2 tokens costs 2.48x one, and no draft length pays there);
#  2. else, with ../shared's stories260K, model-free drafting (prompt lookup and suffix trees, no
#     draft model) on a prompt whose text the model repeats;
#  3. else (no ../shared: a fresh machine) a pair made here by make_tiny_model --text: a 150 MB
#     target (F32, 4 layers of 768) built to write one English paragraph, and a 1 MB draft that
#     agrees with it at 9 pieces of 10 (docs/cli.md, "make_tiny_model").
# A draft model as dear as the target (stories260K drafting for itself) is not shown: it can never
# pay, and specd does not draft with it (docs/performance.md).
# SPECD_DEMO_SHARED names ../shared (a folder that does not exist: none; the demo_text test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
specd=$build/bin/specd
bench=${SPECD_BENCH_DIR:-$HOME/.cache/specd-bench}
shared=${SPECD_DEMO_SHARED:-$root/../shared}
n=128
eos=(--ignore-eos) # the same number of tokens off and on, whatever the model would end with

have_pair() { [ -s "$bench/target-f32.gguf" ] && [ -s "$bench/draft.gguf" ]; }

if ! have_pair && [ -x "$shared/bench/make_pairs.sh" ] && [ -d "$root/deps/llama/src/gguf-py" ]; then
  echo "demo: making the benchmark pair in $bench (about a minute, once)"
  "$shared/bench/make_pairs.sh" "$root/deps/llama/src" "$bench" >/dev/null || echo "demo: could not make it"
fi

if have_pair; then
  target=$bench/target-f32.gguf
  spec=(-md "$bench/draft.gguf")
  prompt="Once upon a time, there was a little girl named Lily."
  what="the memory-bound benchmark pair (348M target in F32, 44M draft model) from $bench"
  threads=()
elif [ -s "$shared/models/stories260K.gguf" ]; then
  target=$shared/models/stories260K.gguf
  what="stories260K, no draft model: prompt lookup and suffix drafts on text that repeats"
  # One thread: these models are too small for a second to help, and ggml's threads wait for each
  # other at every operation, which on a busy machine costs more than the work.
  spec=(--spec ngram-simple,suffix) threads=(-t 1)
  # Text that repeats, as when a model quotes or edits a passage it was given: a story opening, the
  # model's own greedy continuation of it, and the opening again. The model goes on much as it did,
  # and the drafters propose that from the passage.
  opening="Once upon a time, there was a little girl named Lily. She loved to play with her red ball in the park."
  passage=$("$specd" run -m "$target" -p "$opening" -n 96 --temp 0 --ignore-eos --spec none -t 1 --json |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["text"], end="")')
  prompt="$opening$passage $opening"
else
  models=$build/demo-models
  "$root/scripts/demo_models.sh" "$build/bin/make_tiny_model" "$models"
  target=$models/text-target.gguf
  spec=(-md "$models/text-draft.gguf")
  prompt=$(cut -d' ' -f1 "$models/text.txt")
  what="a pair made here in $models (no ../shared): a target built to write one paragraph, a draft that agrees at 9 pieces of 10"
  # One thread: ggml's threads wait for each other at every operation, which on a busy machine
  # (2 cores shared) costs more than the second thread gives; the target alone is still
  # memory-bound (150 MB of F32 weights a pass), which is where verifying several tokens pays.
  threads=(-t 1)
  n=256 eos=() # the paragraph ends well before: its end-of-text token ends both runs
fi

echo "demo: $what"
echo "      greedy, up to $n tokens, speculation off and on (run twice each, alternating; the faster run counts)"
echo
common=(-m "$target" -p "$prompt" -n "$n" -c 1024 --temp 0 "${eos[@]}" "${threads[@]}" --json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in 1 2; do
  "$specd" run "${common[@]}" --spec none > "$tmp/off-$round.json"
  "$specd" run "${common[@]}" "${spec[@]}" > "$tmp/on-$round.json"
done

python3 - "$tmp" "$prompt" <<'EOF'
import json, sys
tmp, prompt = sys.argv[1], sys.argv[2]
def best(mode):
    runs = [json.load(open(f"{tmp}/{mode}-{r}.json")) for r in (1, 2)]
    return max(runs, key=lambda o: o["timings"]["decode_tokens_per_s"])
off, on = best("off"), best("on")
if off["text"] != on["text"]:
    sys.exit("demo: speculation changed the greedy output; this is a bug, please report it")
print("prompt:", prompt)
print("output (the same with speculation off and on):")
print(on["text"].strip())
print()
s = on["speculative"]
rows = [("speculation off", off, "-", "1.00"),
        (f"speculation on ({s['type']})", on, f"{100 * s['acceptance_rate']:.0f}%",
         f"{on['n_predicted'] / max(s['n_steps'], 1):.2f}")]
print(f"{'':<36}{'tokens/s':>10}{'accepted':>10}{'tokens/pass':>13}")
for name, o, acc, per in rows:
    print(f"{name:<36}{o['timings']['decode_tokens_per_s']:>10.1f}{acc:>10}{per:>13}")
ratio = on["timings"]["decode_tokens_per_s"] / off["timings"]["decode_tokens_per_s"]
print(f"{'speedup':<36}{ratio:>9.2f}x")
st = on["startup"]
print(f"\nstart-up of the speculative run: load {st['load_ms']:.0f} ms, calibration {st['calibration_ms']:.1f} ms "
      f"({st['calibration']}), prompt {st['prompt_ms']:.0f} ms")
print("\nto run your own models: specd run -m TARGET.gguf -md DRAFT.gguf -p \"your prompt\" (docs/cli.md)")
EOF
