#!/usr/bin/env python3
"""Draft-model trees forced vs chains vs auto: interleaved runs of `specd run --json`.

  bench/compare_trees.py SPECD TARGET DRAFT [--prompts FILE] [--first K] [--rounds R] [-n 128]
                         [--temps 0,1] [--threads 2] [--modes off,on,auto] [--extra "--draft-branches 4"]

For every round, temperature and prompt, each mode runs once in a fresh process, the order of the
modes rotating from one run to the next so a drifting machine affects all alike. All modes share
one calibration cache file (made in a temporary directory, warmed by one run per mode first), so
each starts from the same measured costs. Per temperature and mode it prints the median decode
tokens/s over runs, its ratio to chains (off), accepted tokens per target pass, and for trees the
tree steps, draft tokens per tree step and accepted per tree step.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_one(args, cal, mode, temp, prompt):
    cmd = [args.specd, "run", "-m", args.target, "-md", args.draft, "-p", prompt, "-n", str(args.n),
           "--temp", str(temp), "--seed", "1", "--ignore-eos", "-t", str(args.threads), "-c", "1024",
           "--draft-tree", mode, "--calibration-cache", cal, "--json"] + args.extra.split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_trees: --draft-tree {mode} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def summary(outs):
    tps = statistics.median(o["timings"]["decode_tokens_per_s"] for o in outs)
    s = [o["speculative"] for o in outs]
    steps = sum(x["n_steps"] for x in s)
    accepted = sum(x["n_accepted"] for x in s)
    tree_steps = sum(x["n_tree_steps"] for x in s)
    tree_drafted = sum(x["n_tree_drafted"] for x in s)
    tree_accepted = sum(x["n_tree_accepted"] for x in s)
    return tps, (accepted + steps) / steps if steps else 0.0, tree_steps, tree_drafted, tree_accepted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specd")
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench",
                                                      "prompts.txt"))
    ap.add_argument("--first", type=int, default=6, help="the first K prompts")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--temps", default="0,1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", default="off,on,auto")
    ap.add_argument("--extra", default="", help="more specd run flags for every mode, e.g. '--draft-p-split 0.2'")
    args = ap.parse_args()
    prompts = [l.strip() for l in open(args.prompts) if l.strip()][:args.first]
    modes = args.modes.split(",")
    temps = [float(t) for t in args.temps.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        cal = os.path.join(tmp, "calibration")
        for mode in modes:  # warm the shared cost file
            run_one(args, cal, mode, temps[0], prompts[0])
        outs = {(t, m): [] for t in temps for m in modes}
        k = 0
        for _ in range(args.rounds):
            for t in temps:
                for p in prompts:
                    for j in range(len(modes)):
                        m = modes[(j + k) % len(modes)]
                        outs[(t, m)].append(run_one(args, cal, m, t, p))
                    k += 1
    print(f"{'temp':>4} {'mode':<5} {'median t/s':>10} {'vs off':>6} {'tok/pass':>8} {'tree steps':>10} "
          f"{'drafted/tree':>12} {'acc/tree':>8}")
    for t in temps:
        base = summary(outs[(t, "off")])[0] if "off" in modes else 0.0
        for m in modes:
            tps, per_pass, ts, td, ta = summary(outs[(t, m)])
            print(f"{t:>4g} {m:<5} {tps:>10.2f} {tps / base if base else 0:>6.3f} {per_pass:>8.2f} {ts:>10d} "
                  f"{td / ts if ts else 0:>12.2f} {ta / ts if ts else 0:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
