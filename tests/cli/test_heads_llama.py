#!/usr/bin/env python3
"""The drafting heads against llama.cpp's own implementation of them (the pinned release's
llama-speculative-simple, built by `make bench-deps`): on the same tiny models, greedy, with the
same fixed draft length, specd and llama.cpp give the same text, and the same drafted tokens and
the same accepted counts step by step for the first steps. That is the evidence that specd feeds
each head what llama.cpp feeds it (the target's hidden states of the right positions, the head's
own state between draft tokens, the block layout).

    test_heads_llama.py SPECD MODELS_DIR LLAMA_SPECULATIVE_SIMPLE

Exits 77 (skipped) when llama-speculative-simple is not built.
"""
import os
import re
import subprocess
import sys
import tempfile

PROMPT = "Once upon a time"
N_PREDICT = 40
DRAFT = 4
STEPS = 6  # at least this many steps compared draft by draft (all but the last ones, where budgets differ)

HEADS = [  # (spec name, target, head file or None, llama.cpp --spec-type)
    ("mtp", "mtp-target.gguf", None, "draft-mtp"),
    ("mtp", "qwen35-target.gguf", None, "draft-mtp"),  # a hybrid target: recurrent state and MTP together
    ("eagle3", "head-target.gguf", "eagle3.gguf", "draft-eagle3"),
    ("dflash", "head-target.gguf", "dflash.gguf", "draft-dflash"),
    ("dspark", "head-target.gguf", "dspark.gguf", "draft-dspark"),
]

# Both tools with the same attention settings and threads, greedy.
COMMON = ["-p", PROMPT, "-n", str(N_PREDICT), "--temp", "0", "-t", "2", "-fa", "on", "-ctv", "f16"]

CANDIDATE = re.compile(r"draft candidate\s+0, pos\s+(\d+):\s+(\d+) ")
ACCEPTED = re.compile(r"accepted (\d+)/(\d+) draft tokens")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout, p.stderr.decode(errors="replace")


def llama_steps(tool, models, target, head, spec_type):
    cmd = [tool, "-m", os.path.join(models, target), "--spec-type", spec_type, "--spec-draft-n-max", str(DRAFT),
           "-ctk", "f16", "-v"] + COMMON
    if head:
        cmd += ["-md", os.path.join(models, head)]
    out, log = run(cmd)
    drafts, accepted = [], []
    for line in log.splitlines():
        m = CANDIDATE.search(line)
        if m:
            if int(m.group(1)) == 0 or not drafts:
                drafts.append([])
            drafts[-1].append(int(m.group(2)))
        m = ACCEPTED.search(line)
        if m:
            accepted.append(int(m.group(1)))
    # stdout: two newlines, the prompt as llama.cpp echoes it, the generated text, then newlines
    text = out[2:].rstrip(b"\n")
    return drafts, accepted, text


def specd_steps(specd, models, target, head, spec):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "steps.txt")
        cmd = [specd, "run", "-m", os.path.join(models, target), "--spec", spec, "--draft-fixed", "--draft-max",
               str(DRAFT), "--draft-min", str(DRAFT), "--trace-steps", trace, "--calibration-cache", "off"] + COMMON
        if head:
            cmd += ["-md", os.path.join(models, head)]
        text, _ = run(cmd)
        text = text[:-1] if text.endswith(b"\n") else text  # the newline specd run ends with
        drafts, accepted = [], []
        for line in open(trace):
            fields, _, tokens = line.partition("|")
            if tokens.strip():
                drafts.append([int(t) for t in tokens.split()])
                accepted.append(int(fields.split()[2]))
    return drafts, accepted, text


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    specd, models, tool = sys.argv[1:]
    if not os.access(tool, os.X_OK):
        print("skipped: %s is not built (make bench-deps)" % tool)
        sys.exit(77)
    for spec, target, head, spec_type in HEADS:
        # llama.cpp's asynchronous log can lose its tail at exit on a loaded machine (seen: 6 steps
        # logged of about 14): the run that logged the most accepted steps of a few.
        runs = []
        for _ in range(3):
            runs.append(llama_steps(tool, models, target, head, spec_type))
            if len(runs[-1][1]) > STEPS:
                break
        l_drafts, l_accepted, l_text = max(runs, key=lambda r: len(r[1]))
        s_drafts, s_accepted, s_text = specd_steps(specd, models, target, head, spec)
        compared = 0
        for i in range(min(len(l_drafts), len(s_drafts), len(l_accepted))):
            if len(l_drafts[i]) != DRAFT or len(s_drafts[i]) != DRAFT:
                break  # the last steps draft what each tool's token budget leaves
            if l_drafts[i] != s_drafts[i] or l_accepted[i] != s_accepted[i]:
                sys.exit("%s step %d: llama.cpp drafted %s (accepted %d), specd %s (accepted %d)" % (
                    spec, i, l_drafts[i], l_accepted[i], s_drafts[i], s_accepted[i]))
            compared += 1
        if compared < STEPS:
            sys.exit("%s: only %d steps to compare (llama.cpp %d, specd %d)" % (spec, compared, len(l_drafts),
                                                                               len(s_drafts)))
        # llama.cpp echoes the prompt first; each tool stops at its own token count (and llama.cpp's
        # asynchronous log may lose its last line at exit): the shorter text starts the longer
        at = l_text.find(PROMPT.encode())
        l_gen = l_text[at + len(PROMPT):] if at >= 0 else b""
        common = min(len(l_gen), len(s_text))
        if common < 20 or l_gen[:common] != s_text[:common]:
            sys.exit("%s: the texts differ\nllama.cpp: %r\nspecd:     %r" % (spec, l_gen, s_text))
        print("%s: %d steps drafted alike (%s ...), same text (%d bytes in common)" % (spec, compared,
                                                                                      s_drafts[:2], common))


if __name__ == "__main__":
    main()
