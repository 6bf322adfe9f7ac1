#!/usr/bin/env python3
"""The docs check (scripts/check_docs.py) on copies of the README and docs/ in a temporary folder:
the copies as they are pass, and each kind of drift fails, named: a flag specd does not take, a
--json field it does not print (the README's old `invariance`) and one it prints undocumented, a
JSON API or HTTP answer's key or a route docs/server.md does not name, a
--help block that is out of date, a path or specd_* name that does not exist, a broken link, a
README over 250 lines or without `make test`, a C example that does not compile or does not run.

  test_check_docs.py ROOT SPECD LIBDIR MODELS RPC_LIB      (LIBDIR, RPC_LIB: - for none)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.stdout.reconfigure(line_buffering=True)

root, specd, models = (os.path.abspath(a) for a in (sys.argv[1], sys.argv[2], sys.argv[4]))
lib, rpc_lib = (a if a == "-" else os.path.abspath(a) for a in (sys.argv[3], sys.argv[5]))
failed = 0


def tree(tmp):
    """A repository of copies of the documents and links to everything else."""
    os.makedirs(os.path.join(tmp, "docs"))
    shutil.copy(os.path.join(root, "README.md"), tmp)
    for f in os.listdir(os.path.join(root, "docs")):
        src = os.path.join(root, "docs", f)
        if f.endswith(".md"):
            shutil.copy(src, os.path.join(tmp, "docs", f))
        else:
            os.symlink(src, os.path.join(tmp, "docs", f))
    for d in ("src", "include", "tests", "tools", "bench", "scripts", "examples", "cmake", ".ci", "deps"):
        if os.path.exists(os.path.join(root, d)):
            os.symlink(os.path.join(root, d), os.path.join(tmp, d))


def run(tmp):
    r = subprocess.run([sys.executable, os.path.join(root, "scripts/check_docs.py"), tmp, specd, "--lib", lib,
                        "--models", models, "--rpc-lib", rpc_lib], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


def edit(tmp, rel, old, new):
    """Replaces the first `old` in rel; every one when old starts with '*'."""
    path = os.path.join(tmp, rel)
    every = old.startswith("*")
    old = old.lstrip("*")
    with open(path) as f:
        text = f.read()
    assert old in text, f"{rel} has no '{old}' to change: update this test"
    with open(path, "w") as f:
        f.write(text.replace(old, new, -1 if every else 1))


def case(name, rel, old, new, expect):
    global failed
    with tempfile.TemporaryDirectory() as tmp:
        tree(tmp)
        if rel:
            edit(tmp, rel, old, new)
        rc, out = run(tmp)
        ok = (rc == 0 and "agree with the code" in out) if expect is None else (rc == 1 and expect in out)
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            failed += 1
            print("     expected " + ("a pass" if expect is None else repr(expect)) + ", got rc " + str(rc) + ":")
            print("     " + out.strip().replace("\n", "\n     "))


case("the documents as they are pass", None, None, None, None)
case("a flag specd does not take", "docs/cli.md", "`--spec-ngram-n` (3)", "`--spec-ngram-len` (3)",
     "names the flag '--spec-ngram-len', which specd does not take")
case("a flag in a specd command line of a code block", "README.md", "-p \"Once upon a time\" -n 128",
     "-p \"Once upon a time\" --n-tokens 128", "names the flag '--n-tokens'")
case("the README's old --json key", "docs/cli.md", "| `batch_invariant` |", "| `invariance` |",
     "names the field 'invariance', which `specd run --json` does not print")
case("a --json key printed but not documented", "docs/cli.md", "`held_draft_length`", "`held_length`",
     "prints the key 'held_draft_length', which the --json table does not name")
if rpc_lib != "-":
    case("a JSON API key not documented", "docs/server.md", "`n_vocab`, `version`", "`vocab_size`, `version`",
         "the JSON API answers with the key 'n_vocab'")
case("a key of /props not documented", "docs/server.md", "`total_slots`", "`slot_count`",
     "specd serve answers with the key 'total_slots'")
case("a route the server answers on, not documented", "docs/server.md", "*/apply-template", "/apply-templates",
     "the server answers on '/apply-template'")
case("a --help block out of date", "docs/cli.md", "  --json                   print one JSON object",
     "  --json                   print a JSON object", "the block of `specd run --help` is not what")
case("a path that does not exist", "docs/internals.md", "`src/engine/llama_ext.h`", "`src/engine/llama_shim.h`",
     "names the path 'src/engine/llama_shim.h'")
case("a source file that does not exist", "docs/internals.md", "(grammar_prune.c)", "(grammar_cut.c)",
     "names the file 'grammar_cut.c'")
case("a specd_ name that does not exist", "docs/library.md", "`specd_session_free`", "`specd_session_destroy`",
     "names 'specd_session_destroy'")
case("a link to a heading that is not there", "README.md", "(docs/cli.md#specd-serve)", "(docs/cli.md#specd-server)",
     "links to 'docs/cli.md#specd-server': no such heading")
case("a README without its test command", "README.md", "make test    #", "make check   #",
     "must hold the lines `make demo` and `make test`")
case("a README over 250 lines", "README.md", "## Benchmarks\n", "## Benchmarks\n" + "\n" * 80,
     "more than 250")
case("a C example that does not compile", "README.md", "specd_generate(e, prompt", "specd_generate_text(e, prompt",
     "the C example does not build")
if lib != "-":
    case("a C example that builds but fails", "README.md", 'ep.draft_path = "draft.gguf";', 'ep.draft_path = "drafts.gguf";',
         "the C example ran with status 1")
sys.exit(1 if failed else 0)
