#!/usr/bin/env bash
# Installs specd into a temporary prefix and builds examples/generate.c against it through
# pkg-config, as a user of the library does; then runs it on the tiny models and checks that
# greedy speculation gives the text of the target alone.
#
#   test_install.sh BUILD_DIR SOURCE_DIR MODELS_DIR [SANITIZERS]
# SANITIZERS: those the library was built with (make asan), so the programs built here load the
# same runtime first.
set -euo pipefail
build=$1 src=$2 models=$3 sanitize=${4:-}
cflags=()
[ -z "$sanitize" ] || cflags=(-fsanitize="$sanitize")
command -v pkg-config >/dev/null || { echo "FAIL pkg-config not found (scripts/deps.sh installs it)"; exit 1; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name specd.pc)
[ -n "$pc" ] || { echo "FAIL no specd.pc installed under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir specd)
echo "ok   pkg-config: $(pkg-config --modversion specd): $(pkg-config --cflags --libs specd)"

# The SONAME carries MAJOR.MINOR while MAJOR is 0 (an ABI change per minor release).
soname=$(objdump -p "$libdir/libspecd.so" | awk '/SONAME/ {print $2}')
want=libspecd.so.$(pkg-config --modversion specd | cut -d. -f1,2)
[ "$soname" = "$want" ] || { echo "FAIL SONAME is '$soname', expected '$want'"; exit 1; }
echo "ok   SONAME $soname"
# Only libspecd's API is exported: llama.cpp inside it stays hidden.
leaked=$(nm -D --defined-only "$libdir/libspecd.so" | awk '$2 ~ /[TDB]/ {print $3}' | grep -v '^specd_' | grep -v '^_' | head -5 || true)
[ -z "$leaked" ] || { echo "FAIL libspecd.so exports non-specd symbols: $leaked"; exit 1; }
echo "ok   only specd_* symbols exported"

cc -std=c11 -Wall -Wextra -Werror "${cflags[@]}" "$src/examples/generate.c" $(pkg-config --cflags --libs specd) \
   -Wl,-rpath,"$libdir" -o "$prefix/generate"
echo "ok   examples/generate.c builds with pkg-config --cflags --libs specd"
alone=$("$prefix/generate" "$models/target.gguf" "one day the dog" 2>/dev/null)
spec=$("$prefix/generate" "$models/target.gguf" "$models/draft.gguf" "one day the dog" 2>"$prefix/stats")
[ -n "$alone" ] && [ "$alone" = "$spec" ] || { echo "FAIL speculative text differs: '$alone' vs '$spec'"; exit 1; }
grep -q "drafts accepted" "$prefix/stats" || { echo "FAIL no statistics line"; exit 1; }
echo "ok   the installed library generates; greedy speculation equals the target alone"

# The JSON API is its own library on top of libspecd; the core needs no JSON library.
! objdump -p "$libdir/libspecd.so" | grep -q 'NEEDED.*jansson' || { echo "FAIL libspecd.so needs jansson"; exit 1; }
cat > "$prefix/rpc.c" <<'C'
#include <specd_rpc.h>
#include <stdio.h>
int main(void) {
    const char *answer = specd_rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}");
    puts(answer ? answer : "(null)");
    specd_free((void *)answer);
    /* an object of its own: no models until init */
    char *error = NULL;
    specd_rpc_api *api = specd_rpc_new(NULL, &error);
    char *own = api ? specd_rpc_call(api, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"status\"}") : error;
    printf("object: %s\n", own ? own : "(null)");
    specd_free(own);
    specd_rpc_free(api);
    return 0;
}
C
cc -std=c11 -Wall -Werror "${cflags[@]}" "$prefix/rpc.c" $(pkg-config --cflags --libs specd-rpc) -Wl,-rpath,"$libdir" -o "$prefix/rpc"
"$prefix/rpc" | grep -q '"state": *"uninitialized"' || { echo "FAIL specd_rpc status through libspecd-rpc: $("$prefix/rpc")"; exit 1; }
echo "ok   libspecd-rpc: specd_rpc built with pkg-config specd-rpc answers status; libspecd.so needs no jansson"
"$prefix/rpc" | grep -q '^object: {"jsonrpc": *"2.0".*"id": *2' || { echo "FAIL specd_rpc_call on an object: $("$prefix/rpc")"; exit 1; }
echo "ok   libspecd-rpc: an object of specd_rpc_new answers specd_rpc_call"
echo "7 passed, 0 failed"
