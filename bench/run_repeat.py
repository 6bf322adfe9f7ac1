#!/usr/bin/env python3
"""Speed of speculation modes on a prompt set: median decode tokens/s and acceptance per mode.

  bench/run_repeat.py SPECD TARGET [--draft DRAFT] [--prompts FILE] [--modes "none;ngram-simple;ngram-simple,draft"]
                      [-n 128] [--temp 0] [--threads 2] [--first K]

Each mode runs every prompt once through `specd run --json` (a fresh process, so nothing is kept
across prompts). Modes are --spec values separated by ';'; a mode listing `draft` needs --draft.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run_one(args, mode, prompt):
    cmd = [args.specd, "run", "-m", args.target, "-p", prompt, "-n", str(args.n), "--temp", str(args.temp),
           "--seed", "1", "--ignore-eos", "-t", str(args.threads), "-c", "1024", "--spec", mode, "--json"]
    if "draft" in mode.split(","):
        cmd[4:4] = ["-md", args.draft]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run_repeat: {mode} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specd")
    ap.add_argument("target")
    ap.add_argument("--draft")
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "prompts-repeat.txt"))
    ap.add_argument("--modes", default="none;ngram-simple;ngram-map;ngram-cache;suffix",
                    help="--spec values separated by ;")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="only the first K prompts")
    args = ap.parse_args()
    prompts = [l.strip() for l in open(args.prompts) if l.strip()]
    if args.first:
        prompts = prompts[:args.first]
    print(f"{'mode':<28} {'median t/s':>10} {'accept':>7} {'acc/step':>8}")
    for mode in [m for m in args.modes.split(";") if m]:
        outs = [run_one(args, mode, p) for p in prompts]
        tps = statistics.median(o["timings"]["decode_tokens_per_s"] for o in outs)
        drafted = sum(o["speculative"]["n_drafted"] for o in outs)
        accepted = sum(o["speculative"]["n_accepted"] for o in outs)
        steps = sum(o["speculative"]["n_steps"] for o in outs)
        print(f"{mode:<28} {tps:>10.2f} {accepted / drafted if drafted else 0:>7.2f} "
              f"{accepted / steps if steps else 0:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
