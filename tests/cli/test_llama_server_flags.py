#!/usr/bin/env python3
"""Every drafting and context-shift flag llama-server 0.5.0 takes (read from the pinned llama.cpp's
common/arg.cpp: the options its server example takes whose names speak of drafting or context
shift) is either taken by `specd serve` or refused with the reason: never an unknown option, so a
llama-server command line moves over with an answer for each flag (issue 46).

usage: test_llama_server_flags.py SPECD LLAMA_CPP_SOURCE_DIR
Skips (77) without the llama.cpp source tree."""
import os
import re
import subprocess
import sys

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures += 1
        print("     " + str(detail)[:600])


def llama_server_drafting_flags(arg_cpp):
    """The flags of each add_opt whose examples include the server (or are unrestricted) and
    that concern drafting or context shift."""
    with open(arg_cpp) as f:
        src = f.read()
    flags = set()
    for chunk in src.split("add_opt(")[1:]:
        head = re.match(r"\s*common_arg\(\s*\{([^}]*)\}", chunk)
        if not head:
            continue
        names = re.findall(r'"(-[^"]+)"', head.group(1))
        examples = re.search(r"set_examples\(\{([^}]*)\}\)", chunk.split("add_opt(")[0])
        if examples and "LLAMA_EXAMPLE_SERVER" not in examples.group(1):
            continue
        if any("spec" in n or "draft" in n or "context-shift" in n for n in names if n not in ("-sp", "--special")):
            flags.update(n for n in names)
    return sorted(flags)


def answer(specd, args):
    r = subprocess.run([specd, "serve"] + args + ["-m", "/nonexistent/model.gguf"], capture_output=True, text=True,
                       timeout=60)
    return r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""


def main():
    specd, src = sys.argv[1], sys.argv[2]
    arg_cpp = os.path.join(src, "common", "arg.cpp")
    if not os.path.exists(arg_cpp):
        print("skipped: no llama.cpp source tree at %s (make deps fetches it)" % src)
        return 77
    flags = llama_server_drafting_flags(arg_cpp)
    check("llama-server's drafting flags found in arg.cpp", len(flags) > 40 and "--spec-draft-n-max" in flags, flags)
    unknown, refused, taken = [], [], []
    for f in flags:
        line = answer(specd, [f, "1"])
        if "unknown option '1'" in line:  # a switch: it takes no value
            line = answer(specd, [f])
        if "unknown option '%s'" % f in line:
            unknown.append(f)
        elif "specd does not take it: " in line:
            refused.append(f)
        else:
            taken.append(f)
    check("none of llama-server's drafting flags is an unknown option to specd serve", not unknown, unknown)
    check("taken flags get past the flags to the model (%d), refused ones say why (%d)" % (len(taken), len(refused)),
          "--draft-n" in taken and "--spec-default" in taken and "--spec-draft-threads" in refused, (taken, refused))
    line = answer(specd, ["--spec-draft-threads", "2"])
    check("a refusal names the flag and the reason", line.startswith("specd: error: init: --spec-draft-threads is "
          "llama-server's, and specd does not take it: specd's draft runs on the target's threads"), line)
    print("%d passed, %d failed" % (4 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
