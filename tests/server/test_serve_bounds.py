#!/usr/bin/env python3
"""Request bodies that crashed `specd serve` or made it clobber a file (issue 43), each now refused
naming its field, with the server still up after: a grammar of 20000 nested groups (llama.cpp's
GBNF parser recursed once per level) on /completion, /infill, JSON-RPC completion and
completion.start; lazy-grammar triggers of 100000 characters (a word, a pattern, a full pattern)
and a pattern of 20000 nested groups (std::regex's compiler recursed per character and level), a
pattern that is not a regular expression; an admin's calibration_cache naming a model inside
--models-dir (a GGUF became a few hundred bytes of calibration text); and the smaller fields a
probe found taken silently (tool_choice without tools, /v1/responses' reasoning, /apply-template's
and a LoRA entry's unknown fields, /infill's numeric filename, POST /health), now each refused naming
the field, or as llama-server answers.

    test_serve_bounds.py SPECD MODELS_DIR [TEMPLATES_DIR]
"""
import hashlib
import http.client
import json
import os
import shutil
import sys
import tempfile

from test_serve import check, curl, curl_json, rpc, served, summary

KEY = "test-key"
ADMIN = "admin-key"
DEEP_GRAMMAR = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000


def post(port, path, body):
    return curl_json(port, path, body, key=KEY)


def post_big(port, path, body):
    """As post, for a body too large for curl's command line."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                                                   "Authorization": f"Bearer {KEY}"})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e)
    finally:
        c.close()


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
    names = ["".join("abcdefghijklmnopqrstuvwxyz"[(i // 26 ** k) % 26] for k in range(4)) for i in range(80001)]
    chain = "root::=aaaa\n" + "".join(f"{names[i]}::={names[i + 1]}\n" for i in range(80000)) + f'{names[80000]}::="a"\n'
    code, answer = post_big(port, "/completion", {"prompt": "x", "n_predict": 2, "grammar": chain})
    check(f"a chain of 80000 rules ({len(chain)} bytes): refused naming grammar", code == 400
          and field_of(answer) == "grammar" and "more than the 20000 allowed" in str(answer), (code, str(answer)[:300]))
    check("... and the server is still up", alive(port))
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


def check_infill_and_routes(port):
    """/infill's input_extra as llama-server takes it; POST /health is 405 (the route is GET's); a
    LoRA entry with an unknown field (a typo of scale set it to 0) is refused."""
    body = {"input_prefix": "def f(", "input_suffix": ")", "n_predict": 2,
            "input_extra": [{"filename": 5, "text": "import os"}]}
    code, answer = post(port, "/infill", body)
    check("/infill: a numeric input_extra[].filename is refused naming input_extra",
          code == 400 and field_of(answer) == "input_extra", (code, answer))
    code, answer = post(port, "/infill", dict(body, input_extra=[{"filename": "a.py"}]))
    check("/infill: an input_extra chunk without text is refused (llama-server: text is required)",
          code == 400 and field_of(answer) == "input_extra", (code, answer))
    code, answer = post(port, "/infill", dict(body, input_extra=[{"text": "import os"}]))
    check("/infill: the filename stays optional", code == 200, (code, answer))
    code, text = curl(port, "/health", "{}", key=None)
    check("POST /health: 405, use GET", code == 405 and "use GET" in text, (code, text))
    code, text = curl(port, "/health", key=None, extra=("-I",))
    check("HEAD /health: 200", code == 200, (code, text))
    for raw, field in (('{"prompt": "x", "n_predict": 1e999}', "n_predict"),
                       ('{"prompt": "x", "seed": 18446744073709551616}', "seed")):
        code, answer = post(port, "/completion", raw)
        check(f"/completion {raw}: 400 naming {field}", code == 400 and field_of(answer) == field, (code, answer))
    code, answer = post(port, "/lora-adapters", [{"id": 0, "scael": 1}])
    check("POST /lora-adapters: an unknown field in an entry is refused naming it",
          code == 400 and field_of(answer) == "adapters" and "unknown field 'scael'" in answer["error"]["message"],
          (code, answer))
    code, answer = post(port, "/completion", {"prompt": "x", "n_predict": 2, "lora": [{"id": 0, "sclae": 1}]})
    check("... and in a request's lora", code == 400 and field_of(answer) == "lora", (code, answer))


def openai_param(code, answer):
    return (answer.get("error") or {}).get("param") if code == 400 and isinstance(answer, dict) else None


def check_chat_fields(port, qwen):
    """The chat routes: tool_choice that needs tools without any, /v1/responses' reasoning, a bad
    tool schema (named tools, with a template that builds a tool grammar), an empty stop_sequences
    entry, /apply-template's unknown fields."""
    m = [{"role": "user", "content": "hi"}]
    for route, body in (("/v1/chat/completions", {"messages": m, "tool_choice": "required"}),
                        ("/v1/chat/completions", {"messages": m, "tool_choice": {"type": "function",
                                                                                 "function": {"name": "f"}}}),
                        ("/v1/responses", {"input": "hi", "tool_choice": "required"})):
        code, answer = post(port, route, dict(body, max_tokens=4) if "messages" in body else body)
        check(f"{route} tool_choice {json.dumps(body['tool_choice'])} with no tools: 400 naming tool_choice",
              openai_param(code, answer) == "tool_choice", (code, answer))
    code, answer = post(port, "/v1/messages", {"messages": m, "max_tokens": 4, "tool_choice": {"type": "any"}})
    check("/v1/messages tool_choice any with no tools: 400 saying tool_choice", code == 400
          and "'tool_choice'" in answer["error"]["message"], (code, answer))
    code, answer = post(port, "/v1/chat/completions", {"messages": m, "max_tokens": 4, "tool_choice": "auto"})
    check("... tool_choice auto with no tools is fine", code == 200, (code, answer))
    for reasoning in ({"effort": "bogus"}, "high", {"effort": "low", "colour": 1}, {"summary": 3}):
        code, answer = post(port, "/v1/responses", {"input": "hi", "max_output_tokens": 4, "reasoning": reasoning})
        check(f"/v1/responses reasoning {json.dumps(reasoning)}: 400 naming reasoning",
              openai_param(code, answer) == "reasoning", (code, answer))
    code, answer = post(port, "/v1/responses", {"input": "hi", "max_output_tokens": 4,
                                                "reasoning": {"effort": "low", "summary": "auto"}})
    check("... a valid reasoning is fine", code == 200, (code, answer))
    code, answer = post(port, "/v1/messages", {"messages": m, "max_tokens": 4, "stop_sequences": ["ok", ""]})
    check("/v1/messages an empty stop_sequences entry: the message names stop_sequences[1]", code == 400
          and "'stop_sequences[1]'" in answer["error"]["message"], (code, answer))
    code, answer = post(port, "/v1/chat/completions", '{"messages": [], "max_tokens": 1e999}')
    check("/v1/chat/completions max_tokens 1e999: 400 naming max_tokens", openai_param(code, answer) == "max_tokens",
          (code, answer))
    code, answer = post(port, "/apply-template", {"messages": m, "mesages": m})
    check("/apply-template: an unknown field is refused naming it", code == 400 and field_of(answer) == "mesages",
          (code, answer))
    code, answer = post(port, "/apply-template", {"messages": m, "model": "x", "temperature": 0.5})
    check("... a chat request's fields are fine", code == 200 and "prompt" in answer, (code, answer))
    if qwen:
        tools = [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "bogus"}}}}}]
        code, answer = post(port, "/v1/chat/completions", {"messages": m, "max_tokens": 4, "tools": tools})
        check("a bad tool schema: 400 naming tools", openai_param(code, answer) == "tools", (code, answer))


def main(specd, models, templates=None):
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
                check_infill_and_routes(port)
                check_calibration_cache(port, confined)
        qwen = templates and os.path.join(templates, "Qwen-Qwen3-0.6B.jinja")
        qwen = qwen if qwen and os.path.exists(qwen) else None
        if not qwen:
            print("skip the bad tool schema: no llama.cpp model templates (deps/llama/src/models/templates)")
        chat_args = ["--api-key", KEY, "-m", os.path.join(models, "chat-chatml.gguf"), "-c", "512", "-t", "1"]
        with served(specd, chat_args + (["--chat-template-file", qwen] if qwen else []), "the chat fields") as (_, port):
            if port:
                check_chat_fields(port, qwen)
    finally:
        shutil.rmtree(confined, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
