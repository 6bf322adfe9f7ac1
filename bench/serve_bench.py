#!/usr/bin/env python3
"""Serving benchmark: specd serve against llama-server, C concurrent clients over HTTP.

  bench/serve_bench.py --specd build/bin/specd --llama-server deps/llama/build-tools/bin/llama-server \\
      --target T.gguf --draft D.gguf [--prompts FILE] [--clients 1,2,4,8] [--temps 0,0.8]
      [--requests 2] [-n 128] [--threads 2] [--parallel 4] [--draft-max 3] [--gpu-layers N]
      [--gpu-layers-draft N] [--fixed 1,3] [--out REPORT.md] [--plot PLOT.svg]

`specd bench --serve` runs this same script (embedded in the program) with its own flags.

Servers (each started fresh per temperature and client count, one at a time; specd's calibration
cache is a directory of this run's own, so earlier runs do not decide how it drafts):
  specd          specd serve -np P -m T -md D (adaptive speculation)
  llama          llama-server -np P -m T              (no speculation)
  llama+draft    llama-server -np P -m T -md D --draft-max K
  specd-fixed-K  (--fixed) specd serve as above, every request asking for exactly K drafts
                 ("speculative.n_min" = "speculative.n_max" = K), with a calibration cache of its
                 own: the best fixed length at each load, against which the default is reported
Each client sends `--requests` prompts in turn (streaming POST /completion, n_predict N, the
temperature, seed 1). Reported per server, temperature and C: aggregate generated tokens/s (all
tokens / wall time of the round), per-request tokens/s (median), time to first token p50/p99,
draft acceptance (drafted tokens accepted, from the final event's timings), peak RSS of the
server. Measurements, not a test: run it on a quiet machine.
"""
import argparse
import atexit
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            ok = c.getresponse().status == 200
            c.close()
            if ok:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def peak_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def fixed_length(kind):
    """K of a specd-fixed-K server, else None."""
    prefix = "specd-fixed-"
    return int(kind[len(prefix):]) if kind.startswith(prefix) and kind[len(prefix):].isdigit() else None


def request_fields(kind):
    """What every request to a server of this kind adds to the body."""
    k = fixed_length(kind)
    return {"speculative.n_min": k, "speculative.n_max": k} if k else {}


def one_request(port, prompt, n, temp, extra=None):
    """Streams one completion; returns (tokens, seconds, ttft seconds, drafted, accepted)."""
    body = dict({"prompt": prompt, "n_predict": n, "temperature": temp, "seed": 1, "stream": True,
                 "ignore_eos": True, "cache_prompt": True}, **(extra or {}))
    body = json.dumps(body)
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/completion", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    ttft, final = None, None
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            for line in event.split(b"\n"):
                if not line.startswith(b"data: "):
                    continue
                data = json.loads(line[6:])
                if ttft is None and data.get("content"):
                    ttft = time.time() - t0
                if data.get("stop"):
                    final = data
    c.close()
    seconds = time.time() - t0
    timings = (final or {}).get("timings", {})
    tokens = (final or {}).get("tokens_predicted", timings.get("predicted_n", 0))
    return tokens, seconds, ttft if ttft is not None else seconds, timings.get("draft_n", 0), \
        timings.get("draft_n_accepted", 0)


def run_round(port, prompts, clients, requests, n, temp, extra=None):
    results, errors = [], []
    lock = threading.Lock()

    def client(k):
        for r in range(requests):
            prompt = prompts[(k * requests + r) % len(prompts)]
            try:
                out = one_request(port, prompt, n, temp, extra)
                with lock:
                    results.append(out)
            except Exception as e:  # a refused or failed request is reported, not hidden
                with lock:
                    errors.append(str(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors, time.time() - t0


def calibration_dir(args, kind="specd"):
    """The calibration cache of this benchmark's specd servers: a directory of its own, shared by
    the servers it starts in turn (as one user's would be) but not by earlier runs, whose file would
    otherwise decide how this run drafts (docs/benchmarks-serve.md, 2026-11-25). The fixed lengths'
    servers share another: what they learn must not decide how the default drafts."""
    attr = "calibration_fixed" if fixed_length(kind) else "calibration"
    if not getattr(args, attr, None):
        setattr(args, attr, tempfile.mkdtemp(prefix="specd-bench-calibration-"))
        atexit.register(shutil.rmtree, getattr(args, attr), True)
    return getattr(args, attr) + "/"


def placement(args, with_draft):
    """-ngl / -ngld as given, the same for every server (nothing given: the CPU)."""
    flags = []
    if args.gpu_layers is not None:
        flags += ["-ngl", str(args.gpu_layers)]
    if with_draft and args.gpu_layers_draft is not None:
        flags += ["-ngld", str(args.gpu_layers_draft)]
    return flags


def server_command(args, kind, port):
    if kind.startswith("specd"):  # specd-plain: no draft model, so no speculation (a control)
        drafts = kind != "specd-plain"
        draft = ["-md", args.draft] if drafts else []
        return [args.specd, "serve", "--port", str(port), "-m", args.target] + draft + [
            "-np", str(args.parallel), "-t", str(args.threads), "-c", str(args.ctx), "--queue", "256",
            "--calibration-cache", calibration_dir(args, kind)] + placement(args, drafts)
    cmd = [args.llama_server, "--port", str(port), "-m", args.target, "-np", str(args.parallel), "-t",
           str(args.threads), "-c", str(args.ctx), "--no-webui", "-lv", "0"] + placement(args, kind == "llama+draft")
    if kind == "llama+draft":
        # --spec-type: the pinned llama-server loads -md without it but never drafts (its types
        # default to none unless the draft's GGUF names a head), so without it this row was plain.
        cmd += ["-md", args.draft, "--spec-type", "draft-simple", "--spec-draft-n-max", str(args.draft_max),
                "-td", str(args.threads)]
    return cmd


def start_server(args, kind, warm_prompt, temp):
    """Starts one server and warms it with a short request (not counted): (port, process, command),
    with port None (and nothing left running) when it did not start."""
    port = free_port()
    cmd = server_command(args, kind, port)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_ready(port, proc):
            stop_server(proc)
            return None, proc, cmd
        one_request(port, warm_prompt, 8, temp, request_fields(kind))
    except BaseException:
        stop_server(proc)
        raise
    return port, proc, cmd


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def add_server_args(ap):
    """The models, prompts and server settings every serving benchmark takes (serve_ab.py too)."""
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "bench",
                                                      "prompts.txt"))
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--draft-max", type=int, default=3)
    ap.add_argument("--gpu-layers", type=int, help="-ngl for every server (default: none)")
    ap.add_argument("--gpu-layers-draft", type=int, help="-ngld for every server that loads the draft")


def read_prompts(path):
    return [l.strip() for l in open(path) if l.strip()]


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specd", required=True)
    ap.add_argument("--llama-server")
    add_server_args(ap)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--temps", default="0,0.8")
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--servers", default="specd,llama,llama+draft")
    ap.add_argument("--fixed", default="", help="draft lengths: a specd-fixed-K server for each")
    ap.add_argument("--out", help="markdown report")
    ap.add_argument("--plot", help="SVG plot of aggregate tokens/s (needs gnuplot)")
    args = ap.parse_args()
    prompts = read_prompts(args.prompts)
    kinds = [k for k in args.servers.split(",") if k.startswith("specd") or args.llama_server]
    kinds += [f"specd-fixed-{int(k)}" for k in args.fixed.split(",") if k]
    rows = []
    for temp in [float(t) for t in args.temps.split(",")]:
        for clients in [int(c) for c in args.clients.split(",")]:
            for kind in kinds:
                port, proc, cmd = start_server(args, kind, prompts[0], temp)
                if port is None:
                    rows.append((kind, temp, clients, "server did not start"))
                    print(f"{kind}: the server did not start: {' '.join(cmd)}", file=sys.stderr)
                    continue
                try:
                    results, errors, wall = run_round(port, prompts, clients, args.requests, args.n, temp,
                                                      request_fields(kind))
                    rss = peak_rss_mb(proc.pid)
                finally:
                    stop_server(proc)
                tokens = sum(r[0] for r in results)
                drafted = sum(r[3] for r in results)
                accepted = sum(r[4] for r in results)
                if kind == "llama+draft" and results and not drafted:
                    print("llama+draft: llama-server drafted nothing (check its --spec-type): this row "
                          "is llama-server without speculation", file=sys.stderr)
                row = (kind, temp, clients, tokens / wall if wall > 0 else 0.0,
                       statistics.median([r[0] / r[1] for r in results]) if results else float("nan"),
                       pct([r[2] for r in results], 0.5) * 1000, pct([r[2] for r in results], 0.99) * 1000,
                       accepted / drafted if drafted else float("nan"), rss, len(errors))
                rows.append(row)
                print("%-12s T=%-4g C=%d  aggregate %6.1f t/s  per-request %6.1f t/s  TTFT p50 %6.0f ms p99 %6.0f ms  "
                      "acceptance %5.2f  RSS %5.0f MB  errors %d" % row, flush=True)
    if args.plot:
        draw_plot(args, rows)
    if args.out:
        write_report(args, rows)
    return 0


def ratios(rows, others):
    """specd's aggregate over the best of the servers `others` picks, at each (temperature, clients):
    {key: (ratio, that server's kind)}."""
    best, ours = {}, {}
    for r in rows:
        if len(r) == 4:
            continue
        key = (r[1], r[2])
        if r[0] == "specd":
            ours[key] = r[3]
        elif others(r[0]) and r[3] > best.get(key, (0.0, ""))[0]:
            best[key] = (r[3], r[0])
    return {k: (ours[k] / best[k][0], best[k][1]) for k in ours if k in best and best[k][0] > 0}


def write_report(args, rows):
    with open(args.out, "w") as f:
        f.write(f"Settings: {os.path.basename(args.target)} + {os.path.basename(args.draft)}, -np {args.parallel}, "
                f"-c {args.ctx}, -t {args.threads}, n_predict {args.n}, {args.requests} requests per client, "
                f"llama-server's draft {args.draft_max}"
                + (f", placement {' '.join(placement(args, True))}" if placement(args, True) else "")
                + f", {time.strftime('%Y-%m-%d %H:%M')}\n\n")
        f.write("| server | temperature | clients | aggregate t/s | per-request t/s | TTFT p50 ms | TTFT p99 ms "
                "| acceptance | peak RSS MB | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            if len(r) == 4:
                f.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | | | | | | |\n")
            else:
                f.write("| %s | %g | %d | %.1f | %.1f | %.0f | %.0f | %.2f | %.0f | %d |\n" % r)
        q = ratios(rows, lambda kind: kind.startswith("llama"))
        if q:
            f.write("\nspecd's aggregate tokens/s against the better llama-server:\n\n| temperature | clients | ratio |\n"
                    "|---|---|---|\n")
            for (temp, clients), (v, _) in sorted(q.items()):
                f.write(f"| {temp:g} | {clients} | {v:.2f}x |\n")
        elif not args.llama_server:
            f.write("\n(llama-server was not measured: make bench-deps builds it.)\n")
        q = ratios(rows, lambda kind: fixed_length(kind) is not None)
        if q:
            f.write("\nspecd's default against its best fixed length (--fixed; every request asking for exactly "
                    "k drafts):\n\n| temperature | clients | best fixed | ratio |\n|---|---|---|---|\n")
            for (temp, clients), (v, kind) in sorted(q.items()):
                f.write(f"| {temp:g} | {clients} | {fixed_length(kind)} | {v:.2f}x |\n")
        if args.plot and os.path.exists(args.plot):
            f.write(f"\n![aggregate tokens/s]({os.path.basename(args.plot)})\n")
        elif args.plot:
            f.write("\n(No plot: gnuplot is not installed; make bench-deps installs it.)\n")


def draw_plot(args, rows):
    """Aggregate tokens/s against the number of clients, a line per server and temperature (SVG)."""
    import shutil
    if os.path.exists(args.plot):
        os.unlink(args.plot)  # an old run's plot must not pass for this one's
    if not shutil.which("gnuplot"):
        print("serve_bench: plot skipped: gnuplot not found (make bench-deps installs it)", file=sys.stderr)
        return
    lines = {}
    for r in rows:
        if len(r) != 4:
            lines.setdefault(f"{r[0]} t={r[1]:g}", []).append((r[2], r[3]))
    script = [f"set terminal svg size 720,420 dynamic background '#ffffff'", f"set output '{args.plot}'",
              "set title 'Aggregate generated tokens/s'", "set xlabel 'concurrent clients'",
              "set ylabel 'tokens/s'", "set key outside right", "set logscale x 2", "set grid"]
    plots, data = [], []
    for name, points in lines.items():
        plots.append(f"'-' using 1:2 with linespoints title '{name}'")
        data.append("\n".join(f"{c} {v:.2f}" for c, v in sorted(points)) + "\ne")
    script.append("plot " + ", ".join(plots))
    text = "\n".join(script + data) + "\n"
    done = subprocess.run(["gnuplot"], input=text, text=True, capture_output=True)
    if done.returncode != 0:
        print(f"serve_bench: plot failed: gnuplot exit status {done.returncode}: {done.stderr[-300:]}",
              file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
