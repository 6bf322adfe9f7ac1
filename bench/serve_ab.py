#!/usr/bin/env python3
"""Interleaved A/B of servers: paired rounds, for changes smaller than this machine's noise.

  bench/serve_ab.py --target T.gguf --draft D.gguf [--prompts FILE] [--clients 1] [--temp 0]
      [--rounds 6] [--requests 4] [-n 128] [--parallel 4] [--threads 2]
      [--calibration-from NAME=DIR ...] NAME=KIND:BINARY [NAME=KIND:BINARY ...]

KIND is one of serve_bench.py's servers (specd, specd-plain, llama, llama+draft); BINARY the specd
or llama-server to run, e.g. new=specd:build/bin/specd old=specd:/tmp/specd-old
llama=llama:deps/llama/build-tools/bin/llama-server.

All servers are started at once and stay up (an idle server takes no CPU), each specd with a
calibration cache of its own (what one learns must not decide how another drafts; empty, or a
copy of DIR with --calibration-from, to measure what a file earlier runs left does); each round runs the same
load (C clients x --requests requests, serve_bench.py's run_round) on every server in turn, in an
order that rotates from round to round. serve_bench.py starts a server per measurement and runs them
minutes apart, so a change of the machine's speed between them (10-15% here) reads as a difference
between servers; here every round gives each server's aggregate tokens/s against the first server's
in the same minute, and the report is the median of those paired ratios. Measurements, not a test.
"""
import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_bench  # noqa: E402


def start(args, spec):
    name, _, rest = spec.partition("=")
    kind, _, binary = rest.partition(":")
    if not name or kind not in ("specd", "specd-plain", "llama", "llama+draft") or not binary:
        sys.exit(f"serve_ab: '{spec}' is not NAME=KIND:BINARY with KIND specd, specd-plain, llama or llama+draft")
    args.specd = args.llama_server = binary
    args.calibration = None  # each specd server its own calibration cache (serve_bench.calibration_dir)
    if name in args.calibration_from:  # which starts as a copy of the one given
        args.calibration = tempfile.mkdtemp(prefix="specd-ab-calibration-")
        atexit.register(shutil.rmtree, args.calibration, True)
        for f in os.listdir(args.calibration_from[name]):
            shutil.copy(os.path.join(args.calibration_from[name], f), args.calibration)
    port, proc, cmd = serve_bench.start_server(args, kind, args.prompt_list[0], args.temp)
    if port is None:
        sys.exit(f"serve_ab: {name} did not start: {' '.join(cmd)}")
    return name, port, proc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("servers", nargs="+")
    serve_bench.add_server_args(ap)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--calibration-from", action="append", default=[], metavar="NAME=DIR",
                    help="specd server NAME starts from a copy of the calibration cache directory DIR "
                         "(what earlier runs left) instead of an empty one")
    args = ap.parse_args()
    args.calibration_from = dict(x.partition("=")[::2] for x in args.calibration_from)
    args.prompt_list = serve_bench.read_prompts(args.prompts)
    servers = []
    try:
        for spec in args.servers:
            servers.append(start(args, spec))
        rates = {name: [] for name, _, _ in servers}
        drafts = {name: [0, 0] for name, _, _ in servers}  # drafted, accepted: a row that drafts nothing shows it
        for r in range(args.rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for name, port, _ in order:
                results, errors, wall = serve_bench.run_round(port, args.prompt_list, args.clients, args.requests,
                                                              args.n, args.temp)
                if errors:
                    sys.exit(f"serve_ab: {name}: {errors[0]}")
                rates[name].append(sum(x[0] for x in results) / wall)
                drafts[name][0] += sum(x[3] for x in results)
                drafts[name][1] += sum(x[4] for x in results)
            print("round %d: %s" % (r + 1, "  ".join("%s %.1f" % (n, rates[n][-1]) for n, _, _ in servers)),
                  flush=True)
        first = servers[0][0]
        print(f"C={args.clients} T={args.temp:g}, {args.rounds} rounds of {args.requests} requests per client, "
              f"aggregate tokens/s (median) and the median of each round's ratio to {first}:")
        for name, _, _ in servers:
            ratios = [a / b for a, b in zip(rates[name], rates[first])]
            drafted, accepted = drafts[name]
            print("  %-10s %6.1f t/s  x%.3f  (ratios %.3f..%.3f)  drafted %d, accepted %s" % (
                  name, statistics.median(rates[name]), statistics.median(ratios), min(ratios), max(ratios),
                  drafted, "%.0f%%" % (100.0 * accepted / drafted) if drafted else "-"))
    finally:
        for _, _, proc in servers:
            serve_bench.stop_server(proc)


if __name__ == "__main__":
    main()
