#!/bin/sh
# run.sh SPECD MODELS_DIR WORK_DIR TEMPLATES_DIR - installs the pinned OpenAI and Anthropic clients (package.json) into WORK_DIR
# with npm, then runs test.mjs against `specd serve`. Exits 77 (skipped) when node, npm or the npm
# registry cannot be had: the test needs the real client, not a stand-in.
set -u
here=$(cd "$(dirname "$0")" && pwd)
specd=$1 models=$2 work=$3 templates=$4
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIP: node and npm are needed to run the official openai and @anthropic-ai/sdk clients (scripts/deps.sh installs them)"
  exit 77
fi
mkdir -p "$work"
if ! cmp -s "$here/package.json" "$work/package.json" || [ ! -f "$work/node_modules/openai/package.json" ] ||
   [ ! -f "$work/node_modules/@anthropic-ai/sdk/package.json" ]; then
  cp "$here/package.json" "$work/package.json"
  if ! npm install --prefix "$work" --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1; then
    cat "$work/npm.log"
    rm -f "$work/package.json" # try again next time
    echo "SKIP: npm could not install the openai and @anthropic-ai/sdk clients (is the npm registry reachable?)"
    exit 77
  fi
fi
exec node "$here/test.mjs" "$specd" "$models" "$work" "$templates"
