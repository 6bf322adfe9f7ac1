#!/usr/bin/env bash
# The demo: one speculative generation and the same without speculation, with statistics.
#   scripts/demo.sh [BUILD_DIR]
# Models, best first: the benchmark pair (shared/bench/make_pairs.sh output in
# ~/.cache/specd-bench), else stories260K from ../shared/models (real TinyStories text; it drafts
# for itself, so every draft is accepted), else tiny random models generated here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
specd=$build/bin/specd
bench=${SPECD_BENCH_DIR:-$HOME/.cache/specd-bench}
shared=$root/../shared/models
prompt="Once upon a time, there was a little girl named Lily."
extra=()
if [ -s "$bench/target.gguf" ] && [ -s "$bench/draft.gguf" ]; then
  target=$bench/target.gguf draft=$bench/draft.gguf
  echo "demo: benchmark pair (348M target, 44M draft) from $bench"
elif [ -s "$shared/stories260K.gguf" ]; then
  target=$shared/stories260K.gguf draft=$shared/stories260K.gguf
  extra=(--draft-fixed --draft-max 6)
  echo "demo: stories260K as target and as its own draft (every draft is accepted)"
else
  mkdir -p "$build/demo-models"
  target=$build/demo-models/target.gguf draft=$build/demo-models/draft.gguf
  "$build/bin/make_tiny_model" --out "$target" --seed 1 --logit-scale 4
  "$build/bin/make_tiny_model" --out "$draft" --seed 1 --noise 0.1 --logit-scale 4
  prompt="the little girl saw a big red ball"
  extra=(--draft-fixed --draft-max 4)
  echo "demo: tiny random models generated in $build/demo-models (no ../shared/models here)"
fi
common=(-m "$target" -p "$prompt" -n 96 -c 512 --temp 0 --ignore-eos)
echo; echo "== speculative (draft model $(basename "$draft"))"
"$specd" run "${common[@]}" -md "$draft" "${extra[@]}"
echo; echo "== target alone"
"$specd" run "${common[@]}" --spec none
