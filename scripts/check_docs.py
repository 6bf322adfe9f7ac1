#!/usr/bin/env python3
"""check_docs.py - the README and docs/ against the code, so that they cannot drift silently.

  scripts/check_docs.py ROOT SPECD [--lib DIR|-] [--models DIR] [--rpc-lib FILE|-] [--cc CC]
                                                                         check (the `docs` test)
  scripts/check_docs.py ROOT SPECD --update                              rewrite docs/cli.md's
                                                                         --help blocks

What it checks, each failure one line naming the file and what to change:
  1. docs/cli.md's "Every flag" blocks are what `specd run|serve|bench|bench --serve --help` print
     now (so every flag of the three commands is documented);
  2. every flag the documents name (in `code` spans, and on `specd ...` lines of code blocks) is
     one specd takes: in a --help text or a string literal of src/ (or one of the other tools'
     flags listed below);
  3. the `--json` table of docs/cli.md: each top-level field it names is printed by
     `specd run --json`, and each key printed (at any depth) is named there (needs --models); and
     each key the JSON API answers with (status, tokenize, completion in both probability shapes,
     with origins and drafters, completion.start and .poll, lora_adapters) is named in a code span
     of docs/server.md (needs --rpc-lib, libspecd-rpc, and --models), and so is each key of what
     `specd serve`'s routes answer (/props, /slots, /completion, /v1/completions, ...; --models);
  4. every route the HTTP server matches (src/server/) is named in docs/server.md;
     every repository path the documents name exists (src/..., tests/..., ...; a path of
     llama.cpp's own under deps/llama/src), every .c/.h/.cpp file named exists somewhere, every
     specd_* name exists in include/ or src/, every link to a file or #heading resolves;
  5. the README: at most 250 lines, its first code block runs `make demo` and `make test` (CI
     runs that test command), and its C example compiles against include/specd.h (with --lib, links
     against libspecd, and with --models too, runs on the tiny models).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

DOCS = ["README.md", "docs/cli.md", "docs/server.md", "docs/library.md", "docs/internals.md",
        "docs/build.md", "docs/testing.md"]
# The measurement logs (written by specd bench and by hand over many sessions, with the flags and
# paths of their day): only their links are checked.
LOGS = ["docs/performance.md", "docs/trees.md", "docs/benchmarks.md", "docs/benchmarks-gpu.md",
        "docs/benchmarks-serve.md", "docs/benchmarks-ngram.md"]
HELP = [("run", ["run", "--help"]), ("serve", ["serve", "--help"]), ("bench", ["bench", "--help"]),
        ("bench --serve", ["bench", "--serve", "--help"])]

# Flags the documents name that are neither specd's nor those of the tools and scripts beside it
# (tools/, bench/, scripts/): other programs' that the documents show.
FOREIGN = {
    "--target-model-dir": "convert_hf_to_gguf.py", "--outfile": "convert_hf_to_gguf.py",
    "--embedding": "llama-server's (specd refuses it)", "--mmproj": "llama-server's (specd refuses it)",
    "--install": "cmake", "--prefix": "cmake", "--cflags": "pkg-config", "--libs": "pkg-config",
    "--update": "scripts/check_docs.py itself", "-N": "ctest",
}
FOREIGN_PATTERNS = [r"-D[A-Z_]+.*"]  # CMake definitions (-DGGML_RPC=ON)

REPO_DIRS = ("src/", "include/", "tests/", "tools/", "bench/", "scripts/", "examples/", "docs/", "cmake/",
             ".ci/")

failures = []


def fail(msg):
    failures.append(msg)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def split_code(text):
    """(inline code spans, lines of fenced code blocks) of a markdown text."""
    spans, block_lines, prose = [], [], []
    in_block = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_block = not in_block
            continue
        (block_lines if in_block else prose).append(line)
    spans = re.findall(r"`([^`]+)`", "\n".join(prose))  # a span may go over a line break
    return spans, block_lines


def help_texts(specd):
    out = {}
    for name, args in HELP:
        r = subprocess.run([specd] + args, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"`specd {' '.join(args)}` exited with {r.returncode}: {r.stderr.strip()[:200]}")
        out[name] = r.stdout
    return out


HELP_BLOCK = re.compile(r"(<!-- help: (?P<name>[a-z -]+) -->\n```\n)(?P<body>.*?)(```\n<!-- end help -->)", re.S)


def check_help_blocks(root, helps, update):
    path = os.path.join(root, "docs/cli.md")
    text = read(root, "docs/cli.md")
    found = set()

    def replace(m):
        name = m.group("name")
        found.add(name)
        if name not in helps:
            fail(f"docs/cli.md: a help block for 'specd {name}', which is not a command with --help")
            return m.group(0)
        if m.group("body") != helps[name] and not update:
            fail(f"docs/cli.md: the block of `specd {name} --help` is not what the program prints now: "
                 f"document the change, then run scripts/check_docs.py ROOT build/bin/specd --update")
        return m.group(1) + helps[name] + m.group(4)

    new = HELP_BLOCK.sub(replace, text)
    for name in helps:
        if name not in found:
            fail(f"docs/cli.md: no block <!-- help: {name} --> for `specd {name} --help`")
    if update and new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"updated {path}")


def known_flags(root, helps):
    """specd's flags (its --help texts and the string literals of src/), and any flag the tools and
    scripts beside it mention (tools/, bench/, scripts/: make_tiny_model, gpu_bench.sh, ...)."""
    flags = set()
    for text in helps.values():
        flags.update(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))
    for top, pattern in (("src", r'"(--?[a-zA-Z][\w-]*)"'), ("tools", r"(?<![\w-])(--?[a-zA-Z][\w-]*)"),
                         ("bench", r"(?<![\w-])(--?[a-zA-Z][\w-]*)"), ("scripts", r"(?<![\w-])(--?[a-zA-Z][\w-]*)")):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h", ".cpp", ".py", ".sh")) and f != "check_docs.py":
                    with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                        flags.update(re.findall(pattern, fh.read()))
    return flags


def flags_named(text):
    spans, block_lines = split_code(text)
    named = []
    for s in spans:
        named += re.findall(r"(?:^|[\s(\[/|,])(--?[a-zA-Z][\w-]*)", s)
    for line in block_lines:
        line = line.strip()
        if re.match(r"(build/bin/)?specd (run|serve|bench)\b", line):
            named += re.findall(r"(?:^|\s|\[)(--?[a-zA-Z][\w-]*)", line.split("#")[0])
    return named


def check_flags(root, helps):
    known = known_flags(root, helps)
    for doc in DOCS:
        text = read(root, doc)
        for flag in sorted(set(flags_named(text))):
            if flag in known or flag in FOREIGN or any(re.fullmatch(p, flag) for p in FOREIGN_PATTERNS):
                continue
            fail(f"{doc}: names the flag '{flag}', which specd does not take (no --help text or source "
                 f"has it): fix the document, or list it in FOREIGN in scripts/check_docs.py if it is "
                 f"another tool's")


# Objects whose keys are data, not field names: the legacy logprobs' {token: logprob}, and the
# chat template's capabilities as llama.cpp names them.
DATA_OBJECTS = ("top_logprobs", "chat_template_caps")


def json_keys(value, out, parent=None):
    if isinstance(value, dict):
        for k, v in value.items():
            if parent not in DATA_OBJECTS:
                out.add(k)
            json_keys(v, out, k)
    elif isinstance(value, list):
        for v in value:
            json_keys(v, out, parent)


def check_json_fields(root, specd, models):
    text = read(root, "docs/cli.md")
    m = re.search(r"`--json` prints one object instead:\n\n(\| field \| meaning \|\n(?:\|.*\n)+)", text)
    if not m:
        fail("docs/cli.md: no `--json` table (a line '`--json` prints one object instead:' and a table)")
        return
    table = m.group(1)
    documented = set(re.findall(r"`([a-z_0-9]+)`", table))
    top = set()
    for row in table.split("\n")[2:]:
        if row.startswith("|"):
            top.update(re.findall(r"`([a-z_0-9]+)`", row.split("|")[1]))
    r = subprocess.run([specd, "run", "-m", os.path.join(models, "target.gguf"), "-md",
                        os.path.join(models, "draft.gguf"), "-p", "Once upon a time", "-n", "8", "--temp", "0",
                        "-t", "1", "--json", "--calibration-cache", "off"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"`specd run --json` on the tiny models exited with {r.returncode}: {r.stderr.strip()[:300]}")
        return
    out = json.loads(r.stdout)
    for key in sorted(top - set(out)):
        fail(f"docs/cli.md: the --json table names the field '{key}', which `specd run --json` does not print")
    printed = set()
    json_keys(out, printed)
    for key in sorted(printed - documented):
        fail(f"docs/cli.md: `specd run --json` prints the key '{key}', which the --json table does not name")


def check_rpc_keys(root, rpc_lib, models):
    import ctypes
    lib = ctypes.CDLL(os.path.abspath(rpc_lib))
    lib.specd_rpc.restype, lib.specd_rpc.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    lib.specd_free.argtypes = [ctypes.c_void_p]

    def rpc(method, params=None):
        req = {"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})}
        p = lib.specd_rpc(json.dumps(req).encode())
        answer = json.loads(ctypes.string_at(p).decode("utf-8", "replace"))
        lib.specd_free(p)
        if "error" in answer:
            fail(f"the JSON API's {method} failed on the tiny models: {answer['error']}")
        return answer.get("result")

    models = os.path.abspath(models)
    rpc("init", {"model": os.path.join(models, "target.gguf"), "model_draft": os.path.join(models, "draft.gguf"),
                 "n_threads": 1, "calibration_cache": "off", "warmup": False})
    completion = {"prompt": "Once upon a time", "n_predict": 8, "n_probs": 2, "return_origins": True,
                  "speculative": {"type": ["ngram-simple", "draft"]}}
    printed = set()
    for method, params in (("status", None), ("tokenize", {"text": "Once", "with_pieces": True}),
                           ("detokenize", {"tokens": [1, 2]}), ("completion", completion),
                           ("completion", dict(completion, probs_format="llama")),
                           ("completion", dict(completion, probs_format="llama", post_sampling_probs=True)),
                           ("completion.start", {"prompt": "Once", "n_predict": 4}),
                           ("completion.poll", {"wait_ms": 5000}), ("lora_adapters", None)):
        json_keys(rpc(method, params), printed)
    rpc("shutdown")
    check_named(root, printed, "the JSON API answers with")


def check_named(root, keys, what):
    spans, _ = split_code(read(root, "docs/server.md"))
    named = set(re.findall(r"\w+", " ".join(spans)))
    for key in sorted(keys - named):
        if not key.isdigit():
            fail(f"docs/server.md: {what} the key '{key}', which no code span there names")


def check_http_keys(specd, models):
    """specd serve on the tiny models: the keys of what llama-server's and OpenAI's routes answer."""
    import signal
    import urllib.request
    models = os.path.abspath(models)
    server = subprocess.Popen([specd, "serve", "-m", os.path.join(models, "target.gguf"), "-md",
                               os.path.join(models, "draft.gguf"), "--port", "0", "-t", "1", "-c", "512",
                               "--no-warmup", "--calibration-cache", "off"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = set()
    try:
        m = re.search(r"listening on (http://\S+)", server.stdout.readline())
        if not m:
            fail("specd serve on the tiny models did not say where it listens: " + server.stderr.read()[:300])
            return printed
        for path, body in (("/health", None), ("/props", None), ("/slots", None), ("/v1/models", None),
                           ("/lora-adapters", None), ("/tokenize", {"content": "Once", "with_pieces": True}),
                           ("/detokenize", {"tokens": [1, 2]}),
                           ("/completion", {"prompt": "Once", "n_predict": 4, "n_probs": 2, "return_tokens": True}),
                           ("/v1/completions", {"prompt": "Once", "max_tokens": 4, "logprobs": 2})):
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(m.group(1) + path, data=data, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    json_keys(json.loads(r.read().decode("utf-8", "replace")), printed)
            except Exception as e:  # noqa: BLE001 - any failure is reported as the check's own
                fail(f"specd serve on the tiny models: {path} failed: {e}")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return printed


def check_routes(root):
    """Every route the HTTP server matches (a "/..." literal of src/server/) is named in server.md."""
    routes = set()
    for d, _, files in os.walk(os.path.join(root, "src/server")):
        for f in files:
            if f.endswith(".c"):
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    routes.update(r.rstrip("/") for r in re.findall(r'"(/[a-z][\w./-]*)', fh.read()))
    spans, _ = split_code(read(root, "docs/server.md"))
    named = " ".join(spans)
    for route in sorted(routes):
        if not re.search(r"(?<![\w/-])%s(?![\w-])" % re.escape(route), named):
            fail(f"docs/server.md: the server answers on '{route}', which no code span there names")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    out = set()
    for line in text.split("\n"):
        m = re.match(r"#+ (.*)", line)
        if m:
            out.add(slug(m.group(1)))
    return out


def exists_anywhere(root, name):
    for top in ("src", "include", "tests", "tools", "bench", "scripts", "examples", "cmake", "deps/llama/src"):
        for _, _, files in os.walk(os.path.join(root, top)):
            if name in files:
                return True
    return False


def check_paths(root):
    ids = set()
    for top in ("include", "src", "tools", "tests"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".c", ".h", ".cpp")):
                    with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                        ids.update(re.findall(r"\bspecd_\w+", fh.read()))
    llama = os.path.join(root, "deps/llama/src")  # llama.cpp's own paths (tools/server/...)
    install = os.path.join(root, "deps/llama/install")  # what scripts/deps.sh installs (include/llama-common)
    basenames = {}
    for doc in DOCS:
        text = read(root, doc)
        for p in sorted(set(re.findall(r"(?<![\w./-])((?:%s)[\w./-]*\w)" % "|".join(map(re.escape, REPO_DIRS)), text))):
            if not any(os.path.exists(os.path.join(d, p) + ext) for d in (root, llama, install) for ext in ("", ".c")):
                fail(f"{doc}: names the path '{p}', which is not in the repository (nor llama.cpp's source or install)")
        for name in set(re.findall(r"(?<![\w/.-])([\w-]+\.(?:c|h|cpp))\b", text)):
            basenames.setdefault(name, doc)
        for ident in sorted(set(re.findall(r"\bspecd_[a-z0-9_]*[a-z0-9]\b", text))):
            if ident not in ids:
                fail(f"{doc}: names '{ident}', which is in neither include/ nor src/")
        check_links(root, doc, text)
    for doc in LOGS:
        check_links(root, doc, read(root, doc))
    for name, doc in sorted(basenames.items()):
        if name not in ("stdio.h", "example.c") and not exists_anywhere(root, name):
            fail(f"{doc}: names the file '{name}', which is nowhere in the repository (nor llama.cpp's source)")


def check_links(root, doc, text):
    """Every link to a file resolves, and every #anchor to a heading of that file."""
    base = os.path.dirname(doc)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(root, base, file)) if file else os.path.join(root, doc)
        if not os.path.exists(path):
            fail(f"{doc}: links to '{target}', which does not exist")
        elif anchor and path.endswith(".md"):
            with open(path, encoding="utf-8") as fh:
                if anchor not in anchors(fh.read()):
                    fail(f"{doc}: links to '{target}': no such heading there")


def check_readme(root, lib, cc, models):
    text = read(root, "README.md")
    lines = text.split("\n")
    if len(lines) > 251:
        fail(f"README.md: {len(lines) - 1} lines, more than 250: move the detail into docs/")
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    if not first or not re.search(r"^make demo\b", first.group(1), re.M) or not re.search(r"^make test\b", first.group(1), re.M):
        fail("README.md: its first code block must hold the lines `make demo` and `make test` (CI runs them)")
    m = re.search(r"```c\n(.*?)```", text, re.S)
    if not m:
        fail("README.md: no C example (a ```c block)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "example.c")
        with open(src, "w") as f:
            f.write(m.group(1))
        cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(root, "include"), src, "-o",
               os.path.join(tmp, "example")]
        cmd += ["-L", os.path.abspath(lib), "-lspecd", "-Wl,-rpath," + os.path.abspath(lib)] if lib else ["-c"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"README.md: the C example does not build against include/specd.h: {r.stderr.strip()[:600]}")
        elif lib and models:  # run it where its target.gguf and draft.gguf are the tiny models
            for name in ("target.gguf", "draft.gguf"):
                os.symlink(os.path.join(os.path.abspath(models), name), os.path.join(tmp, name))
            r = subprocess.run([os.path.join(tmp, "example")], cwd=tmp, capture_output=True, text=True,
                               errors="replace", timeout=120)
            if r.returncode != 0 or "drafts accepted" not in r.stdout:
                fail(f"README.md: the C example ran with status {r.returncode} on the tiny models: "
                     f"{(r.stdout + r.stderr).strip()[-600:]}")


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, specd = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2])) if "--update" not in args else {}
    helps = help_texts(specd)
    check_help_blocks(root, helps, "--update" in args)
    if "--update" in args:
        return 0
    check_flags(root, helps)
    if "--models" in opts:
        check_json_fields(root, specd, opts["--models"])
    if opts.get("--rpc-lib", "-") != "-" and "--models" in opts:
        check_rpc_keys(root, opts["--rpc-lib"], opts["--models"])
    if "--models" in opts:
        check_named(root, check_http_keys(specd, opts["--models"]), "specd serve answers with")
    check_routes(root)
    check_paths(root)
    lib = opts.get("--lib")
    check_readme(root, None if lib == "-" else lib, opts.get("--cc", "cc"), opts.get("--models"))
    for f in failures:
        print("docs: " + f)
    if failures:
        print(f"docs: {len(failures)} problem(s)")
        return 1
    print("docs: README.md and docs/ agree with the code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
