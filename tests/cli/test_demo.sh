#!/usr/bin/env bash
# The first run of a fresh machine: `make demo` without ../shared (and without the benchmark pair)
# makes its own pair with make_tiny_model --text and must print that paragraph, word for word, the
# same with speculation off and on (demo.sh fails otherwise), then the speedup and how to run your
# own models. The speedup is printed, not judged: on a busy machine it varies.
#   test_demo.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
out=$(SPECD_DEMO_SHARED=/nonexistent/shared SPECD_BENCH_DIR=/nonexistent/bench "$src/scripts/demo.sh" "$build")
echo "$out"
text=$(cat "$build/demo-models/text.txt")
want=${text#* } # the prompt is its first word; the output is the rest
got=$(echo "$out" | sed -n '/^output (the same with speculation off and on):$/{n;p}')
[ "$got" = "$want" ] || { echo "FAIL the output is not the paragraph:"; echo " got: $got"; echo "want: $want"; exit 1; }
echo "$out" | grep -Eq '^speedup +[0-9]+\.[0-9]+x$' || { echo "FAIL no speedup line"; exit 1; }
echo "$out" | grep -q '^to run your own models: specd run -m TARGET.gguf -md DRAFT.gguf -p ' ||
  { echo "FAIL no line on how to run your own models"; exit 1; }
echo "ok   the demo without ../shared writes its paragraph, the speedup and how to run your own models"
