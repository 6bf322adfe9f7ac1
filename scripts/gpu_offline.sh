#!/usr/bin/env bash
# A GPU machine with no package registry and no network (an air-gapped box, a lent runner): what
# scripts/gpu_bench.sh needs there, packed on a machine with apt and the llama.cpp source, then
# unpacked there, so that the minutes of llama.cpp's CUDA build are not spent before a missing
# library stops specd's configure (an H200 so lent built llama.cpp for 316 s and then stopped there).
#
#   scripts/gpu_offline.sh pack [DIR]             here: Debian or Ubuntu with apt, after scripts/deps.sh
#   scripts/gpu_offline.sh run DIR CMD [ARG...]   there, in specd's checkout, with DIR copied beside
#
# pack writes into DIR (default .gpu-offline, which git ignores): llama-src.tar.gz (deps/llama/src
# without its history, models, docs, tests and benches: some 13 MB) and its release file, the Debian
# packages specd's build asks pkg-config for (jansson, cmocka, libmicrohttpd, and pkgconf itself),
# and the benchmark inputs of the shared folder (bench/ and models/stories260K.gguf; SPECD_SHARED
# names it, else ../shared).
# run unpacks the packages under /tmp/specd-offline (never into /, where they could replace the
# machine's own), points pkg-config and the loader at them, puts the source into deps/llama/src when
# none is there, and runs CMD with SPECD_NO_APT=1 and SPECD_SHARED set, e.g.
#   scripts/gpu_offline.sh run .gpu-offline scripts/gpu_bench.sh --big --serve
# libmicrohttpd's pkg-config file requires gnutls's, which a machine with only gnutls's shared
# library lacks: run then writes an empty gnutls.pc beside the others (specd links libmicrohttpd
# dynamically; the machine's libgnutls.so.30 serves it at run time).
# Exit codes: CMD's, or 2 bad arguments or a DIR that pack did not write, 1 pack could not fetch.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
packages=(libjansson4 libjansson-dev libcmocka0 libcmocka-dev libmicrohttpd12 libmicrohttpd-dev
          pkgconf pkgconf-bin libpkgconf3)
sysroot=${SPECD_OFFLINE_ROOT:-/tmp/specd-offline}

die() { # code message...
  local code=$1
  shift
  printf 'gpu_offline: %s\n' "$*" >&2
  exit "$code"
}

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

pack() {
  local dir=$1 src=$root/deps/llama/src shared=${SPECD_SHARED:-$root/../shared}
  [ -f "$src/include/llama.h" ] || die 1 "no llama.cpp source in $src: run scripts/deps.sh first"
  [ -f "$shared/models/stories260K.gguf" ] || die 1 "no $shared/models/stories260K.gguf (SPECD_SHARED names the shared folder)"
  mkdir -p "$dir/debs" "$dir/shared/bench" "$dir/shared/models" || die 1 "cannot make '$dir'"
  git -C "$src" archive --format=tar HEAD -- . ':!models' ':!docs' ':!benches' ':!tests' | gzip -1 >"$dir/llama-src.tar.gz" ||
    die 1 "cannot archive $src (git archive)"
  cp "$src/.specd-release.json" "$dir/" 2>/dev/null || true
  (cd "$dir/debs" && apt-get download "${packages[@]}" >"$dir/apt.log" 2>&1) ||
    die 1 "apt-get download ${packages[*]} failed (apt-get update first?): $(tail -3 "$dir/apt.log")"
  rm -f "$dir/apt.log"
  cp "$shared"/bench/* "$dir/shared/bench/" && cp "$shared/models/stories260K.gguf" "$dir/shared/models/" ||
    die 1 "cannot copy the benchmark inputs from $shared"
  printf 'gpu_offline: packed %s (%s)\n' "$dir" "$(du -sh "$dir" | cut -f1)" >&2
}

run() {
  local dir=$1 f lib pc
  shift
  dir=$(cd "$dir" 2>/dev/null && pwd) || die 2 "no folder '$1'"
  compgen -G "$dir/debs/*.deb" >/dev/null && [ -f "$dir/llama-src.tar.gz" ] ||
    die 2 "'$dir' holds no pack (its debs/ and llama-src.tar.gz): run scripts/gpu_offline.sh pack there first"
  mkdir -p "$sysroot" || die 2 "cannot make $sysroot"
  for f in "$dir"/debs/*.deb; do dpkg-deb -x "$f" "$sysroot" || die 2 "cannot unpack $f"; done
  lib=$sysroot/usr/lib/$(uname -m)-linux-gnu
  pc=$lib/pkgconfig
  [ -f "$pc/gnutls.pc" ] || pkg-config --exists gnutls 2>/dev/null ||
    printf 'Name: gnutls\nDescription: the machine'"'"'s own (gpu_offline.sh)\nVersion: 3\nLibs:\nCflags:\n' >"$pc/gnutls.pc"
  if ! command -v pkg-config >/dev/null 2>&1; then
    mkdir -p "$sysroot/bin" && ln -sf "$sysroot/usr/bin/pkgconf" "$sysroot/bin/pkg-config"
    export PATH=$sysroot/bin:$PATH
  fi
  export PKG_CONFIG_PATH=$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} PKG_CONFIG_SYSROOT_DIR=$sysroot
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ ! -f "$root/deps/llama/src/include/llama.h" ]; then
    mkdir -p "$root/deps/llama/src" && tar xzf "$dir/llama-src.tar.gz" -C "$root/deps/llama/src" ||
      die 2 "cannot unpack $dir/llama-src.tar.gz"
    [ -f "$dir/.specd-release.json" ] && cp "$dir/.specd-release.json" "$root/deps/llama/src/"
  fi
  export SPECD_NO_APT=1 SPECD_SHARED=$dir/shared
  exec "$@"
}

case "${1:-}" in
  pack) [ $# -le 2 ] || die 2 "pack takes one folder"; pack "${2:-$root/.gpu-offline}" ;;
  run) [ $# -ge 3 ] || die 2 "run takes a folder and a command"; shift; run "$@" ;;
  -h|--help) usage ;;
  *) die 2 "say pack or run (see --help)" ;;
esac
