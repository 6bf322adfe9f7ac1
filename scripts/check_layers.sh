#!/usr/bin/env bash
# Checks that #include "..." between src/ folders follows the layer order (README, "How it works"):
#
#   cli -> server -> rpc -> serve -> session -> draft, verify, sample -> engine -> util
#
# A file may include its own folder and any folder to the right; an include to the left is a
# back arrow and fails the check. draft, verify and sample are one layer. llama.h is included only
# in engine/ and where a llama.cpp type is the point (sample/grammar.*, sample/grammar_error.*).
#
#   scripts/check_layers.sh [SRC_DIR]      exit 0: clean; 1: prints each back arrow
set -euo pipefail
src=${1:-$(dirname "$0")/../src}
declare -A rank=([util]=0 [engine]=1 [draft]=2 [verify]=2 [sample]=2 [session]=3 [serve]=4 [rpc]=5 [server]=6 [cli]=7)
llama_ok='^(engine/|sample/grammar(_error)?\.)'
bad=0
for f in "$src"/*/*.[ch]; do
    rel=${f#"$src"/}
    dir=${rel%%/*}
    [ -n "${rank[$dir]:-}" ] || { echo "$rel: folder '$dir' has no place in the layer order (add it here and in the README)"; bad=1; continue; }
    while IFS=: read -r line target; do
        to=$target
        case $to in ../*) to=${to#../}; to=${to%%/*} ;; *) continue ;; esac
        if [ -z "${rank[$to]:-}" ]; then
            echo "$rel:$line: includes '$target' from a folder outside the layer order"; bad=1
        elif [ "${rank[$to]}" -gt "${rank[$dir]}" ]; then
            echo "$rel:$line: back arrow $dir -> $to ('$target')"; bad=1
        fi
    done < <(grep -n '^#include "' "$f" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
    if grep -q '^#include "llama.h"' "$f" && ! [[ $rel =~ $llama_ok ]]; then
        echo "$rel: includes llama.h above the engine (only engine/ and sample/grammar*.* may)"; bad=1
    fi
done
[ $bad -eq 0 ] && echo "layers: clean ($(ls "$src"/*/*.[ch] | wc -l) files)"
exit $bad
