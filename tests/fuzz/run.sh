#!/usr/bin/env bash
# Runs the two libFuzzer harnesses built by `make fuzz` for SECONDS each: fuzz_rpc (no model) and
# fuzz_rpc_model (the tiny models). Fails on any crash, leak, timeout, out-of-memory or
# sanitizer report; prints each mode's executions and executions per second.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS
#
# Per mode under BUILD_DIR/fuzz/: corpus-MODE (inputs found, kept between runs), artifacts-MODE
# (crash-*, leak-*, timeout-*, oom-*: the reproducers) and MODE.log (libFuzzer's output).
# Reproduce one: BUILD_DIR/bin/fuzz_rpc[_model] FILE (SPECD_FUZZ_VERBOSE=1 shows the dialogue).
set -uo pipefail

build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
out=$build/fuzz
mkdir -p "$out"

# UBSan stops at its first report (by default it prints and goes on, which the fuzzer would not
# count as a failure); leaks are checked after every input that allocated more than it freed.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1

stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }

run_mode() {
  local mode=$1 binary=$2 label=$3
  local corpus=$out/corpus-$mode artifacts=$out/artifacts-$mode log=$out/$mode.log
  mkdir -p "$corpus" "$artifacts"
  # stdin from /dev/null: nothing the harness starts may wait on a terminal.
  "$build/bin/$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$here/rpc.dict" -artifact_prefix="$artifacts/" "$corpus" "$here/corpus" </dev/null >"$log" 2>&1
  local rc=$?
  local runs speed
  runs=$(stat number_of_executed_units "$log")
  speed=$(stat average_exec_per_sec "$log")
  if [ $rc -ne 0 ]; then
    echo "fuzz: $label: FAILED (exit $rc) after ${runs:-?} inputs; the end of $log:" >&2
    grep -v '^#[0-9]' "$log" | tail -40 >&2
    echo "fuzz: reproducers in $artifacts: $(ls "$artifacts" | tr '\n' ' ')" >&2
    return 1
  fi
  echo "fuzz: $label: ${seconds} s, ${runs:-?} inputs, ${speed:-?} exec/s, corpus $(ls "$corpus" | wc -l) inputs, no crash, leak or sanitizer report"
}

failed=0
run_mode nomodel fuzz_rpc "no model" || failed=1
run_mode model fuzz_rpc_model "tiny model" || failed=1
exit $failed
