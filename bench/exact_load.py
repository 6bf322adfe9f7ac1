#!/usr/bin/env python3
"""Exactness under load: default `specd serve`, 8 concurrent greedy requests on held-out prompts
against the same requests alone and with speculation off, byte for byte (issue 28's goal).

  bench/exact_load.py --target T.gguf --draft D.gguf [--specd build/bin/specd] [--rounds 3]
      [-n 32] [--prompts FILE] [--server-arg=ARG ...]

Two servers, both started as a user would start them (`specd serve -m T -md D`, every other
setting at its default, each with a calibration cache of its own in a temporary directory):
  spec   -m T -md D: speculation on (the default);
  plain  -m T:       no draft model, and every request sends "speculative": {"n_max": 0}.
Each round, on the held-out prompts (8 by default; temperature 0, ignore_eos, -n tokens):
  1. all of them at once on spec (the load: the slots share passes, drafts and prompts mixed), as
     sent by default, then again with drafts of exactly --forced-drafts tokens (under load the
     length policy may choose to draft little: this makes every step verify drafts);
  2. each alone on spec;
  3. each alone on spec with "speculative": {"n_max": 0} (the same server, no drafts);
  4. all of them at once on plain.
and prints how many of each concurrent round's texts equal each of the others (N/8), and for every one that
differs where (byte offset) and the two texts there. A greedy text depends on nothing but the
prompt: any difference is an exactness bug (a token's logits depending on what shares its pass).
Exit status 1 when any round differs. Checks equality, not speed: it may run niced, under load.

The default prompts are lines 7-14 of ../shared/bench/prompts.txt (lines 1-6 and 7-12 are those of
the speed tables in docs/benchmarks*.md; 13 and 14 are in no table), written out below so that the
script runs where that file is not.
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402

PROMPTS = [
    "Lily had a toy car. She loved to play with it every day.",
    "The sun was shining and the birds were singing.",
    "Tom wanted to build a big tower with his blocks.",
    "Once upon a time, in a small house, lived a kind old man.",
    "Anna found a shiny stone by the river.",
    "The little dog was sad because he lost his bone.",
    "Mia and Ben were best friends. They liked to play in the park.",
    "One day, it started to rain very hard.",
]

SPEC_OFF = {"n_max": 0}


# the benchmark servers' helpers (serve_bench.py), shared
free_port = serve_bench.free_port
wait_ready = serve_bench.wait_ready


def request(port, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    if body is None:
        c.request("GET", path)
    else:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"{path}: HTTP {r.status}: {text[:300]!r}")
    return json.loads(text)


class Server:
    """One `specd serve`, started with the given model flags and nothing else but a port and a
    calibration cache of its own (the defaults are what is tested)."""

    def __init__(self, name, specd, flags, log_dir, timeout):
        self.name = name
        self.port = free_port()
        self.calibration = tempfile.mkdtemp(prefix=f"specd-exact-{name}-")
        self.cmd = [specd, "serve", "--port", str(self.port), "--calibration-cache", self.calibration + "/"] + flags
        self.log = open(os.path.join(log_dir, f"{name}.log"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_ready(self.port, self.proc, timeout):
            self.stop()
            sys.exit(f"exact_load: {name} did not start within {timeout} s: {' '.join(self.cmd)} "
                     f"(its output: {self.log.name})")
        self.props = request(self.port, "/props")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.calibration, True)


def complete(port, prompt, n, speculative=None):
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True}
    if speculative is not None:
        body["speculative"] = speculative
    answer = request(port, "/completion", body)
    return answer["content"], answer.get("speculative", {})


def at_once(port, prompts, n, speculative=None):
    """All prompts sent together, one thread each; texts in prompt order."""
    out = [None] * len(prompts)

    def one(i):
        try:
            out[i] = complete(port, prompts[i], n, speculative)
        except Exception as e:  # reported as a failed request, never as a match
            out[i] = (None, {"error": str(e)})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def alone(port, prompts, n, speculative=None):
    return [complete(port, p, n, speculative) for p in prompts]


def where_differs(a, b):
    if a is None or b is None:
        return "a request failed"
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"byte {i}: {a[max(0, i - 20):i + 30]!r} against {b[max(0, i - 20):i + 30]!r}"


def compare(label, other_label, loaded, other, prompts):
    same = sum(1 for x, y in zip(loaded, other) if x[0] is not None and x[0] == y[0])
    print(f"  {label} = {other_label}: {same}/{len(prompts)}", flush=True)
    for i, (x, y) in enumerate(zip(loaded, other)):
        if x[0] is None or x[0] != y[0]:
            print(f"    prompt {i + 1} ({prompts[i][:40]!r}): {where_differs(x[0], y[0])}"
                  + (f" [{x[1].get('error') or y[1].get('error')}]" if x[0] is None or y[0] is None else ""))
    return same == len(prompts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--specd", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                                    "specd"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=32, help="tokens per request (default 32)")
    ap.add_argument("--prompts", help="a file of prompts, one a line (default: the 8 held-out prompts above)")
    ap.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                    help="an extra flag for both servers (--server-arg=-np --server-arg=8); none by default")
    ap.add_argument("--forced-drafts", type=int, default=3, metavar="K",
                    help="also send the concurrent round with drafts of exactly K (speculative n_min = n_max = "
                         "K; default 3; 0: not): under load the length policy may draft little, and what is "
                         "checked is that drafts change nothing")
    ap.add_argument("--start-timeout", type=int, default=300)
    args = ap.parse_args()
    prompts = [l.strip() for l in open(args.prompts) if l.strip()] if args.prompts else PROMPTS
    log_dir = tempfile.mkdtemp(prefix="specd-exact-logs-")
    servers, all_same = [], False
    try:
        spec = Server("spec", args.specd, ["-m", args.target, "-md", args.draft] + args.server_arg, log_dir,
                      args.start_timeout)
        servers.append(spec)
        plain = Server("plain", args.specd, ["-m", args.target] + args.server_arg, log_dir, args.start_timeout)
        servers.append(plain)
        invariance = spec.props.get("batch_invariant", {})
        print(f"target {args.target}, draft {args.draft}, {len(prompts)} prompts, {args.n} tokens, greedy")
        print(f"spec server: {' '.join(spec.cmd)}\n  batch_invariant: {json.dumps(invariance)}", flush=True)
        all_same = True
        for r in range(args.rounds):
            print(f"round {r + 1}:", flush=True)
            loads = [("concurrent", at_once(spec.port, prompts, args.n))]
            if args.forced_drafts > 0:
                k = args.forced_drafts
                loads.append((f"concurrent, drafts of {k}", at_once(spec.port, prompts, args.n,
                                                                     {"n_min": k, "n_max": k})))
            for label, loaded in loads:
                drafted = sum(x[1].get("drafted", 0) for x in loaded)
                accepted = sum(x[1].get("accepted", 0) for x in loaded)
                print(f"  ({label}: {drafted} tokens drafted, {accepted} accepted)")
            rows = [("alone", alone(spec.port, prompts, args.n)),
                    ("alone, speculation off", alone(spec.port, prompts, args.n, SPEC_OFF)),
                    ("concurrent on a server without a draft", at_once(plain.port, prompts, args.n, SPEC_OFF))]
            for label, loaded in loads:
                for other_label, other in rows:
                    all_same = compare(label, other_label, loaded, other, prompts) and all_same
        print("every text equal" if all_same else "DIFFERENCES (an exactness bug)")
        return 0 if all_same else 1
    finally:
        for s in servers:
            s.stop()
        if all_same:
            shutil.rmtree(log_dir, True)
        else:
            print(f"the servers' output: {log_dir}")


if __name__ == "__main__":
    sys.exit(main())
