#!/usr/bin/env bash
# The demo's own pair, for a machine without ../shared (scripts/demo.sh): make_tiny_model --text
# builds a target that writes the paragraph below greedily (each piece of it leads to the next
# through the embeddings and the output matrix) and a draft that does the same but is wrong at
# every 10th piece. The target is made big enough (F32, 4 layers of 768 wide, 150 MB) for a pass to
# cost what a real model's does on a CPU, reading its weights: its layers are random and scaled
# down (--layer-scale 0.01) so they cost without moving the argmax.
#   scripts/demo_models.sh MAKE_TINY_MODEL OUT_DIR   writes OUT_DIR/text.txt, text-target.gguf,
#                                                    text-draft.gguf (again only when the text changed)
set -euo pipefail
tool=$1 out=$2
text="Speculative decoding lets a small draft model guess the next few tokens, and the large target \
model checks all of those guesses in one pass. When the draft guesses right, several tokens come out \
for the price of one pass; when it guesses wrong, the target keeps its own token and nothing is lost. \
The text is exactly what the target would have written alone, only sooner. This little target was \
built to write this paragraph, and its draft agrees with it most of the time. Try your own models \
next: a large target and a small draft that share one vocabulary."
mkdir -p "$out"
if [ -s "$out/text-target.gguf" ] && [ -s "$out/text-draft.gguf" ] && [ "$(cat "$out/text.txt" 2>/dev/null)" = "$text" ]; then
  exit 0
fi
common=(--text "$text" --logit-scale 10 --layer-scale 0.01 --n-ctx 1024)
"$tool" --out "$out/text-target.gguf" "${common[@]}" --n-embd 768 --n-head 12 --n-head-kv 12 --n-ff 3072 \
  --n-layer 4 --seed 1 2>/dev/null
"$tool" --out "$out/text-draft.gguf" "${common[@]}" --text-miss 10 --n-embd 128 --n-ff 128 --n-layer 1 \
  --seed 2 2>/dev/null
printf '%s' "$text" > "$out/text.txt"
