#!/usr/bin/env bash
# Checks the layers of src/ (docs/internals.md, "The layers of the code"), each folder a layer of its own:
#
#   cli -> server -> rpc -> api -> serve -> session -> draft -> verify -> sample -> engine -> util
#
# A file may use its own folder and any folder to its right; a use of a folder to its left is a
# back arrow. What counts as a use:
#   - an #include, "..." or <...>; and llama.cpp's headers (llama.h, ggml*.h, gguf.h) and the
#     engine's internals (engine_internal.h) are the engine's alone, jansson's are for api/ and
#     above (no JSON below the API layer), libmicrohttpd's for server/;
#   - a call or a data reference, read from the symbols of the built object files (nm): a symbol a
#     file uses and a file of a folder to the left defines (also through include/specd.h, whose
#     functions live in the folders); a llama.cpp or ggml symbol used outside engine/;
#   - and two files that use each other's symbols, directly or round a loop (a circle), fail too.
#
#   scripts/check_layers.sh [SRC_DIR [BUILD_DIR]]   exit 0: clean; 1: prints each finding
# BUILD_DIR (default: build next to SRC_DIR) must hold a build of src/: the calls are read there.
set -euo pipefail
shopt -s nullglob # a folder without C++ files
src=$(cd "${1:-$(dirname "$0")/../src}" && pwd)
build=${2:-$src/../build}
order=(util engine sample verify draft session serve api rpc server cli)
declare -A rank
for i in "${!order[@]}"; do rank[${order[$i]}]=$i; done
bad=0
say() { echo "$*"; bad=1; }

# ---- includes ----------------------------------------------------------------------------------
system_allowed() { # folder header -> 0 when the folder may include the system header
    case $2 in
    llama.h | llama-*.h | ggml.h | ggml-*.h | gguf.h) [ "$1" = engine ] ;;
    jansson.h) [ "${rank[$1]}" -ge "${rank[api]}" ] ;;
    microhttpd.h) [ "$1" = server ] ;;
    *) return 0 ;;
    esac
}

n_files=0
for f in "$src"/*/*.[ch] "$src"/*/*.cpp; do
    rel=${f#"$src"/}
    dir=${rel%%/*}
    n_files=$((n_files + 1))
    [ -n "${rank[$dir]:-}" ] || { say "$rel: folder '$dir' has no place in the layer order (add it here and in docs/internals.md)"; continue; }
    while IFS=: read -r line kind target; do
        if [ "$kind" = '<' ] || [[ $target != */* ]]; then
            system_allowed "$dir" "${target##*/}" || say "$rel:$line: includes $target: not in $dir/ (see the list above)"
            continue
        fi
        to=${target#../}
        to=${to%%/*}
        if [ "${target##*/}" = engine_internal.h ] && [ "$dir" != engine ]; then
            say "$rel:$line: includes the engine's internals (engine_internal.h: src/engine/ alone; engine.h is for the layers above)"
        elif [ -z "${rank[$to]:-}" ]; then
            say "$rel:$line: includes '$target' from a folder outside the layer order"
        elif [ "${rank[$to]}" -gt "${rank[$dir]}" ]; then
            say "$rel:$line: back arrow $dir -> $to (includes '$target')"
        fi
    done < <(awk '/^#include[ \t]*[<"]/ { s = $0; sub(/^#include[ \t]*/, "", s); t = substr(s, 2); sub(/[">].*/, "", t)
                                       print NR ":" substr(s, 1, 1) ":" t }' "$f")
done

# ---- calls ---------------------------------------------------------------------------------------
if [ ! -d "$build/CMakeFiles" ]; then
    echo "layers: no build in '$build' (make build, or give the build directory): calls not checked"
    exit 1
fi
symbols=$(mktemp)
trap 'rm -f "$symbols"' EXIT
declare -A seen
n_objects=0
while read -r o; do
    rel=${o#*.dir/src/}
    rel=${rel%.o}
    [ -f "$src/$rel" ] && [ -z "${seen[$rel]:-}" ] || continue
    seen[$rel]=1
    n_objects=$((n_objects + 1))
    nm -P "$o" | awk -v file="$rel" '$2 == "U" {print "U", file, $1; next} $2 ~ /^[TDBRCGSVW]$/ {print "D", file, $1}'
done < <(find "$build" -path '*CMakeFiles/*.dir/src/*' \( -name '*.c.o' -o -name '*.cpp.o' \) | sort) > "$symbols"

findings=$(awk -v order="${order[*]}" '
    BEGIN { n = split(order, names, " "); for (i = 1; i <= n; i++) rank[names[i]] = i }
    function folder(file) { sub(/\/.*/, "", file); return file }
    $1 == "D" { if (!($3 in def)) def[$3] = $2; next }
    { use_file[++n_uses] = $2; use_sym[n_uses] = $3 }
    function strongconnect(v,   i, w, comp, count) {
        number[v] = low[v] = ++counter
        stack[++top] = v; on_stack[v] = 1
        for (i = 1; i <= n_out[v]; i++) {
            w = out[v, i]
            if (!(w in number)) { strongconnect(w); if (low[w] < low[v]) low[v] = low[w] }
            else if (on_stack[w] && number[w] < low[v]) low[v] = number[w]
        }
        if (low[v] != number[v]) return
        comp = ""; count = 0
        do { w = stack[top--]; on_stack[w] = 0; comp = comp (count ? " <-> " : "") w; count++ } while (w != v)
        if (count > 1) print "circle: " comp " (each uses the others, round a loop)"
    }
    END {
        for (u = 1; u <= n_uses; u++) {
            from = use_file[u]; sym = use_sym[u]
            if (!(sym in def)) {
                if (sym ~ /^(llama_|ggml_|gguf_)/ && folder(from) != "engine")
                    print "llama.cpp outside the engine: " from " uses " sym
                continue
            }
            to = def[sym]
            if (to == from) continue
            if (rank[folder(to)] > rank[folder(from)])
                print "back arrow " folder(from) " -> " folder(to) ": " from " uses " sym " (" to ")"
            if (!((from, to) in edge)) { edge[from, to] = 1; out[from, ++n_out[from]] = to; node[from] = node[to] = 1 }
        }
        for (v in node) if (!(v in number)) strongconnect(v)
    }' "$symbols" | sort -u)
if [ -n "$findings" ]; then
    echo "$findings"
    bad=1
fi
[ $bad -eq 0 ] && echo "layers: clean ($n_files files; the calls of $n_objects object files)"
exit $bad
