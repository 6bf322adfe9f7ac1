#!/usr/bin/env python3
"""scripts/gpu_bench.sh, the parts that need no GPU: its arguments, its refusal on a machine with
no NVIDIA GPU, and the report it writes from a run's folder (--report-from).

    test_gpu_bench.py SCRIPT
"""
import os
import re
import subprocess
import sys
import tempfile

failures = []


def verdict():
    """Says how the checks went; the exit status (1: some failed)."""
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    print("all passed")
    return 0


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def run(script, args, path=None, extra_env=None):
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    env.update(extra_env or {})
    return subprocess.run(["/bin/bash", script] + args, capture_output=True, text=True, timeout=60, env=env)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        # a PATH with the shell's tools but no nvidia-smi
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        for tool in ("nproc", "sed", "date", "uname", "head", "cat", "mkdir", "rm", "mv", "dirname", "tail"):
            for d in ("/usr/bin", "/bin"):
                if os.path.exists(os.path.join(d, tool)):
                    os.symlink(os.path.join(d, tool), os.path.join(bin_dir, tool))
                    break
        r = run(script, ["--out", os.path.join(tmp, "out"), "--report", os.path.join(tmp, "r.md")], path=bin_dir)
        check("no GPU: exit 2 and say so", r.returncode == 2 and "no NVIDIA GPU visible" in r.stderr
              and not os.path.exists(os.path.join(tmp, "r.md")), f"rc={r.returncode} {r.stderr}")
        # --heads is an argument it knows: it gets as far as the GPU check
        r = run(script, ["--heads", "--no-tests", "--out", os.path.join(tmp, "out"), "--report",
                         os.path.join(tmp, "r.md")], path=bin_dir)
        check("--heads is accepted (no GPU: exit 2 and say so)", r.returncode == 2
              and "no NVIDIA GPU visible" in r.stderr and "unknown argument" not in r.stderr, f"rc={r.returncode} {r.stderr}")
        # --big too (a third, GPU-shaped pair)
        r = run(script, ["--big", "--no-tests", "--out", os.path.join(tmp, "out"), "--report",
                         os.path.join(tmp, "r.md")], path=bin_dir)
        check("--big is accepted (no GPU: exit 2 and say so)", r.returncode == 2
              and "no NVIDIA GPU visible" in r.stderr and "unknown argument" not in r.stderr, f"rc={r.returncode} {r.stderr}")
        # --serve too (serving on the GPU after step 4)
        r = run(script, ["--serve", "--big", "--no-tests", "--out", os.path.join(tmp, "out"), "--report",
                         os.path.join(tmp, "r.md")], path=bin_dir)
        check("--serve is accepted (no GPU: exit 2 and say so)", r.returncode == 2
              and "no NVIDIA GPU visible" in r.stderr and "unknown argument" not in r.stderr, f"rc={r.returncode} {r.stderr}")
        # a GPU, but not what specd's build needs, and no apt: said before any build
        gpu_bin = os.path.join(tmp, "gpubin")
        os.makedirs(gpu_bin)
        for tool in os.listdir(bin_dir):
            os.symlink(os.readlink(os.path.join(bin_dir, tool)), os.path.join(gpu_bin, tool))
        write(os.path.join(gpu_bin, "nvidia-smi"), "#!/bin/sh\necho 'NVIDIA Fake, 1024 MiB, 1.0'\n")
        os.chmod(os.path.join(gpu_bin, "nvidia-smi"), 0o755)
        write(os.path.join(gpu_bin, "pkg-config"), "#!/bin/sh\n[ \"$2\" = jansson ]\n")  # finds jansson alone
        os.chmod(os.path.join(gpu_bin, "pkg-config"), 0o755)
        out_dir = os.path.join(tmp, "out-nodeps")
        r = run(script, ["--no-tests", "--out", out_dir, "--report", os.path.join(tmp, "r.md")], path=gpu_bin,
                extra_env={"SPECD_NO_APT": "1"})
        check("SPECD_NO_APT without libmicrohttpd and cmocka: exit 2 naming them, before building anything",
              r.returncode == 2 and "needs libmicrohttpd cmocka," in r.stderr and "nothing was built" in r.stderr
              and not os.path.exists(out_dir), f"rc={r.returncode} {r.stderr}")
        for args, needle in ((["--big=1"], "unknown argument '--big=1'"), (["--serve=1"], "unknown argument '--serve=1'"), (["--minutes", "0"], "--minutes"), (["--threads", "x"], "--threads"),
                             (["--frobnicate"], "unknown argument '--frobnicate'"), (["--models"], "--models"),
                             (["--heads=1"], "unknown argument '--heads=1'")):
            r = run(script, args)
            check(f"refuses {' '.join(args)}", r.returncode == 2 and needle in r.stderr, f"rc={r.returncode} {r.stderr}")
        # every function the steps call is defined before the first step runs: step 4b once named
        # diagnose (through declare -f) before its definition and ran nothing, on a real GPU run
        lines = open(script).read().splitlines()
        first_step = next(i for i, l in enumerate(lines) if l.startswith("# 1. the build"))
        late = [l.split("(")[0] for l in lines[first_step:] if re.match(r"^[a-z_]+\(\) \{", l)]
        check("every function is defined before the first step", not late, f"defined after step 1: {late}")
        # step 4's prompts fit in its timeout: a fresh H200 (CUDA build 316 s) left the big pair's
        # bench 156 s, 65 s a prompt: 2 prompts, not 3 killed at 141 s with no report
        probe = subprocess.run(["/bin/bash", "-c", 'eval "$(sed -n "/^bench_timeout()/p;/^prompts_that_fit()/,/^}/p" "$0")"; '
                                'for a in "156 65" "242 65" "188 65" "66 65" "30 70"; do set -- $a; '
                                'echo "$(prompts_that_fit $1 $2) $(bench_timeout $1)"; done', script],
                               capture_output=True, text=True)
        check("the bench runs the prompts that fit in its timeout", probe.stdout.split("\n")[:5] ==
              ["2 141", "3 227", "2 173", "1 51", "1 45"], probe.stdout + probe.stderr)
        r = run(script, ["--help"])
        check("--help says what it does", r.returncode == 0 and "--report-from" in r.stdout, r.stdout[:200])
        check("--help describes --heads and every step up to the exit codes", "--heads" in r.stdout
              and "5. with --heads" in r.stdout and "4b. where the time goes" in r.stdout and "Exit codes:" in r.stdout
              and "set -uo" not in r.stdout, r.stdout[-400:])
        check("--help describes --big", "--big: a third pair" in r.stdout and "target-big.gguf" in r.stdout, r.stdout)
        check("--help describes --serve", "--serve: after step 4, specd bench --serve" in r.stdout, r.stdout)

        run_dir = os.path.join(tmp, "run")
        write(os.path.join(run_dir, "gpu.txt"), "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\n")
        write(os.path.join(run_dir, "started.txt"), "2026-11-26 05:00 UTC, host, 16 CPU cores, budget 9 min\n")
        write(os.path.join(run_dir, "steps.tsv"), "llama.cpp CUDA build + tools\t201\tok\n"
              "tests (ctest on build-cuda)\t40\t97% tests passed, 1 tests failed out of 40\n")
        write(os.path.join(run_dir, "tests-failed.txt"), "8 - test_engine (Failed)\n")
        write(os.path.join(run_dir, "bench", "benchmarks.md"), "# specd benchmarks\n\nMachine: x.\n\n"
              "### target.gguf + draft.gguf, temperature 0\n\nPass costs of the target: T(1..16) ms 1 2\n\n"
              "| configuration | tokens/s |\n![tokens/s](g0-tps.png) ![acceptance by position](g0-accept.png)\n")
        report = os.path.join(tmp, "docs", "benchmarks-gpu.md")
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read() if os.path.exists(report) else ""
        check("--report-from writes the report", r.returncode == 0 and text.startswith("# specd on a GPU\n"), r.stderr)
        check("the report names the GPU and each step", "GPU: NVIDIA H100 80GB HBM3" in text
              and "| llama.cpp CUDA build + tools | 201 | ok |" in text
              and "| tests (ctest on build-cuda) | 40 | 97% tests passed" in text, text[:800])
        check("the report lists the failed tests", "- 8 - test_engine (Failed)" in text, text)
        check("the report carries the bench tables and pass costs, not the bench's title or plots",
              "### target.gguf + draft.gguf, temperature 0" in text and "T(1..16) ms" in text
              and "# specd benchmarks" not in text and ".png" not in text, text)
        check("a run without --heads has no heads section", "Drafting heads" not in text, text)
        check("a run without step 4b's diagnosis has no such section", "Where the time goes" not in text, text)

        # step 4b's diagnosis: its lines in a section of their own, after the pairs' tables
        write(os.path.join(run_dir, "diagnosis.txt"), "llama-completion, CUDA graphs on: 1281.0 tokens per second\n"
              "specd off, CUDA graphs on: 1097.0 tokens/s; target model (llama): 22 tokens in passes of several "
              "(123.2 ms), 255 passes of one (186.0 ms), graph reused 254 times\n")
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read() if os.path.exists(report) else ""
        at = text.find("## Where the time goes")
        check("the diagnosis in its own section after the pairs', as written", r.returncode == 0 and at >
              text.find("### target.gguf + draft.gguf") and "graph reused 254 times" in text[at:]
              and "CUDA graphs on: 1281.0" in text[at:], text[-800:])
        check("a diagnosis that names no target was on target.gguf", "(step 4b: target.gguf, one prompt" in text,
              text[at:at + 200])
        # with --big, step 4b ran on the big target: its first line names it, and the section says so
        diagnosis = open(os.path.join(run_dir, "diagnosis.txt")).read()
        write(os.path.join(run_dir, "diagnosis.txt"), "target: target-big.gguf\n" + diagnosis)
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read() if os.path.exists(report) else ""
        at = text.find("## Where the time goes")
        check("step 4b on the big target: named in its title, not in its lines", r.returncode == 0
              and "(step 4b: target-big.gguf, one prompt" in text and "target: " not in text[at:]
              and "graph reused 254 times" in text[at:], text[at:])
        check("with --big the introduction names the big pair, not both pairs",
              "on the big pair (--big: target-big.gguf and draft.gguf)" in text
              and "on both benchmark pairs" not in text, text[:600])
        write(os.path.join(run_dir, "diagnosis.txt"), diagnosis)

        # a run with --heads: its steps and specd bench --head's tables, after the pairs'
        with open(os.path.join(run_dir, "steps.tsv"), "a") as f:
            f.write("heads: making the models\t35\tok\nheads: specd bench --head, 1 prompt\t150\tok\n")
        write(os.path.join(run_dir, "heads", "benchmarks.md"), "# specd benchmarks\n\nMachine: y.\n\n"
              "### mtp-target.gguf + its MTP layers (mtp head), temperature 0\n\n"
              "| configuration | tokens/s | draft ms/token |\n| specd mtp, fixed 8 | 80.0 | 0.9 |\n"
              "![tokens/s](g0-tps.png) ![acceptance by position](g0-accept.png)\n"
              "(Plots skipped: no gnuplot.)\n")
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read() if os.path.exists(report) else ""
        heads_at = text.find("## Drafting heads")
        check("--report-from with the heads' run: the heads' steps in the table", r.returncode == 0
              and "| heads: making the models | 35 | ok |" in text
              and "| heads: specd bench --head, 1 prompt | 150 | ok |" in text, r.stderr + text[:1200])
        check("the heads' tables in their own section after the pairs', without title or plots",
              heads_at > text.find("### target.gguf + draft.gguf") > 0
              and text.find("### mtp-target.gguf + its MTP layers (mtp head)") > heads_at
              and "| specd mtp, fixed 8 | 80.0 | 0.9 |" in text and "# specd benchmarks" not in text
              and ".png" not in text and "Plots skipped" not in text, text)
        # a run with --serve: its step in the table and serve.md in its own section, without the plot
        with open(os.path.join(run_dir, "steps.tsv"), "a") as f:
            f.write("serving (specd bench --serve)\t120\tok\n")
        write(os.path.join(run_dir, "serve", "serve.md"), "Settings: target-big.gguf + draft.gguf, -np 4, placement "
              "-ngl 99 -ngld 99\n\n| server | temperature | clients | aggregate t/s |\n| specd | 0 | 4 | 900.0 |\n"
              "\n![aggregate tokens/s](serve.svg)\n")
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read() if os.path.exists(report) else ""
        serve_at = text.find("## Serving (--serve")
        check("--report-from with --serve: the step, and serve.md in its own section without its plot",
              r.returncode == 0 and "| serving (specd bench --serve) | 120 | ok |" in text and serve_at > 0
              and text.find("| specd | 0 | 4 | 900.0 |") > serve_at and "serve.svg" not in text, r.stderr + text[-1500:])
        r = run(script, ["--report-from", os.path.join(tmp, "nothing"), "--report", report])
        check("--report-from a folder with no run: exit 2", r.returncode == 2 and "steps.tsv" in r.stderr, r.stderr)
        os.remove(os.path.join(run_dir, "bench", "benchmarks.md"))
        r = run(script, ["--report-from", run_dir, "--report", report])
        text = open(report).read()
        check("a run whose benchmark did not run says so (and still carries the heads)", r.returncode == 0
              and "the benchmark did not run" in text and "(mtp head)" in text, r.stderr + text)
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
