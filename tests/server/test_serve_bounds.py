#!/usr/bin/env python3
"""Request bodies that crashed `specd serve` or made it clobber a file (issue 43), each now refused
naming its field, with the server still up after: a grammar of 20000 nested groups (llama.cpp's
GBNF parser recursed once per level) on /completion, /infill, JSON-RPC completion and
completion.start; lazy-grammar triggers of 100000 characters (a word, a pattern, a full pattern)
and a pattern of 20000 nested groups (std::regex's compiler recursed per character and level), a
pattern that is not a regular expression; and an admin's calibration_cache naming a model inside
--models-dir (a GGUF became a few hundred bytes of calibration text).

    test_serve_bounds.py SPECD MODELS_DIR
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile

from test_serve import check, curl, failures, rpc, served

KEY = "test-key"
ADMIN = "admin-key"
DEEP_GRAMMAR = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000


def post(port, path, body):
    code, text = curl(port, path, body, key=KEY)
    try:
        return code, json.loads(text)
    except ValueError:
        return code, text


def field_of(answer):
    """data.field of an error, as /completion and JSON-RPC both give it."""
    if not isinstance(answer, dict):
        return None
    error = answer.get("error") or {}
    return (error.get("data") or {}).get("field")


def alive(port):
    code, text = curl(port, "/health", key=None)
    return code == 200 and json.loads(text).get("status") == "ok"


def refused(port, body, field, words, what):
    """The body on every route that takes a grammar: 400 (or -32602) naming `field`, the message
    saying `words`, and the server still answering."""
    answers = {
        "/completion": post(port, "/completion", body),
        "/infill": post(port, "/infill", dict(body, input_prefix="def f(", input_suffix=")")),
        "JSON-RPC completion": rpc(port, "completion", body, key=KEY),
        "JSON-RPC completion.start": rpc(port, "completion.start", body, key=KEY),
    }
    for route, (code, answer) in answers.items():
        http_ok = code == 400 if route.startswith("/") else code == 200
        message = (answer.get("error") or {}).get("message", "") if isinstance(answer, dict) else ""
        check(f"{what} on {route}: refused naming '{field}'", http_ok and field_of(answer) == field
              and words in message, (code, str(answer)[:400]))
    check(f"... and the server is still up after {what}", alive(port))


def check_grammar_depth(port):
    refused(port, {"prompt": "x", "n_predict": 2, "grammar": DEEP_GRAMMAR}, "grammar",
            "nest 20000 deep, more than the 1000 allowed", "a grammar of 20000 nested groups")
    at_limit = "root ::= " + "(" * 1000 + '"a"' + ")" * 1000
    code, answer = post(port, "/completion", {"prompt": "x", "n_predict": 2, "grammar": at_limit})
    check("a grammar of 1000 nested groups still runs", code == 200 and answer.get("content", "").startswith("a"),
          (code, str(answer)[:300]))


def lazy(trigger):
    return {"prompt": "x", "n_predict": 2, "grammar": 'root ::= "a"', "grammar_lazy": True,
            "grammar_triggers": [trigger]}


def check_triggers(port):
    cases = [
        ("a 100000-character trigger word", {"type": 1, "value": "a" * 100000}, "more than the 4096 allowed"),
        ("a 100000-character trigger pattern", {"type": 2, "value": "a" * 100000}, "more than the 4096 allowed"),
        ("a 100000-character full pattern", {"type": 3, "value": "a" * 100000}, "more than the 4096 allowed"),
        ("a trigger pattern of 20000 nested groups", {"type": 2, "value": "(" * 20000 + "a" + ")" * 20000},
         "more than the 4096 allowed"),
        ("a trigger pattern of 200 nested groups", {"type": 2, "value": "(" * 200 + "a" + ")" * 200},
         "nests its ( ) groups 200 deep, more than the 100 allowed"),
        ("a trigger pattern repeated into a million states", {"type": 2, "value": "(a{1000}){1000}"},
         "more than the 10000 allowed"),
        ("a trigger pattern that is not a regular expression", {"type": 2, "value": "(a"},
         "is not a valid regular expression"),
    ]
    for what, trigger, words in cases:
        refused(port, lazy(trigger), "grammar_triggers", words, what)
    code, answer = post(port, "/completion", lazy({"type": 2, "value": "[\\s\\S]*?(<tool_call>)[\\s\\S]*"}))
    check("a real trigger pattern still runs", code == 200, (code, str(answer)[:300]))


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_calibration_cache(port, confined):
    """init's calibration_cache inside --models-dir: a model there (or any file that is not a
    calibration file) is refused by name and left as it was; a new file, a folder and a calibration
    file are fine."""
    victim = os.path.join(confined, "victim.gguf")
    before = digest(victim)
    for form, params in (("settings form", {"model": "target.gguf", "calibration_cache": "victim.gguf"}),
                         ("cmd form", {"cmd": "-m target.gguf -md draft.gguf --calibration-cache victim.gguf"}),
                         ("args form", {"args": ["-m", "target.gguf", "--calibration-cache", victim]})):
        code, r = rpc(port, "init", dict(params, n_threads=1) if "model" in params else params, key=ADMIN)
        error = r.get("error", {}) if isinstance(r, dict) else {}
        check(f"calibration_cache naming a GGUF inside --models-dir ({form}): refused naming calibration_cache",
              error.get("code") == -32602 and field_of(r) == "calibration_cache"
              and "is an existing file that is not a specd calibration file" in error.get("message", ""), r)
    check("... and the GGUF is untouched", digest(victim) == before)
    code, r = rpc(port, "init", {"cmd": "-m target.gguf -md draft.gguf -c 256 -t 1 --calibration-cache costs.txt"},
                  key=ADMIN)
    code, text = curl(port, "/completion", {"prompt": "once upon a time", "n_predict": 16, "temperature": 0}, key=KEY)
    written = os.path.join(confined, "costs.txt")
    first = open(written).readline() if os.path.exists(written) else ""
    check("a new calibration file inside --models-dir is written", r.get("result", {}).get("state") == "ready"
          and code == 200 and first.startswith("specd-calibration "), (r, code, first))
    code, r = rpc(port, "init", {"cmd": "-m target.gguf -c 256 -t 1 --calibration-cache costs.txt"}, key=ADMIN)
    check("... and naming it again (a calibration file) is fine", r.get("result", {}).get("state") == "ready", r)


def main(specd, models):
    confined = tempfile.mkdtemp(prefix="specd-bounds-")
    try:
        for name in ("target.gguf", "draft.gguf", "fim.gguf"):
            shutil.copy(os.path.join(models, name), confined)
        shutil.copy(os.path.join(models, "draft.gguf"), os.path.join(confined, "victim.gguf"))
        args = ["--api-key", KEY, "--admin-api-key", ADMIN, "--models-dir", confined,
                "-m", os.path.join(confined, "fim.gguf"), "-c", "256", "-t", "1"]
        with served(specd, args, "the bounds") as (_, port):
            if port:
                check_grammar_depth(port)
                check_triggers(port)
                check_calibration_cache(port, confined)
    finally:
        shutil.rmtree(confined, ignore_errors=True)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
