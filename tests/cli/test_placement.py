#!/usr/bin/env python3
"""Where the layers go, as a user asks with llama.cpp's flags, on a machine without a GPU.

    test_placement.py cli SPECD MODELS_DIR
        --list-devices (run and serve), -ngl on a CPU-only build (one note, the same output),
        unknown devices and bad values (exit 2, one line naming them), the placement in --json.
    test_placement.py rpc SPECD MODELS_DIR RPC_SERVER
        llama.cpp's distributed backend on 127.0.0.1: two rpc-server processes hold the target's
        layers (--rpc), the draft stays local; the output with speculation on equals the local
        run's, greedy and sampled. Exits 77 (skipped) when rpc-server was not built (llama.cpp
        without GGML_RPC).
"""
import json
import os
import socket
import subprocess
import sys
import time

import test_cli
from test_cli import SKIP, check, failures


def run(args, timeout=300):
    # One thread: ggml's threads spin at barriers, and on a busy 2-core CI machine two crawl.
    if args[1] == "run" and "--list-devices" not in args:
        args = args[:2] + ["-t", "1", "--calibration-cache", "off"] + args[2:]
    return test_cli.without_hidden_gpu_line(
        subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout))


def run_json(specd, args):
    r = run([specd, "run"] + args + ["--json"])
    try:
        return r, json.loads(r.stdout)
    except ValueError:
        return r, None


def expect_usage_error(specd, name, args, needles):
    r = run([specd, "run"] + args)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and all(n in r.stderr for n in needles)
    check(name, ok, f"rc={r.returncode} stderr={r.stderr!r}")


def cli(specd, models):
    target = os.path.join(models, "target.gguf")
    draft = os.path.join(models, "draft.gguf")
    base = ["-m", target, "-md", draft, "-p", "the cat sat on the", "-n", "24", "--temp", "0"]

    r = run([specd, "run", "--list-devices"])
    check("run --list-devices: llama.cpp's format", r.returncode == 0 and r.stdout.startswith("Available devices:\n"),
          f"rc={r.returncode} out={r.stdout!r} err={r.stderr!r}")
    gpu = "(none)" not in r.stdout
    r2 = run([specd, "serve", "--list-devices"])
    check("serve --list-devices lists the same", r2.returncode == 0 and r2.stdout == r.stdout,
          f"rc={r2.returncode} out={r2.stdout!r}")

    r_cpu, cpu = run_json(specd, base)
    check("placement in --json", cpu is not None and cpu["placement"]["target"]["n_layers"] > 0 and
          cpu["placement"]["draft"]["n_layers"] > 0, f"{r_cpu.stderr!r} {cpu and cpu.get('placement')}")
    if not gpu:
        check("CPU-only: both models on the CPU",
              cpu["placement"]["target"] == {"devices": "CPU", "n_layers": cpu["placement"]["target"]["n_layers"],
                                             "n_layers_offloaded": 0}, str(cpu["placement"]))
        r, ngl = run_json(specd, base + ["-ngl", "99", "-ngld", "99"])
        notes = [l for l in r.stderr.splitlines() if l.startswith("specd: note:")]
        check("CPU-only -ngl: one note, not an error", r.returncode == 0 and len(notes) == 1 and "CPU" in notes[0]
              and "GPU=cuda" in notes[0], f"rc={r.returncode} stderr={r.stderr!r}")
        check("CPU-only -ngl: the same output", ngl is not None and ngl["text"] == cpu["text"])
        r = run([specd, "run"] + base)
        check("no -ngl: no note", "note:" not in r.stderr, r.stderr)
        check("on the CPU the plain output has no placement line", "placement:" not in r.stderr, r.stderr)
    expect_usage_error(specd, "unknown --device", base + ["--device", "CUDA9"],
                       ["--device: unknown device 'CUDA9'", "devices there are"])
    expect_usage_error(specd, "unknown --device-draft", base + ["--device-draft", "Vulkan7"],
                       ["--device-draft: unknown device 'Vulkan7'"])
    expect_usage_error(specd, "bad -ngl", base + ["-ngl", "many"], ["-ngl", "'many'"])
    # a build without llama.cpp's RPC backend says so instead, naming the server too
    expect_usage_error(specd, "unreachable --rpc", base + ["--rpc", "127.0.0.1:1"], ["127.0.0.1:1", "rpc-server"])
    if not gpu:
        serve_note(specd, target, draft)
    wrong_service(specd, base)
    bench(specd, target, draft)
    r = run([specd, "run", "--rpc", "127.0.0.1:1", "--list-devices"])
    check("--list-devices with an unreachable --rpc: exit 2", r.returncode == 2 and "127.0.0.1:1" in r.stderr,
          f"rc={r.returncode} {r.stderr!r}")


def serve_note(specd, target, draft):
    """specd serve -ngl 99 on a CPU-only build: the note once, then it serves (SIGTERM ends it)."""
    import threading
    proc = subprocess.Popen([specd, "serve", "-m", target, "-md", draft, "-t", "1", "--port", "0", "-ngl", "99"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    watchdog = threading.Timer(60, proc.kill)  # a serve that never says it listens fails, never hangs
    watchdog.start()
    lines = []
    try:
        while True:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "listening on" in line:
                break
    finally:
        watchdog.cancel()
        proc.terminate()
        proc.wait(timeout=30)
    notes = [l for l in lines if l.startswith("specd: note:") and "CPU" in l]
    check("serve -ngl on a CPU-only build: one note, then it serves", len(notes) == 1 and
          any("listening on" in l for l in lines), "".join(lines))


def wrong_service(specd, base):
    """A port where something else listens (here: a server that answers HTTP) is an error, not a
    hang or an abort inside llama.cpp's RPC client."""
    import threading
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def answer():
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
    r = run([specd, "run"] + base + ["--rpc", endpoint])
    lines = r.stderr.strip().splitlines()
    check("--rpc at a port that is no rpc-server: an error naming it", r.returncode == 2 and len(lines) == 1
          and endpoint in r.stderr, f"rc={r.returncode} {r.stderr!r}")
    listener.close()


def bench(specd, target, draft):
    """specd bench gives the placement flags to llama.cpp's tools as to specd: stand-ins for the tools
    that keep their command lines."""
    import tempfile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_cli import FAKE_TOOLS
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "args.log")
        for name, body in FAKE_TOOLS.items():
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(f'#!/bin/sh\necho "$(basename "$0") $*" >> {log}\n{body}\n')
            os.chmod(path, 0o755)
        prompts = os.path.join(tmp, "prompts.txt")
        with open(prompts, "w") as f:
            f.write("the little girl\n")
        r = run([specd, "bench", "--pair", target, draft, "--llama-bin", tmp, "--prompts", prompts, "-n", "8",
                 "--temps", "0", "--sweep", "3", "--out", os.path.join(tmp, "out"), "-t", "1",
                 "-ngl", "0", "-ngld", "0", "--device", "none", "--device-draft", "none"])
        lines = open(log).read().splitlines() if os.path.exists(log) else []
        completion = [l for l in lines if l.startswith("llama-completion ")]
        speculative = [l for l in lines if l.startswith("llama-speculative")]
        check("bench passes -ngl and --device to llama-completion",
              r.returncode == 0 and completion and all(" -ngl 0 " in l and " --device none" in l and "-ngld" not in l
                                                       for l in completion), f"rc={r.returncode} {lines} {r.stderr[-300:]}")
        check("bench passes the draft's -ngld and --device-draft to the speculative tools",
              speculative and all(" -ngld 0 " in l and " --device-draft none" in l for l in speculative), str(lines))
        report_path = os.path.join(tmp, "out", "benchmarks.md")
        report = open(report_path).read() if os.path.exists(report_path) else ""
        check("the bench report says where the layers were and names the devices",
              "Placement (given to every tool): -ngl 0 -ngld 0 --device none --device-draft none. "
              "Available devices:" in report, report[:600])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_rpc_server(binary):
    """Starts one rpc-server on a free port; returns (process, "127.0.0.1:PORT") once it listens."""
    port = free_port()
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"rpc-server on port {port} did not start")


def rpc(specd, models, server):
    if not os.access(server, os.X_OK):
        print(f"skipped: llama.cpp's rpc-server is not built ({server}): scripts/deps.sh builds llama.cpp with "
              "GGML_RPC=ON and rpc-server beside it")
        return SKIP
    target = os.path.join(models, "target.gguf")
    draft = os.path.join(models, "draft.gguf")
    servers = []
    try:
        servers = [start_rpc_server(server) for _ in range(2)]
        endpoints = ",".join(e for _, e in servers)
        # --draft-fixed: the draft proposes 4 tokens every step, so verification really runs remotely
        spec = ["-m", target, "-md", draft, "-p", "the cat sat on the", "-n", "48", "--draft-fixed", "--draft-max", "4"]
        for temp in (["--temp", "0"], ["--temp", "1", "--seed", "5"]):
            _, local = run_json(specd, spec + temp)
            r, remote = run_json(specd, spec + temp + ["--rpc", endpoints])
            name = "greedy" if temp[1] == "0" else "temperature 1"
            check(f"{name}: output over two rpc-servers equals the local run", remote is not None and local is not None
                  and remote["text"] == local["text"], f"rc={r.returncode} stderr={r.stderr[-500:]!r}")
            if remote:
                s = remote["speculative"]
                check(f"{name}: speculation on (drafts verified)", s["n_drafted"] > 0 and s["n_accepted"] > 0, str(s))
                place = remote["placement"]
                check(f"{name}: the target on both servers, the draft local",
                      place["target"]["devices"].count("RPC") == 2 and
                      place["target"]["n_layers_offloaded"] == place["target"]["n_layers"] + 1 and
                      place["draft"]["devices"] == "CPU", str(place))
        _, alone = run_json(specd, ["-m", target, "-p", "the cat sat on the", "-n", "48", "--temp", "0",
                                    "--spec", "none"])
        _, remote = run_json(specd, spec + ["--temp", "0", "--rpc", endpoints])
        check("greedy over rpc with speculation equals the target alone", alone and remote and
              alone["text"] == remote["text"])
        r = run([specd, "run"] + spec + ["--temp", "0", "--rpc", endpoints])
        check("plain output names the placement", r.returncode == 0 and
              "placement: target RPC" in r.stderr and ", draft CPU\n" in r.stderr, r.stderr[-600:])
        r, split = run_json(specd, spec + ["--temp", "0", "--rpc", endpoints, "-ngl", "1"])
        check("-ngl 1 over rpc: one layer remote, the same text",
              split is not None and split["placement"]["target"]["n_layers_offloaded"] == 1 and
              split["text"] == remote["text"], f"{r.stderr[-300:]!r}")
        # One slot with the target offloaded: each context keeps one sequence (a unified cache costs
        # every decode a check of all sequence pairs), so a forced tree is drafted as a chain there,
        # while on the CPU it is a tree; the text is the target's either way.
        tree = ["-m", target, "-md", draft, "-p", "the cat sat on the", "-n", "48", "--temp", "0", "--draft-tree", "on"]
        _, local_tree = run_json(specd, tree)
        r, remote_tree = run_json(specd, tree + ["--rpc", endpoints])
        check("--draft-tree on: trees on the CPU, chains with one slot offloaded, the same text",
              local_tree is not None and remote_tree is not None and alone is not None
              and local_tree["speculative"]["n_tree_steps"] > 0 and remote_tree["speculative"]["n_tree_steps"] == 0
              and remote_tree["speculative"]["n_drafted"] > 0 and remote_tree["text"] == alone["text"],
              f"rc={r.returncode} {r.stderr[-300:]!r}")
        # The default (adaptive) length with the target on rpc-servers alone: planned step by step
        # while a change of pass size costs little (these servers run on the CPU; one with a GPU
        # would make it dear, and the lengths held); --draft-hold on holds them a spell at a time.
        adaptive = ["-m", target, "-md", draft, "-p", "the cat sat on the", "-n", "64", "--temp", "0"]
        _, local_default = run_json(specd, adaptive)
        _, planned = run_json(specd, adaptive + ["--rpc", endpoints])
        r, held = run_json(specd, adaptive + ["--rpc", endpoints, "--draft-hold", "on"])
        # the first spell holds 3 for 16 steps (then trials of other lengths, and shorter drafts as
        # the last tokens leave less room: how many depends on the run's timings)
        lengths = held["speculative"]["draft_lengths"] if held else []
        check("rpc-servers on a CPU: the default plans; --draft-hold on holds (3 first); the target's text",
              local_default is not None and held is not None and planned is not None
              and local_default["speculative"]["costs"]["held_draft_length"] == -1
              and planned["speculative"]["costs"]["held_draft_length"] == -1
              and held["speculative"]["costs"]["held_draft_length"] >= 0
              and len(lengths) > 3 and lengths[3] >= 6  # 3's first trial of 8 steps, less the plain one
              and held["text"] == local_default["text"] == planned["text"],
              f"rc={r.returncode} {held and held['speculative']} {r.stderr[-300:]!r}")
        r = run([specd, "run", "-m", target, "-md", draft, "-p", "the cat", "-n", "8", "--spec", "draft,suffix",
                 "--spec-suffix-branches", "3", "--rpc", endpoints])
        check("suffix trees with one slot offloaded: refused, saying why and what to use",
              r.returncode != 0 and "keeps one sequence" in r.stderr and "suffix_branches 1" in r.stderr,
              f"rc={r.returncode} {r.stderr[-300:]!r}")
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
    return 0


def main():
    mode = sys.argv[1]
    rc = cli(*sys.argv[2:4]) if mode == "cli" else rpc(*sys.argv[2:5])
    if rc == SKIP:
        sys.exit(SKIP)
    print(f"{test_cli.passed} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
