#!/usr/bin/env python3
"""specd run with its layers on a GPU: what holds there, checked where a GPU is visible.

    test_gpu.py SPECD MODELS_DIR

The rest of the suite runs with the GPU hidden (tests/CMakeLists.txt sets CUDA_VISIBLE_DEVICES and
GGML_VK_VISIBLE_DEVICES empty for it): it asserts bit-for-bit output, which GPU kernels do not give (a token's logits
depend on the size of its pass there). This test sees the GPU and checks what a user gets on one:
the layers offloaded and reported, the run complete with speculation at work (chains, under
--draft-tree auto and forced: one slot on a GPU keeps one sequence a context), invariance reported
off with the reason, the V cache in llama.cpp's f16 (f32 buys nothing there), and -ngl 0 in the
same build back on the CPU with invariance on. Exits 77 (skipped) where specd lists no GPU device.
"""
import json
import subprocess
import sys

import test_cli
from test_cli import SKIP, check, failures


def run_json(specd, args):
    r = subprocess.run([specd, "run"] + args + ["--json", "--calibration-cache", "off"], capture_output=True,
                       text=True, errors="replace", timeout=300)
    try:
        return r, json.loads(r.stdout)
    except ValueError:
        return r, None


def main():
    specd, models = sys.argv[1], sys.argv[2]
    listed = subprocess.run([specd, "run", "--list-devices"], capture_output=True, text=True, timeout=120)
    devices = [line.strip() for line in listed.stdout.splitlines()[1:] if line.strip() and line.strip() != "(none)"]
    if listed.returncode != 0 or not devices:
        print("skipped: specd lists no GPU device (this test checks specd on a GPU: build with make GPU=cuda "
              "on a machine with one)")
        return SKIP
    print(f"devices: {devices}")
    common = ["-m", f"{models}/target.gguf", "-p", "Once upon a time", "-n", "48", "--temp", "0", "--seed", "7",
              "--ignore-eos"]
    r, out = run_json(specd, common + ["-md", f"{models}/draft.gguf", "-ngl", "99", "-ngld", "99"])
    check("a speculative run with every layer on the GPU completes", r.returncode == 0 and out is not None
          and out.get("n_predicted") == 48, f"rc={r.returncode} {r.stderr[-600:]}")
    if out is None:
        return 1
    placement = out.get("placement", {})
    target = placement.get("target", {})
    check("the target's layers are on the GPU and the run says which", target.get("devices") not in (None, "CPU")
          and target.get("n_layers_offloaded", 0) >= target.get("n_layers", 1), json.dumps(placement))
    spec = out.get("speculative", {})
    check("the draft drafts there, chains under --draft-tree auto (trees lost to chains on GPUs)",
          spec.get("n_steps", 0) > 0 and spec.get("n_drafted", 0) > 0 and spec.get("n_tree_steps") == 0,
          json.dumps(spec))
    r, forced = run_json(specd, common + ["-md", f"{models}/draft.gguf", "-ngl", "99", "-ngld", "99",
                                          "--draft-tree", "on"])
    check("a forced tree is drafted as a chain with one slot on the GPU (one sequence a context)",
          r.returncode == 0 and forced is not None and forced["speculative"].get("n_tree_steps") == 0
          and forced["speculative"].get("n_drafted", 0) > 0, f"rc={r.returncode} {r.stdout[-400:]}")
    inv = out.get("batch_invariant", {})
    check("invariance is reported off, and why", inv.get("invariant") is False
          and "GPU kernels are not verified batch-invariant" in (inv.get("note") or ""), json.dumps(inv))
    check("the V cache is llama.cpp's f16 on the GPU", "V f16" in (inv.get("setting") or ""), json.dumps(inv))
    r, cpu = run_json(specd, common + ["-md", f"{models}/draft.gguf", "-ngl", "0", "-ngld", "0", "-t", "2"])
    cpu_inv = (cpu or {}).get("batch_invariant", {})
    check("-ngl 0 in the same build: the CPU, invariant, V f32", r.returncode == 0 and cpu is not None
          and cpu["placement"]["target"]["n_layers_offloaded"] == 0 and cpu_inv.get("invariant") is True
          and "V f32" in (cpu_inv.get("setting") or ""), f"rc={r.returncode} {json.dumps(cpu_inv)} {r.stderr[-400:]}")
    print(f"{test_cli.passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
