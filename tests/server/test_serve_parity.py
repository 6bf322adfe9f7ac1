#!/usr/bin/env python3
"""`specd serve` as llama-server 0.5.0's users start and call it, through curl on the tiny models:
its drafting and context flags (--spec-draft-model, --spec-draft-n-max, --spec-draft-n-min,
--spec-draft-p-min and --draft-p-min, --spec-ngram-simple-size-n, --context-shift,
--no-context-shift) with its meanings, shown by /props; --spec-type applied to every request that
names no drafters; the drafting defaults of --draft-max in /props and in requests that send a
`speculative` object without n_max; a full context stopping generation unless --context-shift; a
streamed chat whose output the template's parser refuses keeping its text on all three chat routes,
as the blocking answer does; /infill on a model without FIM tokens answering 501
not_supported_error in llama-server's error shape; every route in serve --help; slots on disk
(--slot-save-path, POST /slots/ID?action=save|restore|erase): a round trip gives the same text
with the cache reused, bad names and other models' files are refused alike.

    test_serve_parity.py SPECD MODELS_DIR TEMPLATES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

from test_serve import check, curl, curl_json, served, sse_events, summary

FUNCTIONARY = "meetkai-functionary-medium-v3.2.jinja"


def post(port, path, body):
    return curl_json(port, path, body)


def props_speculative(port):
    code, text = curl(port, "/props")
    props = json.loads(text) if code == 200 else {}
    return props.get("default_generation_settings", {}).get("params", {}).get("speculative", {})


def check_draft_max_defaults(specd, target, draft):
    """--draft-max 3: /props says n_max 3, and a request whose `speculative` object (or flat key)
    leaves n_max out gets 3, not the library's 8 (which was a 400 against the engine's cap)."""
    with served(specd, ["-m", target, "-md", draft, "-c", "256", "-t", "1", "-np", "1", "--draft-max", "3"],
                "--draft-max 3") as (_, port):
        if not port:
            return
        check("--draft-max 3: /props shows n_max 3", props_speculative(port).get("n_max") == 3, props_speculative(port))
        base = {"prompt": "once upon a time", "n_predict": 8, "temperature": 0}
        for extra in ({"speculative": {"type": ["draft"]}}, {"speculative": {"tree": "off"}},
                      {"speculative.n_min": 1}, {}):
            code, answer = post(port, "/completion", dict(base, **extra))
            n_max = answer.get("generation_settings", {}).get("speculative", {}).get("n_max") \
                if isinstance(answer, dict) else None
            check(f"--draft-max 3, a request with {extra or 'no speculative fields'}: 200, n_max 3",
                  code == 200 and n_max == 3, (code, answer))
        code, answer = post(port, "/completion", dict(base, speculative={"n_max": 5}))
        check("--draft-max 3, a request asking n_max 5: 400 naming speculative.n_max", code == 400
              and answer.get("error", {}).get("data", {}).get("field") == "speculative.n_max", (code, answer))


def check_llama_flags(specd, target, draft):
    """llama-server 0.5.0's names: the defaults every request starts from, as /props shows them,
    and a request drafts with the draft model given as --spec-draft-model."""
    args = ["-m", target, "--spec-draft-model", draft, "-c", "256", "-t", "1", "-np", "1", "--spec-draft-n-max", "4",
            "--spec-draft-n-min", "1", "--spec-draft-p-min", "0.25", "--spec-ngram-simple-size-n", "2",
            "--no-context-shift"]
    with served(specd, args, "llama-server's drafting flags") as (_, port):
        if not port:
            return
        sp = props_speculative(port)
        check("--spec-draft-n-max 4, -n-min 1, -p-min 0.25, --spec-ngram-simple-size-n 2: /props shows them",
              sp.get("n_max") == 4 and sp.get("n_min") == 1 and sp.get("p_min") == 0.25 and sp.get("ngram_size_n") == 2
              and sp.get("type") == ["draft"], sp)
        code, answer = post(port, "/completion", {"prompt": "once upon a time", "n_predict": 16, "temperature": 0})
        check("--spec-draft-model: requests draft with it", code == 200
              and answer.get("timings", {}).get("draft_n", 0) > 0, (code, answer))
    with served(specd, ["-m", target, "-md", draft, "-c", "256", "-t", "1", "-np", "1", "--draft-p-min", "0.5"],
                "--draft-p-min") as (_, port):
        check("--draft-p-min on serve: the default p_min", port and props_speculative(port).get("p_min") == 0.5,
              port and props_speculative(port))
    for args, needle in ((["--spec-type", "draft"], "needs a draft model or head file"),
                         (["-md", draft, "--draft-max", "3", "--spec-draft-n-min", "5"], "--spec-draft-n-min"),
                         (["--spec-draft-p-min", "2"], "--spec-draft-p-min"),
                         (["--spec-ngram-simple-size-n", "0"], "--spec-ngram-simple-size-n")):
        r = subprocess.run([specd, "serve", "--port", "0", "-m", target] + args, capture_output=True, text=True,
                           timeout=60)
        check(f"serve {' '.join(a for a in args if a != draft)}: refused at start, naming {needle}",
              r.returncode == 2 and needle in r.stderr, (r.returncode, r.stderr))


def drafters_of(answer):
    spec = answer.get("speculative", {}) if isinstance(answer, dict) else {}
    return spec.get("type"), sorted(d["type"] for d in spec.get("drafters", []))


def check_spec_type(specd, target, draft):
    """--spec-type is what every request that names no drafters drafts with: with -md and
    ngram-mod,suffix, those two (not the draft model); without -md, ngram-simple (not "no
    model-free drafter was asked for"); a request's own type still wins."""
    body = {"prompt": "once upon a time once upon a time once upon a time", "n_predict": 24, "temperature": 0}
    with served(specd, ["-m", target, "-md", draft, "-c", "256", "-t", "1", "-np", "1", "--spec-type",
                        "ngram-mod,suffix"], "--spec-type ngram-mod,suffix") as (_, port):
        if not port:
            return
        check("--spec-type ngram-mod,suffix: /props shows the list",
              props_speculative(port).get("type") == ["ngram-mod", "suffix"], props_speculative(port))
        openai = {"prompt": body["prompt"], "max_tokens": 24, "temperature": 0}
        for path, extra in (("/completion", {}), ("/completion", {"speculative": {"tree": "off"}}),
                            ("/v1/completions", {})):
            code, answer = post(port, path, dict(openai if path == "/v1/completions" else body, **extra))
            check(f"--spec-type ngram-mod,suffix with -md: {path} {extra or ''} drafts with those two",
                  code == 200 and drafters_of(answer) == ("ngram-mod,suffix", ["ngram-mod", "suffix"]), (code, answer))
        code, answer = post(port, "/completion", dict(body, **{"speculative.type": "draft"}))
        check("a request's own speculative.type replaces --spec-type", code == 200
              and drafters_of(answer)[0] == "draft", (code, answer))
    with served(specd, ["-m", target, "-c", "256", "-t", "1", "-np", "1", "--spec-type", "ngram-mod",
                        "--spec-type", "suffix,ngram-mod"], "--spec-type twice") as (_, port):
        check("--spec-type given twice: the lists add up, each drafter once (as llama-server's)",
              port and props_speculative(port).get("type") == ["ngram-mod", "suffix"], port and props_speculative(port))
    with served(specd, ["-m", target, "-c", "256", "-t", "1", "-np", "1", "--spec-type", "ngram-simple"],
                "--spec-type ngram-simple") as (_, port):
        code, answer = post(port, "/completion", body) if port else (0, {})
        spec = answer.get("speculative", {}) if isinstance(answer, dict) else {}
        check("--spec-type ngram-simple without -md: requests draft with ngram-simple", code == 200
              and spec.get("enabled") is True and spec.get("type") == "ngram-simple", (code, answer))


def check_context_shift(specd, target, draft):
    """As llama-server 0.5.0: a full context stops generation (truncated) by default; with
    --context-shift it drops older tokens and goes on."""
    body = {"prompt": "once upon a time", "n_predict": 100, "temperature": 0, "ignore_eos": True}
    for extra, shifts in (([], False), (["--no-context-shift"], False), (["--context-shift"], True)):
        with served(specd, ["-m", target, "-md", draft, "-c", "64", "-t", "1", "-np", "1"] + extra,
                    f"context shift {extra}") as (_, port):
            code, answer = post(port, "/completion", body) if port else (0, {})
            ok = code == 200 and answer.get("truncated") is True and (
                answer.get("tokens_predicted") == 100 if shifts else
                answer.get("tokens_predicted", 100) < 100 and answer.get("stop_type") == "context")
            check(f"serve {' '.join(extra) or '(default)'}: a full 64-token context "
                  f"{'shifts and goes on to 100 tokens' if shifts else 'stops generation'}", ok, (code, answer))


def streamed_texts(port, path, body):
    """The text a stream's events carry, on each chat route's own event shape."""
    code, text = curl(port, path, dict(body, stream=True))
    out = ""
    for e in sse_events(text.replace("data: [DONE]", "")):
        if path == "/v1/chat/completions":
            for choice in e.get("choices", []):
                out += choice.get("delta", {}).get("content") or ""
        elif path == "/v1/messages" and e.get("type") == "content_block_delta":
            out += e["delta"].get("text", "")
        elif path == "/v1/responses" and e.get("type") == "response.output_text.delta":
            out += e.get("delta", "")
    return code, out


def blocking_text(path, answer):
    if path == "/v1/chat/completions":
        return answer["choices"][0]["message"]["content"]
    if path == "/v1/messages":
        return "".join(b.get("text", "") for b in answer["content"] if b.get("type") == "text")
    return "".join(c.get("text", "") for item in answer["output"] if item.get("type") == "message"
                   for c in item.get("content", []))


def check_stream_fallback(specd, target, templates_dir):
    """Functionary v3.2's parser refuses the tiny model's free text: the blocking answer falls back to
    the raw text, and the stream must carry that same text (it used to send only the role chunk and
    an empty delta), on OpenAI's chat, Anthropic's messages and the Responses API."""
    template = os.path.join(templates_dir, FUNCTIONARY)
    with served(specd, ["-m", target, "-c", "1024", "-t", "1", "-np", "1", "--chat-template-file", template],
                "the Functionary template") as (_, port):
        if not port:
            return
        messages = [{"role": "user", "content": "Hi"}]
        for path, body in (("/v1/chat/completions", {"messages": messages, "max_tokens": 12, "temperature": 0}),
                           ("/v1/messages", {"messages": messages, "max_tokens": 12, "temperature": 0}),
                           ("/v1/responses", {"input": "Hi", "max_output_tokens": 12, "temperature": 0})):
            code, answer = post(port, path, body)
            whole = blocking_text(path, answer) if code == 200 else None
            scode, streamed = streamed_texts(port, path, body)
            check(f"{path}: output the parser refuses streams as the blocking answer gives it (raw text)",
                  code == 200 and scode == 200 and whole and streamed == whole, (code, whole, scode, streamed))


def check_infill_and_help(specd, target):
    with served(specd, ["-m", target, "-c", "256", "-t", "1", "-np", "1"], "/infill without FIM") as (_, port):
        code, answer = post(port, "/infill", {"input_prefix": "def f():\n", "input_suffix": "\n", "n_predict": 4}) \
            if port else (0, {})
        err = answer.get("error", {}) if isinstance(answer, dict) else {}
        check("/infill on a model without FIM tokens: 501 not_supported_error in llama-server's shape",
              code == 501 and err.get("code") == 501 and err.get("type") == "not_supported_error"
              and "not supported by this model" in err.get("message", "")
              and "prefix token is missing" in err.get("message", ""), (code, answer))
    r = subprocess.run([specd, "serve", "--help"], capture_output=True, text=True, timeout=60)
    routes = ["/rpc", "/completion", "/infill", "/tokenize", "/detokenize", "/apply-template", "/props", "/slots",
              "/metrics", "/lora-adapters", "/slots/ID?action=save|restore|erase", "/health", "/v1/chat/completions", "/v1/completions", "/v1/responses",
              "/v1/models", "/v1/messages", "/v1/messages/count_tokens"]
    missing = [route for route in routes if route not in r.stdout]
    check("serve --help lists every route", r.returncode == 0 and not missing, missing)
    flags = ["--spec-draft-n-max", "--spec-draft-n-min", "--spec-draft-p-min", "--draft-p-min", "--spec-draft-model",
             "--spec-ngram-simple-size-n", "--context-shift", "--no-context-shift", "--spec-type", "--slot-save-path"]
    missing = [flag for flag in flags if flag not in r.stdout]
    check("serve --help names llama-server's drafting and context flags", not missing, missing)


def slot_action(port, slot, action, body=None):
    return post(port, f"/slots/{slot}?action={action}", body if body is not None else {})


def completion_in(port, slot, body):
    code, answer = post(port, "/completion", dict(body, id_slot=slot))
    ok = code == 200 and isinstance(answer, dict)
    return (answer.get("content"), answer["timings"]["cache_n"]) if ok else (None, None)


def check_slot_files(specd, target, draft, other):
    """llama-server's slots on disk: save a slot's caches, erase them (the next request decodes its
    prompt again), restore them (the next request reuses them: cache_n > 0, the same text), also
    into another slot; every filename through the confinement (outside names, missing files and
    other models' files refused alike, with a 400 naming filename)."""
    body = {"prompt": "once upon a time there was a little girl", "n_predict": 12, "temperature": 0,
            "ignore_eos": True}
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "slots")
        os.mkdir(folder)
        args = ["-m", target, "-md", draft, "-c", "512", "-t", "1", "-np", "2", "--slot-save-path", folder]
        with served(specd, args, "--slot-save-path") as (_, port):
            if not port:
                return
            text, _ = completion_in(port, 0, body)
            code, saved = slot_action(port, 0, "save", {"filename": "a.bin"})
            check("save: the slot's tokens written to the file under --slot-save-path", code == 200
                  and saved.get("n_saved", 0) > 0 and saved.get("filename") == "a.bin"
                  and saved.get("n_written") == os.path.getsize(os.path.join(folder, "a.bin")), (code, saved))
            code, erased = slot_action(port, 0, "erase")
            again = completion_in(port, 0, body)
            check("erase: the slot holds nothing, the next request decodes its prompt again (cache_n 0), same text",
                  code == 200 and erased.get("n_erased") == saved.get("n_saved") and again == (text, 0),
                  (code, erased, again, text))
            slot_action(port, 0, "erase")
            code, restored = slot_action(port, 0, "restore", {"filename": "a.bin"})
            reused = completion_in(port, 0, body)
            check("restore: the next request reuses the cache (cache_n > 0) and gives the same text", code == 200
                  and restored.get("n_restored") == saved.get("n_saved") and reused[0] == text and reused[1] > 0,
                  (code, restored, reused, text))
            code, _ = slot_action(port, 1, "restore", {"filename": "a.bin"})
            other_slot = completion_in(port, 1, body)
            check("restore into another slot: that slot reuses it", code == 200 and other_slot[0] == text
                  and other_slot[1] > 0, (code, other_slot))
            with open(os.path.join(folder, "junk.bin"), "wb") as f:
                f.write(b"not a slot")
            with open(os.path.join(folder, "a.bin"), "rb") as src, open(os.path.join(tmp, "copy.bin"), "wb") as dst:
                dst.write(src.read())  # a good slot file, but outside the folder
            outside = os.path.join(tmp, "outside.bin")
            for action, name in (("restore", "../copy.bin"), ("restore", os.path.join(tmp, "copy.bin")),
                                 ("restore", "missing.bin"), ("save", "../outside.bin"), ("save", outside),
                                 ("save", ""), ("restore", "junk.bin")):
                code, answer = slot_action(port, 0, action, {"filename": name})
                err = answer.get("error", {}) if isinstance(answer, dict) else {}
                check(f"{action} '{name}': 400 naming filename", code == 400
                      and err.get("data", {}).get("field") == "filename", (code, answer))
            check("a save outside the folder writes nothing there", not os.path.exists(outside))
            code, answer = slot_action(port, 5, "erase")
            check("a slot out of range: 400", code == 400, (code, answer))
        with served(specd, ["-m", other, "-c", "512", "-t", "1", "-np", "1", "--slot-save-path", folder],
                    "another model") as (_, port):
            code, answer = slot_action(port, 0, "restore", {"filename": "a.bin"}) if port else (0, {})
            message = answer.get("error", {}).get("message", "") if isinstance(answer, dict) else ""
            check("restore of a file saved for another model: 400 naming filename, saying so", code == 400
                  and answer["error"]["data"]["field"] == "filename" and "saved for another model" in message,
                  (code, answer))


def main(specd, models, templates_dir):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    check_draft_max_defaults(specd, target, draft)
    check_llama_flags(specd, target, draft)
    check_spec_type(specd, target, draft)
    check_context_shift(specd, target, draft)
    check_stream_fallback(specd, target, templates_dir)
    check_infill_and_help(specd, target)
    check_slot_files(specd, target, draft, os.path.join(models, "target-h64.gguf"))
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
