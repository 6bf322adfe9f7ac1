#!/usr/bin/env python3
"""`specd serve` as a llama-server client sees it, through curl on the tiny models: /tokenize,
/detokenize, /props, /slots, /metrics (parsed as Prometheus text, counters moving after a
completion), every field llama-server's /completion accepts (at its default: accepted; implemented
ones acting as there; unimplemented ones refused naming the field; typos refused), json_schema
output matching its schema, and completion_probabilities in llama-server's shape on /completion
(the old shape stays on JSON-RPC); llama.cpp's sampler fields and a request's lora on the OpenAI
routes, acting as on /completion.

    test_llama_routes.py SPECD MODELS_DIR
"""
import json
import math
import os
import re
import sys
import threading
import time

from test_serve import (check, curl, curl_json, failures, rpc, sse_events, start_server, stop_server,
                        summary)

KEY = "test-key"

# Every field llama-server 0.5.0's /completion reads (tools/server/server-schema.cpp, the flat
# speculative.* keys it used to take, and server-context.cpp's prompt, id_slot, message_delimiters,
# grammar_type; t_max_prompt_ms, documented but no longer read), each at its default value (n_predict and its aliases small, so the test is quick).
LLAMA_FIELDS_AT_DEFAULT = {
    "prompt": "once upon a time", "verbose": False, "timings_per_token": False, "stream": False,
    "stream_options": {"include_usage": False}, "cache_prompt": True, "return_tokens": False,
    "return_progress": False, "sse_ping_interval": 30, "n_predict": 4, "max_completion_tokens": 4,
    "max_tokens": 4, "n_indent": 0, "n_keep": 0, "n_discard": 0, "n_cmpl": 1, "n": 1, "n_cache_reuse": 0,
    "t_max_predict_ms": -1, "t_max_prompt_ms": -1, "response_fields": [], "top_k": 40, "top_p": 0.95, "min_p": 0.05,
    "top_n_sigma": -1, "xtc_probability": 0, "xtc_threshold": 0.1, "typical_p": 1, "temperature": 0.8,
    "dynatemp_range": 0, "dynatemp_exponent": 1, "repeat_last_n": 64, "repeat_penalty": 1,
    "frequency_penalty": 0, "presence_penalty": 0, "dry_multiplier": 0, "dry_base": 1.75,
    "dry_allowed_length": 2, "dry_penalty_last_n": 64, "mirostat": 0, "mirostat_tau": 5, "mirostat_eta": 0.1,
    "adaptive_target": -1, "adaptive_decay": 0.9, "seed": -1, "n_probs": 0, "logprobs": 0, "min_keep": 0,
    "backend_sampling": False, "post_sampling_probs": False, "lora": [],
    "dry_sequence_breakers": ["\n", ":", "\"", "*"], "grammar": "", "grammar_lazy": False, "chat_format": 0,
    "reasoning_format": "none", "generation_prompt": "", "parse_tool_calls": False, "chat_parser": "",
    "continue_final_message": False, "echo": False, "preserved_tokens": [], "grammar_triggers": [],
    "reasoning_control": False, "reasoning_budget_tokens": -1, "reasoning_budget_start_tag": "",
    "reasoning_budget_end_tags": [], "reasoning_budget_end_tag": "", "reasoning_budget_message": "",
    "logit_bias": [], "ignore_eos": False, "stop": [],
    "samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"],
    "id_slot": -1, "message_delimiters": [], "grammar_type": "", "speculative.n_max": 4, "speculative.n_min": 0,
    "speculative.p_min": 0, "speculative.type": "draft", "speculative.ngram_size_n": 3,
    "speculative.ngram_size_m": 48, "speculative.ngram_min_hits": 2,
}
# json_schema is the 84th: it cannot go with grammar, so it has checks of its own below.

# Fields specd does not implement, each at a value that would change the output.
UNIMPLEMENTED = {
    "verbose": True, "return_progress": True, "sse_ping_interval": 5, "n_indent": 2, "n_discard": 8,
    "n_cache_reuse": 16, "t_max_prompt_ms": 100, "adaptive_target": 0.5,
    "backend_sampling": True,
    "chat_format": 3, "parse_tool_calls": True, "echo": True, "reasoning_budget_tokens": 10,
    "speculative.ngram_size_m": 8,
}


def completion(port, body, path="/completion"):
    return curl_json(port, path, body)


def error_field(answer):
    return answer.get("error", {}).get("data", {}).get("field") if isinstance(answer, dict) else None


def parse_prometheus(text):
    """Checks the text exposition format line by line; returns {(name, labels): value}. Every
    sample's metric must have a # TYPE line before it; a bad line fails the test."""
    types, samples, bad = {}, {}, []
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*)?\})? (\S+)$')
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                bad.append(line)
            types[parts[2]] = parts[3]
            continue
        m = sample.match(line)
        if not m or m.group(1) not in types:
            bad.append(line)
            continue
        try:
            samples[(m.group(1), m.group(3) or "")] = float(m.group(5))
        except ValueError:
            bad.append(line)
    return samples, types, bad


# ---- routes -----------------------------------------------------------------------------------

def check_tokenize(port):
    text = "once upon a time"
    code, answer = completion(port, {"content": text}, "/tokenize")
    _, via_rpc = rpc(port, "tokenize", {"text": text, "add_special": False}, key=KEY)
    check("/tokenize: the tokenize method's ids, no BOS by default (llama-server's add_special false)",
          code == 200 and answer == {"tokens": via_rpc["result"]["tokens"]}, (code, answer, via_rpc))
    code, with_bos = completion(port, {"content": text, "add_special": True}, "/tokenize")
    _, rpc_bos = rpc(port, "tokenize", {"text": text}, key=KEY)
    check("/tokenize add_special: as the tokenize method's default", code == 200
          and with_bos["tokens"] == rpc_bos["result"]["tokens"], (with_bos, rpc_bos))
    code, pieces = completion(port, {"content": text, "with_pieces": True}, "/tokenize")
    check("/tokenize with_pieces: [{id, piece}], the pieces spell the text", code == 200
          and [p["id"] for p in pieces["tokens"]] == answer["tokens"]
          and "".join(p["piece"] for p in pieces["tokens"]).strip() == text, pieces)
    # Special-token text ("</s>" is the tiny vocabulary's end token, id 2): one token by default, as
    # llama-server parses it; plain text with parse_special false, as the JSON-RPC method's default.
    code, special = completion(port, {"content": "a</s>"}, "/tokenize")
    code_plain, plain = completion(port, {"content": "a</s>", "parse_special": False}, "/tokenize")
    _, rpc_plain = rpc(port, "tokenize", {"text": "a</s>", "add_special": False}, key=KEY)
    check("/tokenize parses special-token text by default (llama-server's parse_special true)",
          code == 200 and special["tokens"][-1] == 2 and len(special["tokens"]) == 2, special)
    check("/tokenize parse_special false, and the JSON-RPC method by default: plain text",
          code_plain == 200 and 2 not in plain["tokens"] and len(plain["tokens"]) > 2
          and plain["tokens"] == rpc_plain["result"]["tokens"], (plain, rpc_plain))
    code, done = completion(port, {"prompt": "a</s>", "n_predict": 1, "temperature": 0})
    check("/completion prompts parse special-token text too (tokens_evaluated counts BOS, 'a', '</s>')",
          code == 200 and done["tokens_evaluated"] == 3, (code, done.get("tokens_evaluated")))
    code, refused = completion(port, {"text": text}, "/tokenize")
    check("/tokenize with an unknown field: 400 naming it", code == 400 and error_field(refused) == "text",
          (code, refused))
    code, back = completion(port, {"tokens": answer["tokens"]}, "/detokenize")
    check("/detokenize gives the text back", code == 200 and back["content"].strip() == text, (code, back))
    code, refused = completion(port, {"tokens": "abc"}, "/detokenize")
    check("/detokenize with bad tokens: 400 naming them", code == 400 and error_field(refused) == "tokens",
          (code, refused))
    code, _ = curl(port, "/tokenize")
    check("GET /tokenize: 405", code == 405, code)
    code, _ = curl(port, "/metrics", {})
    check("POST /metrics: 405", code == 405, code)


def check_props(port, target):
    code, text = curl(port, "/props")
    props = json.loads(text)
    _, status = rpc(port, "status", key=KEY)
    settings = props.get("default_generation_settings", {})
    check("/props: model path, n_ctx, one slot, build info, default settings", code == 200
          and props["model_path"] == target and settings["n_ctx"] == 256 and props["total_slots"] == 1
          and props["build_info"] == status["result"]["version"] and settings["params"]["temperature"] == 0.8
          and settings["params"]["top_k"] == 40 and settings["speculative"] is True
          and "chat_template" in props, props)
    inv = props.get("batch_invariant", {})
    check("/props and status: batch_invariant, what runs", inv.get("invariant") is True and inv.get("note") is None
          and inv.get("setting") and status["result"].get("batch_invariant") == inv, (inv, status))
    code, _ = curl(port, "/props", key="wrong")
    check("/props needs the API key", code == 401, code)


def check_slots_and_metrics(port):
    _, _, bad = parse_prometheus("# TYPE a counter\na 1\nb 2\na{x=1} 3\na one\n")
    check("the Prometheus checker refuses what is not the format (control)", len(bad) == 3, bad)
    code, text = curl(port, "/metrics")
    before, types, bad = parse_prometheus(text)
    check("/metrics: Prometheus text exposition format", code == 200 and not bad and types, (code, bad, text[:300]))
    # Fixed chains (llama-server's flat speculative.n_min): drafts whatever the cost model thinks.
    request = {"prompt": "one day the dog ran", "n_predict": 24, "temperature": 0, "ignore_eos": True,
               "speculative.n_min": 3, "speculative.n_max": 3}
    code, done = completion(port, request)
    code, text = curl(port, "/metrics")
    after, _, bad = parse_prometheus(text)

    def moved(name, labels=""):
        return after.get((name, labels), 0) - before.get((name, labels), 0)

    spec = done["speculative"]
    check("/metrics: the counters move by the completion's figures", not bad
          and moved("specd:requests_total") == 1 and moved("llamacpp:tokens_predicted_total") == 24
          and moved("llamacpp:spec_decode_num_draft_tokens_total") == spec["drafted"]
          and moved("llamacpp:spec_decode_num_accepted_tokens_total") == spec["accepted"]
          and moved("specd:spec_drafted_tokens_total", 'drafter="draft"') == spec["drafted"]
          and moved("specd:spec_accepted_tokens_total", 'drafter="draft"') == spec["accepted"]
          and spec["drafted"] > 0 and after[("llamacpp:requests_processing", "")] == 0, (spec, text))
    # one target pass per step (the prompt's last chunk verifies the first step in the server); a
    # fixed 3 keeps the pass's shape, so most reuse the graph before them (not the prompt's, the
    # first step's, the last steps' with less room)
    passes, reused = moved("specd:graph_passes_total", 'model="target"'), moved("specd:graph_reused_total",
                                                                               'model="target"')
    check("/metrics: graph passes and reuses per model", spec["steps"] <= passes <= spec["steps"] + 1
          and passes - 4 <= reused <= passes and moved("specd:graph_passes_total", 'model="draft"') > spec["steps"]
          and 0 < moved("specd:graph_reused_total", 'model="draft"'), (passes, reused, spec, text[-900:]))
    check("timings as llama-server's: cache_n, draft_n, draft_n_accepted", done["timings"]["draft_n"] == spec["drafted"]
          and done["timings"]["draft_n_accepted"] == spec["accepted"] and "cache_n" in done["timings"], done["timings"])
    code, ngram = completion(port, dict(request, **{"speculative.type": "ngram-simple,draft"}))
    _, text = curl(port, "/metrics")
    later, _, _ = parse_prometheus(text)
    per = {d["type"]: d for d in ngram["speculative"]["drafters"]}
    check("/metrics: per drafter type after a drafter list",
          all(later.get(("specd:spec_drafted_tokens_total", f'drafter="{t}"'), 0)
              - after.get(("specd:spec_drafted_tokens_total", f'drafter="{t}"'), 0) == d["drafted"]
              for t, d in per.items()) and set(per) == {"ngram-simple", "draft"}, (per, text))
    code, text = curl(port, "/slots")
    slots = json.loads(text)
    check("/slots: one slot, idle, the latest request's prompt, params and speculative stats", code == 200
          and len(slots) == 1 and slots[0]["id"] == 0 and slots[0]["state"] == "idle"
          and slots[0]["is_processing"] is False and slots[0]["n_ctx"] == 256
          and slots[0]["n_prompt_tokens"] == ngram["tokens_evaluated"] and slots[0]["n_decoded"] == 24
          and slots[0]["speculative"]["drafted"] == ngram["speculative"]["drafted"]
          and slots[0]["params"]["n_predict"] == 24, slots)
    check_slot_actions(port)


def check_slot_actions(port):
    """llama-server's slot actions are refused by name (501 not_supported_error, its answer without
    --slot-save-path), never answered as GET /slots."""
    for method_path, body, action in ((("/slots?action=erase",), None, "erase"),
                                      (("/slots/0?action=save",), {"filename": "x.bin"}, "save"),
                                      (("/slots/0?action=restore",), {"filename": "../../etc/passwd"}, "restore"),
                                      (("/slots/0?action=erase",), {}, "erase")):
        code, text = curl(port, method_path[0], body)
        error = json.loads(text).get("error", {}) if text.startswith("{") else {}
        check(f"{'POST' if body is not None else 'GET'} {method_path[0]}: 501 not_supported_error naming the action "
              f"'{action}'", code == 501 and f"action '{action}' needs --slot-save-path" in error.get("message", "")
              and error.get("type") == "not_supported_error" and error.get("code") == 501, (code, text[:300]))


def check_slot_while_processing(port):
    """A completion runs (started async, long: a million tokens with context shifts) while /slots
    and /metrics are asked; it is cancelled after, and was still running then, so they saw it."""
    _, started = rpc(port, "completion.start", {"prompt": "one day", "n_predict": 1000000, "ignore_eos": True},
                     key=KEY)
    job = started["result"]["id"]
    _, text = curl(port, "/slots")
    slots = json.loads(text)
    code_busy, _ = curl(port, "/slots?fail_on_no_slot=1")
    _, metrics = curl(port, "/metrics")
    samples, _, _ = parse_prometheus(metrics)
    _, poll = rpc(port, "completion.poll", {"id": job}, key=KEY)
    still_running = poll["result"]["finished"] is False
    rpc(port, "completion.cancel", {"id": job}, key=KEY)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # a poll's wait ends at the first news (pieces not seen yet), not at the end
        _, polled = rpc(port, "completion.poll", {"id": job, "wait_ms": 2000}, key=KEY)
        if polled.get("result", {}).get("finished"):
            break
    check("while a completion runs: /slots processing, fail_on_no_slot 503, requests_processing 1", still_running
          and slots[0]["state"] == "processing" and slots[0]["is_processing"] is True and slots[0]["id_task"] == job
          and code_busy == 503 and samples[("llamacpp:requests_processing", "")] == 1, (slots, code_busy, poll))
    code, _ = curl(port, "/slots?fail_on_no_slot=1")
    check("/slots?fail_on_no_slot=1 when idle: 200", code == 200, code)


# ---- /completion's fields ---------------------------------------------------------------------

def check_fields(port):
    code, answer = completion(port, LLAMA_FIELDS_AT_DEFAULT)
    check(f"all {len(LLAMA_FIELDS_AT_DEFAULT)} llama-server fields at their defaults are accepted",
          code == 200 and answer["tokens_predicted"] == 4, (code, answer))
    base = {"prompt": "once upon a time", "temperature": 0}
    for name, value in UNIMPLEMENTED.items():
        code, answer = completion(port, dict(base, n_predict=2, **{name: value}))
        message = answer.get("error", {}).get("message", "") if isinstance(answer, dict) else ""
        check(f"unimplemented {name}={value!r}: 400 naming it", code == 400 and error_field(answer) == name
              and "not implemented" in message, (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, adaptive_decay=0.5))
    check("a tuning field is accepted while its sampler is off (it changes nothing)", code == 200, (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, adaptive_target=0.5, adaptive_decay=0.5))
    check("... and refused with its sampler on, naming the sampler", code == 400
          and error_field(answer) == "adaptive_target", (code, answer))
    samplers = {"dry_multiplier": 0.8, "dry_base": 2.0, "dry_allowed_length": 3, "dry_penalty_last_n": 32,
                "dry_sequence_breakers": ["\n", "."], "top_n_sigma": 1.5, "xtc_probability": 0.5,
                "xtc_threshold": 0.2, "dynatemp_range": 0.5, "dynatemp_exponent": 2.0, "min_keep": 2,
                "mirostat": 2, "mirostat_tau": 4.0}
    code, answer = completion(port, dict(base, n_predict=6, temperature=0.8, seed=5, ignore_eos=True,
                                         samplers=["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p",
                                                   "min_p", "xtc", "temperature"], **samplers))
    settings = answer.get("generation_settings", {}) if isinstance(answer, dict) else {}
    check("DRY, top-n-sigma, XTC, dynatemp, min_keep and mirostat act, with speculation, and are echoed",
          code == 200 and answer["tokens_predicted"] == 6 and answer["speculative"]["enabled"] is True
          and all(settings.get(k) == v for k, v in samplers.items()), (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, xtc_probability=2))
    check("xtc_probability out of range: 400 naming it", code == 400 and error_field(answer) == "xtc_probability",
          (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, dry_sequence_breakers=[""]))
    check("an empty DRY sequence breaker: 400 naming it", code == 400
          and error_field(answer) == "dry_sequence_breakers", (code, answer))
    for typo in ("temprature", "max_token", "speculative.n_maxx"):
        code, answer = completion(port, dict(base, n_predict=2, **{typo: 1}))
        check(f"typo {typo}: 400 unknown field", code == 400 and error_field(answer) == typo
              and "unknown field" in answer["error"]["message"], (code, answer))
    for name, value in (("n_cmpl", 2), ("n", 3), ("id_slot", -2)):
        code, answer = completion(port, dict(base, n_predict=2, **{name: value}))
        check(f"{name}={value}: 400 naming it", code == 400 and error_field(answer) == name, (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, id_slot=1))
    check("id_slot past the one slot wraps round to it, as llama-server", code == 200 and answer.get("id_slot") == 0,
          (code, answer))
    code, answer = completion(port, dict(base, max_tokens=5))
    check("max_tokens is n_predict", code == 200 and answer["tokens_predicted"] == 5, answer)
    code, answer = completion(port, dict(base, max_completion_tokens=3, max_tokens=5))
    check("max_completion_tokens before max_tokens (llama-server's order)", answer["tokens_predicted"] == 3, answer)
    code, answer = completion(port, dict(base, n_predict=2, max_tokens=5))
    check("n_predict before its aliases", answer["tokens_predicted"] == 2, answer)
    code, answer = completion(port, dict(base, n_predict=6, seed=None, cache_prompt=False, id_slot=0))
    check("null means absent; cache_prompt false and id_slot 0 accepted", code == 200
          and answer["tokens_predicted"] == 6, (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, prompt=["once upon", "a time"]))
    check("several prompts in one request: llama-server's array of results, one each, with its index", code == 200
          and isinstance(answer, list) and [a.get("index") for a in answer] == [0, 1]
          and all(a["tokens_predicted"] == 2 for a in answer), (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, prompt=["once upon", 5, 7]))
    check("one prompt mixing text and token ids", code == 200 and answer["tokens_predicted"] == 2, (code, answer))
    code, answer = completion(port, dict(base, n_predict=6, stop=" "))
    check("stop as one string (llama-server's form)", code == 200 and " " not in answer["content"]
          and answer["generation_settings"]["stop"] == [" "], (code, answer))
    code, answer = completion(port, dict(base, n_predict=6, logit_bias={"5": False}, return_tokens=True))
    check("logit_bias as an object {id: bias}", code == 200 and 5 not in answer["tokens"]
          and answer["generation_settings"]["logit_bias"] == [[5, False]], (code, answer))
    code, answer = completion(port, dict(base, n_predict=6, samplers="ekyp mt".replace(" ", "")))
    check("samplers as letters in specd's order", code == 200, (code, answer))
    code, answer = completion(port, dict(base, n_predict=6, samplers=["top_k", "temperature", "top_p"]))
    check("samplers in another order: 400", code == 400 and error_field(answer) == "samplers", (code, answer))
    code, answer = completion(port, dict(base, n_predict=6, samplers=["top_k", "min_p", "temperature"]))
    check("samplers leaving out one that is on: 400 naming it", code == 400
          and "leaves out top_p" in answer["error"]["message"], (code, answer))

    code, answer = completion(port, dict(base, n_predict=3, response_fields=["content", "timings/predicted_n",
                                                                             "no/such"]))
    check("response_fields: only those, nested ones under their path", code == 200
          and set(answer) == {"content", "timings/predicted_n"} and answer["timings/predicted_n"] == 3, answer)
    code, plain = completion(port, dict(base, n_predict=8, return_tokens=True))
    _, back = completion(port, {"tokens": plain["tokens"]}, "/detokenize")
    check("return_tokens: the generated ids, which spell the content", len(plain["tokens"]) == 8
          and back["content"] == plain["content"], (plain, back))
    code, text = curl(port, "/completion", dict(base, n_predict=8, stream=True, return_tokens=True,
                                                 timings_per_token=True), extra=["-N"])
    events = sse_events(text)
    check("stream with return_tokens and timings_per_token: the chunks' ids add up; every chunk has timings",
          code == 200 and [t for e in events for t in e.get("tokens", [])] == plain["tokens"]
          and all("timings" in e for e in events[:-1]) and events[-1]["timings"]["predicted_n"] == 8,
          (code, text[:600]))
    code, off = completion(port, dict(base, n_predict=8, **{"speculative.n_max": 0}))
    check("flat speculative.n_max 0 turns speculation off (same text)", code == 200
          and off["speculative"]["enabled"] is False and off["content"] == plain["content"], off)
    code, listed = completion(port, dict(base, n_predict=8, **{"speculative.type": "ngram-simple,draft",
                                                                "speculative.n_min": 1, "speculative.p_min": 0.1}))
    settings = listed["generation_settings"]["speculative"]
    check("flat speculative.type (a comma list), n_min, p_min", code == 200
          and listed["speculative"]["type"] == "ngram-simple,draft" and settings["n_min"] == 1
          and abs(settings["p_min"] - 0.1) < 1e-6 and listed["content"] == plain["content"], listed)
    code, answer = completion(port, dict(base, n_predict=2, speculative={"n_max": 3}, **{"speculative.n_max": 4}))
    check("flat and nested speculative.n_max both: 400", code == 400
          and error_field(answer) == "speculative.n_max", (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, **{"speculative.type": "medusa"}))
    check("unknown speculative.type: 400 naming it", code == 400 and error_field(answer) == "speculative.type",
          (code, answer))
    code, answer = completion(port, dict(base, n_predict=2, **{"speculative.type": "draft-eagle3"}))
    check("llama-server's draft-eagle3 without an EAGLE-3 head: 400 saying what it needs", code == 400
          and "needs an EAGLE-3 head" in json.dumps(answer), (code, answer))


def matches_schema(doc):
    return (isinstance(doc, dict) and set(doc) == {"name", "age", "tags"} and isinstance(doc["name"], str)
            and isinstance(doc["age"], int) and 0 <= doc["age"] <= 120 and isinstance(doc["tags"], list)
            and all(t in ("a", "b") for t in doc["tags"]) and len(doc["tags"]) <= 2)


def check_generation_prompt(port):
    """generation_prompt (grammar_type): the grammar reads the text the prompt ends with first, as
    llama-server's sampler, for a tool-call grammar and json_schema; a user's grammar is not prefilled."""
    grammar = 'root ::= "AB" [a-z]+'
    body = {"prompt": "once upon a time AB", "grammar": grammar, "n_predict": 6, "temperature": 0}
    _, plain = completion(port, body)
    code, prefilled = completion(port, dict(body, generation_prompt="AB", grammar_type="tool_calls"))
    _, user = completion(port, dict(body, generation_prompt="AB"))
    content = lambda a: a.get("content", "") if isinstance(a, dict) else ""
    check("generation_prompt + grammar_type tool_calls: the grammar starts after the prefill", code == 200
          and re.fullmatch(r"[a-z]+", content(prefilled)) and content(plain).startswith("AB")
          and content(user).startswith("AB"), (plain, prefilled, user))
    code, obj = completion(port, {"prompt": "the person: {", "json_schema": {}, "generation_prompt": "{",
                                  "n_predict": 8, "temperature": 0})
    check("generation_prompt + json_schema: the object goes on after its '{'", code == 200
          and not content(obj).lstrip().startswith("{"), obj)
    code, bad = completion(port, dict(body, generation_prompt="XY", grammar_type="tool_calls"))
    check("a prefill the grammar refuses: 400 saying so", code == 400 and "prefill" in json.dumps(bad), (code, bad))
    code, _ = completion(port, dict(body, generation_prompt=3))
    check("generation_prompt must be a string", code == 400, code)


def check_json_schema(port):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                        "maxItems": 2}},
              "required": ["name", "age", "tags"], "additionalProperties": False}
    outputs = []
    for seed in range(4):
        code, answer = completion(port, {"prompt": "the person:", "json_schema": schema, "n_predict": 200,
                                         "temperature": 1, "seed": seed})
        try:
            doc = json.loads(answer["content"])
        except (ValueError, KeyError, TypeError):
            doc = None
        outputs.append((code, answer.get("stop_type") if isinstance(answer, dict) else None, doc))
    check("json_schema: the output parses and matches the schema (4 sampled runs, with speculation)",
          all(code == 200 and stop == "eos" and matches_schema(doc) for code, stop, doc in outputs), outputs)
    code, answer = completion(port, {"prompt": "x", "json_schema": {}, "n_predict": 60, "temperature": 0})
    check("json_schema {} means any object", code == 200 and answer["content"].lstrip().startswith("{"), answer)
    code, answer = completion(port, {"prompt": "x", "json_schema": {"type": "string", "pattern": "a+"}})
    check("json_schema with a pattern llama.cpp would drop (unanchored): 400 naming it", code == 400
          and error_field(answer) == "json_schema" and "pattern" in answer["error"]["message"], (code, answer))
    code, answer = completion(port, {"prompt": "x", "json_schema": schema, "grammar": "root ::= \"a\""})
    check("json_schema and grammar both: 400", code == 400 and error_field(answer) == "json_schema", (code, answer))


# ---- probabilities ----------------------------------------------------------------------------

def same_probs(a, b, tolerance=1e-4):
    """The same entries (ids, tokens, bytes, lists), each number within tolerance of the other's."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(same_probs(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_probs(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tolerance
    return a == b


def check_probs(port):
    # Fixed chains of 3: the runs compared below then make the same target passes after the first
    # token, so those probabilities are the same floats (adaptive lengths and auto trees follow
    # timings). The first token's come from the pass that holds what was not cached of the prompt,
    # 6 tokens the first time and 1 later: another shape rounds differently, so the lists are
    # compared with a tolerance (same_probs).
    request = {"prompt": "one day the dog ran", "n_predict": 12, "temperature": 0, "n_probs": 3,
               "return_tokens": True, "speculative": {"n_min": 3, "n_max": 3, "tree": "off"}}
    code, llama = completion(port, request)
    entries = llama.get("completion_probabilities", [])

    def well_formed(item, key):
        return (set(item) == {"id", "token", "bytes", key} and isinstance(item["id"], int)
                and bytes(item["bytes"]).decode("utf-8", "replace") == item["token"])

    ok = code == 200 and len(entries) == 12 and [e["id"] for e in entries] == llama["tokens"]
    for e in entries:
        top = e.get("top_logprobs", [])
        ok = ok and well_formed({k: v for k, v in e.items() if k != "top_logprobs"}, "logprob") and len(top) == 3
        ok = ok and all(well_formed(t, "logprob") for t in top)
        ok = ok and [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        ok = ok and sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-6
        ok = ok and e["logprob"] == top[0]["logprob"] and e["id"] == top[0]["id"]  # greedy: the top token
    check("/completion n_probs: llama-server's entries {id, token, bytes, logprob, top_logprobs}", ok,
          (code, entries[:2]))
    _, old = rpc(port, "completion", {k: v for k, v in request.items() if k != "return_tokens"}, key=KEY)
    old_entries = old["result"]["completion_probabilities"]
    same = len(old_entries) == 12 and all(
        set(o) == {"content", "probs"} and [p["tok_str"] for p in o["probs"]] == [t["token"] for t in e["top_logprobs"]]
        and all(abs(math.log(p["prob"]) - t["logprob"]) < 1e-5 for p, t in zip(o["probs"], e["top_logprobs"]))
        for o, e in zip(old_entries, entries))
    check("JSON-RPC keeps {content, probs: [{tok_str, prob}]}, the same numbers", same, old_entries[:2])
    code, post = completion(port, dict(request, post_sampling_probs=True, temperature=1, seed=3))
    entries = post.get("completion_probabilities", [])

    def own_prob(e):  # the token's own: from the list, null when it is not among the top n
        listed = [t["prob"] for t in e["top_probs"] if t["id"] == e["id"]]
        return e["prob"] == listed[0] if listed else e["prob"] is None

    check("post_sampling_probs: {prob, top_probs}, probabilities of the distribution drawn from", code == 200
          and len(entries) == 12 and all(set(e) == {"id", "token", "bytes", "prob", "top_probs"}
                                         and 0 < len(e["top_probs"]) <= 3 and own_prob(e) for e in entries)
          and all(sum(t["prob"] for t in e["top_probs"]) <= 1 + 1e-6 for e in entries), (code, entries[:2]))
    code, specd_shape = completion(port, dict(request, probs_format="specd"))
    check("probs_format specd on /completion gives the old shape", code == 200
          and same_probs(specd_shape["completion_probabilities"], old_entries), specd_shape.get("completion_probabilities"))
    _, via_rpc = rpc(port, "completion", dict(request, probs_format="llama"), key=KEY)
    check("probs_format llama on JSON-RPC gives llama-server's shape",
          same_probs(via_rpc["result"]["completion_probabilities"], llama["completion_probabilities"]), via_rpc)
    code, fresh = completion(port, dict(request, cache_prompt=False))
    check("cache_prompt false decodes the whole prompt again (cache_n 0), the default reuses it",
          code == 200 and fresh["timings"]["cache_n"] == 0
          and fresh["timings"]["prompt_n"] == llama["timings"]["prompt_n"] + llama["timings"]["cache_n"]
          and via_rpc["result"]["timings"]["cache_n"] == fresh["timings"]["prompt_n"] - 1
          and same_probs(fresh["completion_probabilities"], llama["completion_probabilities"]),
          (code, llama["timings"], via_rpc["result"]["timings"], fresh["completion_probabilities"][:1], llama["completion_probabilities"][:1]))
    code, alias = completion(port, dict({k: v for k, v in request.items() if k != "n_probs"}, logprobs=3))
    check("logprobs is n_probs on /completion", code == 200
          and same_probs(alias["completion_probabilities"], llama["completion_probabilities"]), alias)


def check_seeded(port):
    """A seed fixes the text whatever the speculation (coupled draws), as llama-server's users
    expect; "reproducible": false keeps rejection sampling; a bad value is refused by name."""
    base = {"prompt": "she was", "n_predict": 16, "temperature": 0.8, "seed": 5, "return_tokens": True}
    runs = [completion(port, dict(base, speculative={"n_max": k, "n_min": k})) for k in (1, 4)]
    runs.append(completion(port, dict(base, speculative={"n_max": 0})))
    check("a seeded request gives the same tokens with drafts of 1, of 4 and none",
          all(code == 200 for code, _ in runs) and runs[0][1]["tokens"] == runs[1][1]["tokens"] == runs[2][1]["tokens"]
          and len(runs[0][1]["tokens"]) == 16, [r[1].get("tokens") for r in runs])
    # rejection sampling's text follows the drafts, which follow measured costs: it may draw the end
    # of text early (it did under ASan), so this one request ignores it
    code, off = completion(port, dict(base, reproducible=False, ignore_eos=True, speculative={"n_max": 4, "n_min": 4}))
    check("reproducible false is accepted (rejection sampling)", code == 200 and len(off["tokens"]) == 16, off)
    code, bad = completion(port, dict(base, reproducible=3))
    check("reproducible must be a boolean", code == 400 and "reproducible" in bad["error"]["message"], (code, bad))


def check_id_slot(port, base):
    """id_slot, as llama-server: the request runs in that slot (modulo the slots), its answer says
    which; one waiting for its busy slot lets the requests behind it that can run elsewhere go by."""
    answers = {s: completion(port, dict(base, n_predict=2, id_slot=s)) for s in (0, 2, 4)}
    check("id_slot 0, 2 and 4 (wrapped to 1 on 3 slots): each runs there and says so",
          all(code == 200 for code, _ in answers.values())
          and [answers[s][1].get("id_slot") for s in (0, 2, 4)] == [0, 2, 1], answers)
    code, answer = completion(port, dict(base, n_predict=2))
    check("without id_slot the answer names the slot it ran in", code == 200 and answer.get("id_slot") in (0, 1, 2),
          (code, answer))
    code, text = curl(port, "/completion", dict(base, n_predict=3, id_slot=2, stream=True))
    events = sse_events(text)
    check("streamed: every event names the slot", code == 200 and events and all(e.get("id_slot") == 2 for e in events),
          (code, events))
    for path, body in (("/v1/completions", {"prompt": "the slot test"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "the slot test"}]}),
                       ("/v1/responses", {"input": "the slot test", "max_output_tokens": 2})):
        code, _ = curl(port, path, dict(body, max_tokens=2, temperature=0, id_slot=2) if "input" not in body
                       else dict(body, temperature=0, id_slot=2))
        _, text = curl(port, "/slots")
        latest = max(json.loads(text), key=lambda x: x.get("id_task", -1))
        check(f"{path} takes id_slot too (llama-server's extension): the latest task ran in slot 2",
              code == 200 and latest["id"] == 2, (code, text[:300]))
        code, answer = completion(port, dict(body, id_slot="x"), path)
        check(f"{path} id_slot not an integer: 400 naming it", openai_error_param(code, answer) == "id_slot",
              (code, answer))
    # slot 1 busy with a long request: a second one for slot 1 waits for it; one for any slot does not
    done, t0 = {}, time.monotonic()
    def send(name, body):
        code, answer = completion(port, body)
        ok = code == 200 and isinstance(answer, dict)
        done[name] = (time.monotonic() - t0, answer.get("id_slot") if ok else None,
                      answer["timings"]["predicted_ms"] / 1000 if ok else None)
    long_body = dict(base, n_predict=900, ignore_eos=True, id_slot=1)
    threads = [threading.Thread(target=send, args=("long", long_body))]
    threads[0].start()
    busy = False
    for _ in range(500):  # until slot 1 holds the long one (900 tokens: some 0.2 s here, more under sanitizers)
        code, text = curl(port, "/slots")
        busy = code == 200 and any(x["id"] == 1 and x["is_processing"] for x in json.loads(text))
        if busy or done:
            break
        time.sleep(0.005)
    threads.append(threading.Thread(target=send, args=("same slot", dict(base, n_predict=2, id_slot=1))))
    threads[1].start()
    queued = False
    for _ in range(500):  # until it waits in the queue, first in line
        metrics = parse_prometheus(curl(port, "/metrics")[1])[0]
        queued = metrics.get(("llamacpp:requests_deferred", ""), 0) >= 1
        if queued or len(done) > 1:
            break
        time.sleep(0.005)
    threads.append(threading.Thread(target=send, args=("any slot", dict(base, n_predict=2))))
    threads[2].start()
    for t in threads:
        t.join(120)
    ok = busy and queued and len(done) == 3 and None not in [d[1] for d in done.values()]
    # the long one generated for its predicted_ms after t0: the same-slot one could end only after that
    check("a request for a busy slot waits for it, one for any slot goes by", ok
          and done["any slot"][1] != 1 and done["any slot"][0] < done["long"][0]
          and done["same slot"][1] == 1 and done["same slot"][0] >= done["long"][2], (busy, queued, done))


def check_outputs(specd, models):
    """n_cmpl (n) > 1 and several prompts on /completion, as llama-server: one completion per output
    (index p * n + c), each its own seed (seed + c) and slot; 1 to the slots."""
    # --context-shift: check_id_slot's long request must run its 900 tokens (without a shift a slot of
    # 341 cells ends it at the context's end, as llama-server 0.5.0, too soon for the race it sets up)
    server, port = start_server(specd, ["--api-key", KEY, "-m", os.path.join(models, "target.gguf"), "-c", "1024",
                                        "-np", "3", "-md", os.path.join(models, "draft.gguf"), "--context-shift"])
    try:
        check("a server with 3 slots starts", bool(port))
        if not port:
            return
        base = {"prompt": "once upon", "n_predict": 8, "temperature": 0}
        _, one = completion(port, base)
        code, three = completion(port, dict(base, n_cmpl=3))
        check("n_cmpl 3 greedy: three results, index 0-2, each the n_cmpl 1 answer", code == 200
              and isinstance(three, list) and [a.get("index") for a in three] == [0, 1, 2]
              and all(a["content"] == one["content"] for a in three), (code, three))
        # the outputs share the prompt's cells: decoded once, each other output only its last token
        long_prompt = dict(base, prompt="the little dog ran to the park and played with the ball all day long")
        prompt_tokens = lambda: parse_prometheus(curl(port, "/metrics")[1])[0].get(("llamacpp:prompt_tokens_total", ""))
        before = prompt_tokens()
        code, shared = completion(port, dict(long_prompt, n_cmpl=3))
        decoded = prompt_tokens() - before
        n_prompt = shared[0].get("tokens_evaluated", 0) if code == 200 else 0
        _, lone = completion(port, long_prompt)
        check("n_cmpl 3: the prompt decoded once, the other outputs share its cells, the same answers",
              code == 200 and n_prompt > 4 and decoded <= n_prompt + 2
              and all(a["content"] == lone["content"] for a in shared), (decoded, n_prompt, shared))
        sampled = dict(base, temperature=1.5, top_k=0, top_p=1, min_p=0, seed=9)
        code, two = completion(port, dict(sampled, n=2))
        alone = [completion(port, dict(sampled, seed=9 + c))[1].get("content") for c in range(2)]
        check("n 2 seeded: output c is the answer with seed + c, and they differ", code == 200
              and [a.get("content") for a in two] == alone and alone[0] != alone[1], (code, two, alone))
        prompts = dict(base, prompt=["once upon", "the dog"], n_cmpl=2)
        code, four = completion(port, prompts)
        _, dog = completion(port, dict(base, prompt="the dog"))
        check("2 prompts x n_cmpl 2: index p * 2 + c, each its prompt's answer", code == 200
              and [a.get("index") for a in four] == [0, 1, 2, 3]
              and [a["content"] for a in four] == [one["content"]] * 2 + [dog["content"]] * 2, (code, four))
        code, text = curl(port, "/completion", dict(prompts, stream=True))
        pieces = ["", "", "", ""]
        events = sse_events(text)
        for e in events:
            pieces[e["index"]] += e.get("content", "")
        check("streamed: every event has its output's index; each output's text as the blocking one", code == 200
              and pieces == [a["content"] for a in four] and sum(1 for e in events if e.get("stop")) == 4,
              (code, pieces))
        check_id_slot(port, base)
        code, answer = completion(port, dict(base, n_cmpl=4))
        check("n_cmpl above the slots: 400 naming it and -np", code == 400 and error_field(answer) == "n_cmpl"
              and "-np" in answer["error"]["message"], (code, answer))
        code, answer = completion(port, dict(base, prompt=["a"] * 40, n_cmpl=2))
        check("more than 64 outputs: 400 naming prompt", code == 400 and error_field(answer) == "prompt", (code, answer))
    finally:
        check("the 3-slot server stops cleanly", stop_server(server) == 0)


# ---- the OpenAI routes: llama.cpp's samplers and lora as /completion reads them --------------------

# (name, the settings it tunes or the gate it needs, the setting): with a seed at temperature 0.8
# the setting must change /completion's text on the chat's prompt (so the case can fail), and
# /v1/chat/completions, /v1/completions and /v1/responses must give /completion's text with it.
OPENAI_SAMPLER_CASES = [
    ("xtc", {}, {"xtc_probability": 1.0, "xtc_threshold": 0.01}),
    ("top_n_sigma", {}, {"top_n_sigma": 0.5}),
    ("dynatemp", {}, {"dynatemp_range": 0.7, "dynatemp_exponent": 2.0}),
    ("min_keep", {"top_p": 0.05}, {"min_keep": 30}),
    ("mirostat 2", {}, {"mirostat": 2, "mirostat_tau": 1.0, "mirostat_eta": 0.2}),
    ("mirostat 1", {}, {"mirostat": 1, "mirostat_tau": 1.0}),
    ("typical_p", {}, {"typical_p": 0.3}),
    ("repeat_penalty", {}, {"repeat_penalty": 1.8, "repeat_last_n": -1}),
    ("presence_penalty", {}, {"presence_penalty": 1.5}),
    ("frequency_penalty", {}, {"frequency_penalty": 1.5}),
    ("lora", {}, {"lora": [{"id": 0, "scale": 1}]}),
]

# Bad values: a 400 in OpenAI's shape naming the field, on every route that reads it.
OPENAI_BAD_SAMPLER_FIELDS = [
    {"xtc_probability": 2}, {"top_n_sigma": "x"}, {"dry_sequence_breakers": [""]}, {"dry_multiplier": "x"},
    {"min_keep": 1.5}, {"mirostat_tau": "x"}, {"lora": [{"id": 3, "scale": 1}]}, {"lora": {"id": 0}},
    {"samplers": ["top_p", "top_k"]}, {"ignore_eos": 1},
]


def openai_texts(port, messages, body):
    """The text of /completion on the chat's prompt, and of /v1/chat/completions and
    /v1/responses for `messages` (one user message for /v1/responses), with `body`'s fields."""
    prompt = curl_json(port, "/apply-template", {"messages": messages})[1]["prompt"]
    code, plain = completion(port, dict(body, prompt=prompt, n_predict=body["max_tokens"]))
    code_chat, chat = completion(port, dict(body, messages=messages), "/v1/chat/completions")
    texts = [plain.get("content") if code == 200 else None,
             chat["choices"][0]["message"]["content"] if code_chat == 200 else None]
    if len(messages) == 1:
        responses = {k: v for k, v in body.items() if k != "max_tokens"}
        code_r, answer = completion(port, dict(responses, input=messages[0]["content"],
                                               max_output_tokens=body["max_tokens"]), "/v1/responses")
        items = [c["text"] for o in answer.get("output", []) if o.get("type") == "message"
                 for c in o["content"]] if code_r == 200 else [None]
        texts.append("".join(items) if None not in items else None)
    return texts


def openai_error_param(code, answer):
    error = answer.get("error", {}) if isinstance(answer, dict) else {}
    return error.get("param") if code == 400 and error.get("type") == "invalid_request_error" else None


def check_openai_samplers(port):
    """llama-server reads /completion's sampler fields and `lora` on its OpenAI routes (it copies
    their bodies through): so does specd, by the same reader, with the same result."""
    messages = [{"role": "user", "content": "once upon a time"}]
    base = {"temperature": 0.8, "seed": 5, "max_tokens": 12}
    for name, gate, setting in OPENAI_SAMPLER_CASES:
        before = openai_texts(port, messages, dict(base, **gate))
        after = openai_texts(port, messages, dict(base, **gate, **setting))
        code, text = completion(port, dict(base, **gate, **setting, prompt="once upon a time"), "/v1/completions")
        code_plain, plain = completion(port, dict(base, **gate, **setting, prompt="once upon a time",
                                                  n_predict=12))
        check(f"{name} on the OpenAI routes: /completion's text, changed by it", None not in after
              and len(set(after)) == 1 and before[0] != after[0] and code == code_plain == 200
              and text["choices"][0]["text"] == plain["content"], (setting, before, after))
    # DRY: a history whose answers repeat after the same template text, until DRY sees a repeat
    dry = {"dry_multiplier": 5.0, "dry_base": 2.0, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
           "dry_sequence_breakers": ["\n\n"]}
    greedy = {"temperature": 0, "max_tokens": 4}
    messages, changed = [{"role": "user", "content": "hi"}], False
    for _ in range(8):
        before = openai_texts(port, messages, greedy)
        after = openai_texts(port, messages, dict(greedy, **dry))
        check("DRY on the OpenAI routes: /completion's text", None not in after and len(set(after)) == 1,
              (messages, after))
        if before[0] != after[0]:
            changed = True
            break
        messages = messages + [{"role": "assistant", "content": before[0]}, {"role": "user", "content": "hi"}]
    check("DRY changes the text once the history repeats", changed, messages)
    # samplers: listing specd's order is accepted; any other is refused as on /completion
    code, answer = completion(port, dict(base, messages=messages, samplers="ekypmt"), "/v1/chat/completions")
    check("samplers in specd's order: accepted", code == 200, (code, answer))
    code, answer = completion(port, dict(base, prompt="once upon a time", ignore_eos=True), "/v1/completions")
    check("ignore_eos (llama-server's, sent by benchmark clients): accepted", code == 200
          and answer["usage"]["completion_tokens"] == 12, (code, answer))
    for bad in OPENAI_BAD_SAMPLER_FIELDS:
        field = next(iter(bad))
        for path, body in (("/v1/chat/completions", {"messages": messages}),
                           ("/v1/completions", {"prompt": "once upon a time"}),
                           ("/v1/responses", {"input": "once upon a time"})):
            code, answer = completion(port, dict(bad, **body), path)
            check(f"{path} {bad}: 400 in OpenAI's shape naming {field}", openai_error_param(code, answer) == field,
                  (code, answer))
        code, answer = completion(port, dict(bad, prompt="once upon a time", n_predict=2))
        check(f"/completion {bad}: 400 naming {field} too", code == 400 and error_field(answer) == field,
              (code, answer))
    code, answer = completion(port, {"messages": messages, "max_tokens": 2, "xtc_probability": 0.5}, "/v1/messages")
    check("/v1/messages keeps to Anthropic's fields, as llama-server does: xtc_probability unknown",
          code == 400 and "xtc_probability" in json.dumps(answer), (code, answer))


def check_mtp_server(specd, models):
    """llama-server's --spec-type draft-mtp loads the target's MTP layers; requests draft with them by
    default (AUTO), or name them with llama-server's type, and get the target's own text."""
    target = os.path.join(models, "mtp-target.gguf")
    server, port = start_server(specd, ["--api-key", KEY, "-m", target, "--spec-type", "draft-mtp", "-c", "256",
                                        "-t", "1", "-np", "1"])
    try:
        base = {"prompt": "once upon a time", "n_predict": 24, "temperature": 0, "ignore_eos": True}
        plain = completion(port, dict(base, **{"speculative.type": "none"}))[1] if port else {}
        for spec in (None, "draft-mtp"):
            body = dict(base, **{"speculative.n_max": 3, "speculative.n_min": 3})
            if spec:
                body["speculative.type"] = spec
            code, answer = completion(port, body) if port else (0, {})
            timings = answer.get("timings", {}) if isinstance(answer, dict) else {}
            check("--spec-type draft-mtp: a request %s drafts with MTP, the target's text" % (spec or "without a type"),
                  code == 200 and answer.get("content") == plain.get("content")
                  and timings.get("draft_n", 0) > 0, (code, answer))
    finally:
        rc = stop_server(server)
    check("the MTP server starts and stops cleanly", port and rc == 0, rc)


def check_lora(port, lora):
    """--lora FILE --lora-init-without-apply: GET /lora-adapters lists it at scale 0; a request's
    `lora` applies it to that request; POST /lora-adapters sets the scales of later requests
    (adapters left out: 0); bad ids are refused naming the field."""
    code, text = curl(port, "/lora-adapters")
    listed = json.loads(text) if code == 200 else None
    check("GET /lora-adapters: the adapter at scale 0", code == 200 and listed and listed[0]["id"] == 0
          and listed[0]["path"] == lora and listed[0]["scale"] == 0, (code, text))
    body = {"prompt": "once upon a time", "n_predict": 12, "temperature": 0, "ignore_eos": True}
    _, plain = completion(port, body)
    _, adapted = completion(port, dict(body, lora=[{"id": 0, "scale": 1}]))
    check("a request's lora changes its text", plain["content"] != adapted["content"], (plain, adapted))
    code, answer = completion(port, dict(body, lora=[{"id": 3, "scale": 1}]))
    check("a request's lora with an unknown id: 400 naming lora", code == 400 and error_field(answer) == "lora",
          (code, answer))
    code, text = curl(port, "/lora-adapters", [{"id": 0, "scale": 1}])
    _, after = completion(port, body)
    _, listed = curl(port, "/lora-adapters")
    check("POST /lora-adapters: later requests use the scales", code == 200 and json.loads(text) == {"success": True}
          and after["content"] == adapted["content"] and json.loads(listed)[0]["scale"] == 1, (code, text, after))
    curl(port, "/lora-adapters", [])
    _, back = completion(port, body)
    check("POST /lora-adapters []: every adapter at 0 again", back["content"] == plain["content"], back)
    code, text = curl(port, "/lora-adapters", [{"id": 7, "scale": 1}])
    check("POST /lora-adapters with an unknown id: 400", code == 400 and "id" in text, (code, text))


def check_preserved_tokens(port):
    """preserved_tokens: a control token (the model's BOS, forced by logit_bias) shows its text where
    preserved and none otherwise (a chat format's markers must reach its parser); a text that is not
    one token is left out, as llama-server; a wrong type is a 400 naming the field."""
    code, tok = completion(port, {"content": "<s>", "parse_special": True}, "/tokenize")
    bos = tok.get("tokens", [None])[0] if code == 200 and len(tok.get("tokens", [])) == 1 else None
    check("the tiny model's <s> is one token", bos is not None, tok)
    if bos is None:
        return
    base = {"prompt": "Once", "n_predict": 2, "temperature": 0, "logit_bias": [[bos, 100]]}
    code, plain = completion(port, base)
    code2, kept = completion(port, dict(base, preserved_tokens=["<s>", "two words"]))
    check("a control token's text is kept only where preserved", code == 200 and code2 == 200 and
          plain.get("content") == "" and kept.get("content") == "<s><s>", (plain, kept))
    code, bad = completion(port, dict(base, preserved_tokens=[7]))
    check("preserved_tokens of a wrong type: 400 naming it", code == 400 and error_field(bad) == "preserved_tokens", bad)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    lora = os.path.join(models, "lora.gguf")
    server, port = start_server(specd, ["--api-key", KEY, "-m", target, "-md", draft, "-c", "256", "-t", "1", "-np", "1",
                                        "--lora", lora, "--lora-init-without-apply", "--context-shift"])
    try:
        if port:
            code, text = curl(port, "/slots")
            slots = json.loads(text)
            check("/slots before any completion: idle, no task, the context size", code == 200
                  and slots[0]["state"] == "idle" and slots[0]["id_task"] == -1 and slots[0]["n_ctx"] == 256, slots)
            check_tokenize(port)
            check_props(port, target)
            check_slots_and_metrics(port)
            check_slot_while_processing(port)
            check_fields(port)
            check_json_schema(port)
            check_generation_prompt(port)
            check_probs(port)
            check_seeded(port)
            check_openai_samplers(port)
            check_lora(port, lora)
            check_preserved_tokens(port)
        else:
            failures.append("start")
    finally:
        rc = stop_server(server)
    check("stops cleanly", rc == 0, rc)
    check_mtp_server(specd, models)
    check_outputs(specd, models)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
