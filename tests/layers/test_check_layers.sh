#!/usr/bin/env bash
# scripts/check_layers.sh on small made-up trees: a clean one passes, and each kind of finding
# (a llama.cpp call outside the engine, the engine's internals or <llama.h> included above it, a
# back arrow by call and by include, a circle between two files, a folder with no place in the
# order) fails with its own message. Without this, a check that silently stopped seeing calls (nm
# output it no longer parses, objects it no longer finds) would keep passing on the real tree.
#
#   tests/layers/test_check_layers.sh CHECK_LAYERS_SH C_COMPILER
set -euo pipefail
check=$1
cc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# tree NAME FILE=CONTENT...: writes src/FILE for each pair under $tmp/NAME and compiles each .c
# into NAME/build/CMakeFiles/t.dir/src/FILE.o, where check_layers.sh looks for a build's objects.
tree() {
    local name=$1 spec rel
    shift
    mkdir -p "$tmp/$name/src" "$tmp/$name/build/CMakeFiles"
    for spec in "$@"; do
        rel=${spec%%=*}
        mkdir -p "$(dirname "$tmp/$name/src/$rel")"
        printf '%s\n' "${spec#*=}" > "$tmp/$name/src/$rel"
    done
    for spec in "$@"; do
        rel=${spec%%=*}
        [[ $rel == *.c ]] || continue
        mkdir -p "$(dirname "$tmp/$name/build/CMakeFiles/t.dir/src/$rel")"
        "$cc" -c -o "$tmp/$name/build/CMakeFiles/t.dir/src/$rel.o" "$tmp/$name/src/$rel"
    done
}

# expect NAME RC [TEXT...]: check_layers.sh on tree NAME exits RC and prints each TEXT.
expect() {
    local name=$1 want_rc=$2 out rc=0 text
    shift 2
    out=$(bash "$check" "$tmp/$name/src" "$tmp/$name/build" 2>&1) || rc=$?
    if [ "$rc" -ne "$want_rc" ]; then
        echo "FAIL $name: exit $rc, expected $want_rc; it said:"
        echo "$out"
        failures=$((failures + 1))
        return
    fi
    for text in "$@"; do
        if ! grep -qF -- "$text" <<<"$out"; then
            echo "FAIL $name: no '$text' in what it said:"
            echo "$out"
            failures=$((failures + 1))
            return
        fi
    done
    echo "ok   $name"
}

# Clean: the engine calls llama.cpp and util; draft calls the engine through its header.
tree clean \
    'util/u.c=int util_f(void) { return 1; }' \
    'engine/engine.h=int engine_g(void);' \
    'engine/e.c=int util_f(void); int llama_decode(void); int engine_g(void) { return util_f() + llama_decode(); }' \
    'draft/d.c=#include "../engine/engine.h"
int draft_h(void) { return engine_g(); }'
expect clean 0 "layers: clean"

# A llama.cpp function called from draft/, declared by hand so no include gives it away.
tree llama_call \
    'engine/e.c=int llama_decode(void); int engine_g(void) { return llama_decode(); }' \
    'draft/d.c=int llama_decode(void); int draft_h(void) { return llama_decode(); }'
expect llama_call 1 "llama.cpp outside the engine: draft/d.c uses llama_decode"

# The engine's internals and llama.cpp's header included above the engine ("..." and <...>).
tree internals \
    'engine/engine_internal.h=struct x { int a; };' \
    'session/s.h=#include "../engine/engine_internal.h"' \
    'sample/g.h=#include <llama.h>'
expect internals 1 "session/s.h:1: includes the engine's internals" "sample/g.h:1: includes llama.h"

# util calls into the engine with no include at all: only the symbols show it.
tree call_back \
    'engine/e.c=int engine_g(void) { return 2; }' \
    'util/u.c=int engine_g(void); int util_f(void) { return engine_g(); }'
expect call_back 1 "back arrow util -> engine: util/u.c uses engine_g (engine/e.c)"

# sample and verify: each its own layer, so sample reaching up into verify is a back arrow.
tree sample_verify \
    'verify/v.c=int verify_g(void) { return 3; }' \
    'sample/s.c=int verify_g(void); int sample_f(void) { return verify_g(); }'
expect sample_verify 1 "back arrow sample -> verify: sample/s.c uses verify_g (verify/v.c)"

# draft includes a header of session/, the layer above it.
tree include_back \
    'session/x.h=int session_f(void);' \
    'draft/d.h=#include "../session/x.h"'
expect include_back 1 "draft/d.h:1: back arrow draft -> session (includes '../session/x.h')"

# Two files of one folder that call each other: no back arrow, still a circle.
tree circle \
    'draft/a.c=int b_f(int); int a_f(int n) { return n ? b_f(n - 1) : 0; }' \
    'draft/b.c=int a_f(int); int b_f(int n) { return n ? a_f(n - 1) : 1; }'
expect circle 1 "circle: draft/"

# A folder the order does not know.
tree stray 'extra/x.c=int x_f(void) { return 0; }'
expect stray 1 "extra/x.c: folder 'extra' has no place in the layer order"

# No build: the calls cannot be read, which is a failure, not a pass.
mkdir -p "$tmp/nobuild/src/util"
echo 'int f(void);' > "$tmp/nobuild/src/util/u.h"
expect nobuild 1 "calls not checked"

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "all cases as expected"
