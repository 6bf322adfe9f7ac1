#!/usr/bin/env python3
"""`specd serve`'s chat through llama.cpp's Jinja chat code, through curl on the tiny models:
/apply-template with --chat-template-file (a real model's template from the pinned llama.cpp) and
chat_template_kwargs; a chat through it, blocking and streamed, its prompt /apply-template's; tool
calls on /v1/chat/completions in OpenAI's shape, blocking and streamed (tool_choice "required" or a
named function constrains the tiny model's output to a call, so the test sees real calls come out),
the same calls with and without speculation; bad input, tools and tool_choice refused in OpenAI's
error shape, the server still answering after; /completion's lazy grammar (grammar_lazy,
grammar_triggers: what tool_choice "auto" applies); Anthropic's /v1/messages (a tool_use, a
round trip, count_tokens, the streamed named events) and its error shape; OpenAI's /v1/responses
(a function call, a round trip with its output, the refusals, the streamed events); /infill's
fill-in-the-middle prompt and /v1/completions' suffix; /metrics counting these routes' completions
(and each choice of n > 1; count_tokens and /apply-template none); --no-jinja's built-in formats. With llama.cpp's
llama-server (make bench-deps builds it), the prompts specd renders for a set of the pinned
templates equal the ones llama-server's /apply-template gives for the same model and messages.

    test_chat_jinja.py SPECD MODELS_DIR TEMPLATES_DIR [LLAMA_SERVER]
"""
import json
import re
import os
import socket
import subprocess
import sys
import time

from test_llama_routes import parse_prometheus
from test_serve import check, curl, curl_json, start_server, stop_server, summary

QWEN3 = "Qwen-Qwen3-0.6B.jinja"
# The tool calls come from the tiny model under the tool grammar llama.cpp makes for the template.
# Functionary v3.2's lets the answer begin with a call (Qwen's and most others' allow free text
# first, which a random tiny model never ends), and an enum keeps the arguments short.
FUNCTIONARY = "meetkai-functionary-medium-v3.2.jinja"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather now in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Rome", "Oslo"]}},
                   "required": ["city"]}}}]
ASK = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS, "max_tokens": 60,
       "temperature": 0}
# Templates compared with llama-server: the families the issue names, with and without tools.
COMPARED = [
    "Qwen-Qwen3-0.6B.jinja", "Qwen3.5-4B.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen3-Coder.jinja",
    "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-ai-DeepSeek-V3.1.jinja", "openai-gpt-oss-120b.jinja",
    "google-gemma-2-2b-it.jinja", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "GLM-4.6.jinja",
    "microsoft-Phi-3.5-mini-instruct.jinja", "HuggingFaceTB-SmolLM3-3B.jinja",
]
HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Weather in Paris?"},
]


def sse_events(text):
    return [json.loads(line[len("data: "):]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def post(port, path, body):
    return curl_json(port, path, body)


def openai_error(code, answer, status, param, needle):
    err = answer.get("error", {}) if isinstance(answer, dict) else {}
    return (code == status and err.get("type") == "invalid_request_error" and err.get("param") == param
            and needle in err.get("message", "") and "code" in err)


def calls_of(answer):
    return answer["choices"][0]["message"].get("tool_calls") or []


def streamed(port, body):
    """The streamed answer's chunks -> (content, tool calls assembled from their deltas, finish_reason)."""
    code, text = curl(port, "/v1/chat/completions", dict(body, stream=True))
    content, calls, finish = "", {}, None
    for event in sse_events(text):
        for choice in event.get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call["index"], {"id": None, "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function", {})
                slot["name"] += fn.get("name", "")
                slot["arguments"] += fn.get("arguments", "")
            finish = choice.get("finish_reason") or finish
    return code, content, [calls[i] for i in sorted(calls)], finish


def check_templates(port):
    # /apply-template: the model's file template, kwargs
    code, answer = post(port, "/apply-template", {"messages": HISTORY[:2]})
    check("/apply-template renders --chat-template-file (Qwen3)", code == 200 and answer.get("prompt") ==
          "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
          f"{code} {answer}")
    code, answer = post(port, "/apply-template", {"messages": HISTORY[1:2],
                                                   "chat_template_kwargs": {"enable_thinking": False}})
    check("chat_template_kwargs reach the template", code == 200 and
          answer.get("prompt", "").endswith("<think>\n\n</think>\n\n"), f"{code} {answer}")
    # /v1/messages takes chat_template_kwargs as llama-server does, and thinking.type merges into them
    def counted(**extra):
        code, answer = post(port, "/v1/messages/count_tokens", dict({"model": "m", "messages": HISTORY[1:2]}, **extra))
        return answer.get("input_tokens") if code == 200 else f"{code} {answer}"
    plain, kwargs = counted(), counted(chat_template_kwargs={"enable_thinking": False})
    merged = counted(chat_template_kwargs={"unused": 1}, thinking={"type": "disabled"})
    check("/v1/messages: chat_template_kwargs reach the template, thinking merged into them",
          isinstance(plain, int) and isinstance(kwargs, int) and kwargs == merged > plain, f"{plain} {kwargs} {merged}")
    code, answer = post(port, "/v1/messages", {"model": "m", "chat_template_kwargs": [], "thinking": {"type": "enabled"},
                                               "messages": HISTORY[1:2]})
    check("/v1/messages: chat_template_kwargs that are no object: 400", code == 400 and
          "chat_template_kwargs" in answer.get("error", {}).get("message", ""), f"{code} {answer}")
    code, answer = post(port, "/apply-template", {"messages": HISTORY, "tools": TOOLS})
    check("/apply-template puts the tools in the prompt", code == 200 and "get_weather" in answer.get("prompt", "")
          and "<tools>" in answer.get("prompt", ""), f"{code} {answer}")
    history = ASK["messages"] + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}]
    code, answer = post(port, "/apply-template", {"messages": history, "tools": TOOLS})
    check("a tool result in the history: in the prompt", code == 200 and
          "<tool_response>\n18 degrees\n</tool_response>" in answer.get("prompt", ""), f"{code} {answer}")


def check_tools(port):

    # tool_choice required: the grammar makes the tiny model call the tool
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required"))
    calls = calls_of(answer) if code == 200 else []
    ok = code == 200 and len(calls) >= 1 and answer["choices"][0]["finish_reason"] == "tool_calls"
    if ok:
        call = calls[0]
        args = json.loads(call["function"]["arguments"])
        ok = (call["type"] == "function" and call["function"]["name"] == "get_weather" and call["id"].startswith("call_")
              and isinstance(args, dict) and args.get("city") in ("Rome", "Oslo"))
    check("tool_choice required: tool_calls in OpenAI's shape, finish_reason tool_calls", ok, f"{code} {answer}")
    blocking = answer

    code, content, scalls, finish = streamed(port, dict(ASK, tool_choice="required"))
    ok = (code == 200 and finish == "tool_calls" and len(scalls) == len(calls_of(blocking)) and
          all(s["name"] == b["function"]["name"] and s["arguments"] == b["function"]["arguments"] and
              s["id"] and s["id"].startswith("call_") for s, b in zip(scalls, calls_of(blocking))))
    check("streamed tool calls: the deltas make the same calls", ok, f"{code} {scalls} {finish}")

    named = {"type": "function", "function": {"name": "get_weather"}}
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice=named, tools=TOOLS + [{
        "type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}]))
    check("a named tool_choice calls that function", code == 200 and calls_of(answer) and
          all(c["function"]["name"] == "get_weather" for c in calls_of(answer)), f"{code} {answer}")

    # lossless: the draft model's calls equal the ones without speculation
    none = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required", speculative={"type": ["none"]}))[1]
    drafted = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required",
                                                      speculative={"type": ["draft"], "n_min": 4, "n_max": 4}))[1]
    strip = lambda a: [(c["function"]["name"], c["function"]["arguments"]) for c in calls_of(a)]
    check("lossless: tool calls with and without speculation are the same", isinstance(none, dict) and
          isinstance(drafted, dict) and strip(none) == strip(drafted) and strip(none) and
          drafted.get("speculative", {}).get("drafted", 0) > 0, f"{none} {drafted}")

    # a tool round trip: the result goes back in the history
    history = ASK["messages"] + [
        {"role": "assistant", "content": None, "tool_calls": calls_of(blocking)},
        {"role": "tool", "tool_call_id": calls_of(blocking)[0]["id"] if calls_of(blocking) else "x",
         "content": "18 degrees"}]
    code, answer = post(port, "/v1/chat/completions", dict(ASK, messages=history, max_tokens=4))
    check("a tool result in the history: answered", code == 200 and answer["choices"][0]["message"]["role"] ==
          "assistant", f"{code} {answer}")

    # bad input: OpenAI's error shape naming the field, then the server still answers
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice={"type": "function",
                                                                              "function": {"name": "nope"}}))
    check("tool_choice naming an unknown function: 400 naming tool_choice",
          openai_error(code, answer, 400, "tool_choice", "'nope'"), f"{code} {answer}")
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tools=[{"type": "function", "function": {
        "name": "f", "parameters": "a string"}}]))
    check("a malformed tool schema: 400 naming tools", openai_error(code, answer, 400, "tools", "parameters"),
          f"{code} {answer}")
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tools=[{"type": "retrieval"}]))
    check("a tool that is not a function: 400 naming tools", openai_error(code, answer, 400, "tools", "function"),
          f"{code} {answer}")
    code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice="sometimes"))
    check("a bad tool_choice string: 400", openai_error(code, answer, 400, "tool_choice", "tool_choice"),
          f"{code} {answer}")
    code, answer = post(port, "/v1/chat/completions", dict(ASK, max_tokens=3))
    check("after the refusals the server answers", code == 200 and "choices" in answer, f"{code} {answer}")


def check_lazy_grammar(port):
    """/completion's lazy grammar (grammar_lazy + grammar_triggers, llama-server's fields; what
    tool_choice "auto" applies): free text until the trigger, then the grammar, the same with
    speculation; a trigger that never comes leaves the output as it is without a grammar."""
    base = {"prompt": "Once upon a time", "n_predict": 12, "temperature": 0, "return_tokens": True,
            "speculative": {"type": ["none"]}}
    code, free = post(port, "/completion", base)
    tokens = free.get("tokens", []) if code == 200 else []
    if len(tokens) < 6:
        return check("lazy grammar: the unconstrained answer", False, f"{code} {free}")
    trigger = tokens[3]
    piece = post(port, "/detokenize", {"tokens": [trigger]})[1].get("content", "")
    prefix = post(port, "/detokenize", {"tokens": tokens[:4]})[1].get("content", "")
    grammar = "root ::= " + json.dumps(piece) + " [0-9] [0-9] [0-9]"
    lazy = dict(base, grammar=grammar, grammar_lazy=True, grammar_triggers=[{"type": 0, "value": piece, "token": trigger}])
    for spec in ({"type": ["none"]}, {"type": ["draft"], "n_min": 4, "n_max": 4}):
        code, out = post(port, "/completion", dict(lazy, speculative=spec))
        content = out.get("content", "") if code == 200 else ""
        check(f"lazy grammar ({spec['type'][0]}): free until the trigger token, then the grammar",
              content.startswith(prefix) and re.fullmatch(r"[0-9]{3}", content[len(prefix):]) is not None and
              out.get("stop_type") == "eos", f"{code} {out} prefix={prefix!r}")
    code, out = post(port, "/completion", dict(base, grammar=grammar, grammar_lazy=True,
                                                grammar_triggers=[{"type": 1, "value": "zzqqzz"}]))
    check("lazy grammar: a trigger that never comes changes nothing", code == 200 and
          out.get("content") == free.get("content"), f"{code} {out}")
    code, out = post(port, "/completion", dict(base, grammar=grammar, grammar_lazy=True))
    check("lazy grammar without triggers: refused", code == 400 and "grammar_triggers" in json.dumps(out), f"{code} {out}")


def anthropic_error(code, answer, status, needle):
    return (code == status and isinstance(answer, dict) and answer.get("type") == "error" and
            answer.get("error", {}).get("type") == "invalid_request_error" and needle in answer["error"].get("message", ""))


def check_anthropic(port):
    """/v1/messages and /v1/messages/count_tokens in Anthropic's shape, the key as x-api-key."""
    tools = [{"name": "get_weather", "description": "The weather now in a city",
              "input_schema": TOOLS[0]["function"]["parameters"]}]
    ask = {"model": "m", "max_tokens": 60, "temperature": 0, "tools": tools, "tool_choice": {"type": "any"},
           "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    code, text = curl(port, "/v1/messages", ask, key=None, extra=("-H", "x-api-key: test-key"))
    answer = json.loads(text) if code == 200 else text
    uses = [b for b in answer.get("content", []) if b.get("type") == "tool_use"] if code == 200 else []
    check("/v1/messages: a tool_use block, stop_reason tool_use, usage", code == 200 and answer.get("type") == "message"
          and answer.get("role") == "assistant" and answer.get("stop_reason") == "tool_use" and uses and
          uses[0]["name"] == "get_weather" and uses[0]["input"].get("city") in ("Rome", "Oslo") and
          answer["id"].startswith("msg_") and answer["usage"]["input_tokens"] > 10 and
          answer["usage"]["output_tokens"] > 0 and "speculative" in answer, f"{code} {answer}")
    code, count = post(port, "/v1/messages/count_tokens", {k: v for k, v in ask.items() if k != "max_tokens"})
    check("/v1/messages/count_tokens: the prompt's tokens, as the answer counted them", code == 200 and
          isinstance(answer, dict) and count.get("input_tokens") == answer.get("usage", {}).get("input_tokens"),
          f"{code} {count}")
    if uses:
        back = dict(ask, tool_choice={"type": "none"}, max_tokens=4, messages=ask["messages"] + [
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, uses[0]]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "18 degrees"}]}])
        code, again = post(port, "/v1/messages", back)
        check("/v1/messages: a tool_use / tool_result round trip", code == 200 and again.get("stop_reason") ==
              "max_tokens" and again["usage"]["input_tokens"] > answer["usage"]["input_tokens"], f"{code} {again}")
    # llama-server does not require max_tokens on /v1/messages (it runs to a stop, or the context's end)
    code, answer = post(port, "/v1/messages", {"messages": [{"role": "user", "content": "hi"}],
                                               "stop_sequences": [" ", "e", "a", "o"]})
    check("/v1/messages without max_tokens: answered", code == 200 and answer.get("type") == "message" and
          answer.get("stop_reason") in ("stop_sequence", "end_turn", "max_tokens"), f"{code} {answer}")
    code, answer = post(port, "/v1/messages", {"max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]})
    check("/v1/messages with max_tokens 0: 400 in Anthropic's shape", anthropic_error(code, answer, 400, "max_tokens"),
          f"{code} {answer}")
    code, answer = post(port, "/v1/messages", dict(ask, system=[{"type": "text", "text": "Be brief."},
                                                                {"type": "image", "source": {}}]))
    check("/v1/messages with a system block that is no text: 400 naming it",
          anthropic_error(code, answer, 400, "'system[1]' must be a text block"), f"{code} {answer}")
    code, answer = post(port, "/v1/messages", dict(ask, tool_choice={"type": "tool", "name": "nope"}))
    check("/v1/messages naming an unknown tool: 400", anthropic_error(code, answer, 400, "'nope'"), f"{code} {answer}")
    code, text = curl(port, "/v1/messages", dict(ask, stream=True))
    names, events = [], []
    for line in text.splitlines():
        if line.startswith("event: "):
            names.append(line[7:])
        elif line.startswith("data: "):
            events.append(json.loads(line[6:]))
    types = [e.get("type") for e in events]
    inputs = {}
    for e in events:
        if e.get("type") == "content_block_start" and e["content_block"]["type"] == "tool_use":
            inputs[e["index"]] = [e["content_block"]["name"], ""]
        if e.get("type") == "content_block_delta" and e["delta"]["type"] == "input_json_delta":
            inputs[e["index"]][1] += e["delta"]["partial_json"]
    streamed_uses = [(name, json.loads(args)) for name, args in inputs.values()]
    check("/v1/messages streamed: Anthropic's named events, the same tool_use as the blocking answer",
          code == 200 and names == types and types[0] == "message_start" and types[-1] == "message_stop" and
          types[-2] == "message_delta" and events[-2]["delta"]["stop_reason"] == "tool_use" and
          streamed_uses == [(u["name"], u["input"]) for u in uses], f"{code} {types} {streamed_uses}")


def check_responses(port):
    """/v1/responses (OpenAI's Responses API) in its own shape: a function call, a round trip with its
    output, a cut answer, the refusals."""
    tools = [dict(type="function", **TOOLS[0]["function"])]
    ask = {"model": "m", "input": "Weather in Paris?", "tools": tools, "tool_choice": "required", "temperature": 0,
           "max_output_tokens": 60}
    code, answer = post(port, "/v1/responses", ask)
    calls = [o for o in answer.get("output", []) if o.get("type") == "function_call"] if code == 200 else []
    check("/v1/responses: a function_call item, usage", code == 200 and answer.get("object") == "response" and
          answer.get("status") == "completed" and calls and calls[0]["name"] == "get_weather" and
          json.loads(calls[0]["arguments"]).get("city") in ("Rome", "Oslo") and calls[0]["call_id"].startswith("call_")
          and answer["id"].startswith("resp_") and answer["usage"]["input_tokens"] > 10, f"{code} {answer}")
    if calls:
        items = [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                 {k: calls[0][k] for k in ("type", "call_id", "name", "arguments")},
                 {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "18 degrees"}]
        code, again = post(port, "/v1/responses", dict(ask, input=items, tool_choice="none", max_output_tokens=3))
        check("/v1/responses: a function call round trip, cut by max_output_tokens", code == 200 and
              again.get("status") == "incomplete" and again["incomplete_details"]["reason"] == "max_output_tokens" and
              again["usage"]["input_tokens"] > answer["usage"]["input_tokens"] and
              [o["type"] for o in again["output"]] == ["message"] and
              again["output"][0]["content"][0]["type"] == "output_text", f"{code} {again}")
    code, text = curl(port, "/v1/responses", dict(ask, stream=True))
    names = [l[7:] for l in text.splitlines() if l.startswith("event: ")]
    events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: ")]
    types = [e.get("type") for e in events]
    args = "".join(e["delta"] for e in events if e.get("type") == "response.function_call_arguments.delta")
    added = [e["item"] for e in events if e.get("type") == "response.output_item.added"]
    final = events[-1].get("response", {}) if events else {}
    final_calls = [o for o in final.get("output", []) if o.get("type") == "function_call"]
    check("/v1/responses streamed: named events, the call's arguments in deltas, the same call as the blocking answer",
          code == 200 and names == types and types[0] == "response.created" and types[-1] == "response.completed" and
          [e["sequence_number"] for e in events] == list(range(len(events))) and calls and
          any(i.get("type") == "function_call" and i.get("name") == "get_weather" for i in added) and
          args == calls[0]["arguments"] and final_calls and final_calls[0]["arguments"] == args,
          f"{code} {types} {args!r}")
    image = [{"role": "user", "content": [{"type": "input_text", "text": "Look:"},
                                          {"type": "input_image", "image_url": "https://example.com/a.png"}]}]
    for extra, param, needle in (({"previous_response_id": "resp_1"}, "previous_response_id", "nor does llama-server"),
                                 ({"frobnicate": 1}, "frobnicate", ""), ({"input": []}, "input", ""),
                                 ({"input": image}, "input[0].content[1]", "'input[0].content[1]': image URLs are not fetched")):
        code, answer = post(port, "/v1/responses", dict(ask, **extra))
        check(f"/v1/responses refuses {param}: 400 naming it", openai_error(code, answer, 400, param, needle),
              f"{code} {answer}")


def check_infill(port, bare_port):
    """/infill (llama-server's): the fill-in-the-middle prompt as llama-server lays it out, extra
    files before it; a model without FIM tokens refused (501, as llama-server)."""
    tok = lambda text: post(port, "/tokenize", {"content": text})[1]["tokens"]
    body = {"input_prefix": "def f():\n", "input_suffix": "\nreturn 1", "prompt": "  x", "n_predict": 4,
            "temperature": 0, "input_extra": [{"filename": "a.py", "text": "import os"}]}
    code, answer = post(port, "/infill", body)
    pre, suf, mid = 4, 5, 6  # make_tiny_model --fim on: the byte tokens 0x01..0x03
    expected = (tok("\n\n--- snippet ---\n\n") + tok("import os") + [1, pre] + tok("def f():\n") + tok("  x") + [suf]
                + tok("\nreturn 1") + [mid])
    check("/infill: [extra] BOS FIM_PRE prefix prompt FIM_SUF suffix FIM_MID, then a completion", code == 200 and
          answer.get("prompt") == expected and answer.get("tokens_predicted") == 4, f"{code} {answer}\n{expected}")
    code, streamed = curl(port, "/infill", dict(body, stream=True))
    pieces = [json.loads(l[6:]).get("content", "") for l in streamed.splitlines() if l.startswith("data: ")]
    check("/infill streamed: the same text", code == 200 and "".join(pieces) == answer.get("content"), f"{code} {pieces}")
    code, answer = post(bare_port, "/infill", body)
    check("/infill on a model without FIM tokens: 501 not_supported_error saying so (llama-server's answer)",
          code == 501 and answer.get("error", {}).get("type") == "not_supported_error"
          and "fim_pre" in json.dumps(answer), f"{code} {answer}")
    code, text = post(port, "/v1/completions", {"prompt": "def f():\n", "suffix": "\nreturn 1", "max_tokens": 4,
                                                 "temperature": 0})
    code2, plain = post(port, "/infill", {"input_prefix": "def f():\n", "input_suffix": "\nreturn 1", "n_predict": 4,
                                          "temperature": 0})
    check("/v1/completions with a suffix: the insertion /infill makes", code == 200 and code2 == 200 and
          text["choices"][0]["text"] == plain.get("content") and text["usage"]["prompt_tokens"] ==
          plain.get("tokens_evaluated"), f"{code} {text} {plain}")
    # model-free drafting by default: code that repeats itself, the suffix drafter beside what the
    # engine drafts with (here nothing: no draft model), exact against no speculation
    repeats = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n"
    body = {"input_prefix": repeats, "input_suffix": "\n", "n_predict": 24, "temperature": 0}
    code, drafted = post(port, "/infill", body)
    code2, alone = post(port, "/infill", dict(body, speculative={"type": ["none"]}))
    spec = drafted.get("speculative", {}) if code == 200 else {}
    kinds = [d.get("type") for d in spec.get("drafters", [])]
    check("/infill drafts with the suffix drafter by default, losslessly", code == 200 and code2 == 200 and
          kinds == ["suffix"] and drafted.get("content") == alone.get("content") and
          not alone.get("speculative", {}).get("drafters"), f"{spec} {drafted.get('content')!r} {alone.get('content')!r}")
    code, text = post(port, "/v1/completions", {"prompt": repeats, "suffix": "\n", "max_tokens": 24, "temperature": 0})
    kinds = [d.get("type") for d in text.get("speculative", {}).get("drafters", [])] if code == 200 else []
    check("/v1/completions with a suffix: the same default drafters", kinds == ["suffix"] and
          text["choices"][0]["text"] == alone.get("content"), f"{code} {text}")


def metrics_moved(port, request):
    """Runs request() and returns (its result, how far /metrics' completions and predicted tokens moved)."""
    def figures():
        samples, _, bad = parse_prometheus(curl(port, "/metrics")[1])
        return (samples.get(("specd:requests_total", ""), -1), samples.get(("llamacpp:tokens_predicted_total", ""), -1),
                bad)
    before = figures()
    result = request()
    after = figures()
    return result, (after[0] - before[0], after[1] - before[1], before[2] + after[2])


def check_metrics(port, fim_port):
    """/metrics counts the completions of the new routes as /completion's: /v1/messages, /v1/responses,
    /infill, every choice of n > 1; count_tokens and /apply-template generate nothing (as /tokenize)."""
    chat = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    cases = [
        ("/v1/messages", dict(chat, max_tokens=5), 1, lambda a: a["usage"]["output_tokens"]),
        ("/v1/responses", {"model": "m", "input": "Hi", "temperature": 0, "max_output_tokens": 5}, 1,
         lambda a: a["usage"]["output_tokens"]),
        ("/v1/chat/completions", dict(chat, max_tokens=5, n=2), 2, lambda a: a["usage"]["completion_tokens"]),
        ("/v1/messages/count_tokens", chat, 0, lambda a: 0),
        ("/apply-template", chat, 0, lambda a: 0),
    ]
    for path, body, n, tokens in cases:
        (code, answer), (requests, predicted, bad) = metrics_moved(port, lambda: post(port, path, body))
        check(f"/metrics: {path} counted: {n} completion(s), its tokens", code == 200 and not bad and requests == n
              and predicted == tokens(answer), f"{code} {requests} {predicted} {bad} {answer}")
    body = {"input_prefix": "def f():\n", "input_suffix": "\nreturn 1", "n_predict": 4, "temperature": 0}
    (code, answer), (requests, predicted, bad) = metrics_moved(fim_port, lambda: post(fim_port, "/infill", body))
    check("/metrics: /infill counted: 1 completion, its tokens", code == 200 and not bad and requests == 1
          and predicted == answer.get("tokens_predicted"), f"{code} {requests} {predicted} {answer}")


def check_chat(port):
    # a chat through the Jinja template: an assistant message in OpenAI's shape, blocking and streamed
    body = {"messages": HISTORY[1:2], "max_tokens": 6, "temperature": 0}
    code, answer = post(port, "/v1/chat/completions", body)
    message = answer["choices"][0]["message"] if code == 200 else {}
    check("a chat through the Jinja template answers", code == 200 and message.get("role") == "assistant" and
          isinstance(message.get("content"), str) and answer["usage"]["prompt_tokens"] > 0, f"{code} {answer}")
    code, text = curl(port, "/v1/chat/completions", dict(body, stream=True))
    events = sse_events(text)
    streamed_text = "".join((c.get("delta", {}).get("content") or "") + (c.get("delta", {}).get("reasoning_content") or "")
                            for e in events for c in e.get("choices", []))
    whole = (message.get("reasoning_content") or "") + (message.get("content") or "")
    check("streamed: the deltas make the blocking answer", code == 200 and streamed_text == whole and
          events[-1]["choices"][0]["finish_reason"] in ("stop", "length"), f"{code} {streamed_text!r} {whole!r}")
    # the prompt the chat route renders is /apply-template's (its token count)
    code, applied = post(port, "/apply-template", {"messages": HISTORY[1:2]})
    code2, tokens = post(port, "/tokenize", {"content": applied.get("prompt", ""), "add_special": True,
                                             "parse_special": True})
    check("the chat's prompt is /apply-template's", code == 200 and code2 == 200 and
          len(tokens.get("tokens", [])) == answer["usage"]["prompt_tokens"], f"{tokens} {answer.get('usage')}")
    # bad input: a 400 naming the field
    code, answer = post(port, "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]})
    check("an unknown role: 400 naming it", openai_error(code, answer, 400, "messages[0].role", "wizard"),
          f"{code} {answer}")
    code, answer = post(port, "/v1/completions", {"prompt": "x", "chat_template_kwargs": {}})
    check("chat_template_kwargs on /v1/completions: 400", openai_error(code, answer, 400, "chat_template_kwargs",
                                                                        "chat"), f"{code} {answer}")


def check_builtin(specd, target):
    server, port = start_server(specd, ["-m", target, "--no-jinja", "--chat-template", "chatml",
                                        "--api-key", "test-key"])
    try:
        code, answer = post(port, "/apply-template", {"messages": HISTORY[1:2]})
        check("--no-jinja: /apply-template through the built-in format", code == 200 and answer.get("prompt") ==
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", f"{code} {answer}")
        code, answer = post(port, "/v1/chat/completions", {"messages": HISTORY[1:2], "max_tokens": 2,
                                                           "chat_template_kwargs": {"enable_thinking": False}})
        check("--no-jinja: chat_template_kwargs refused naming Jinja",
              openai_error(code, answer, 400, "chat_template_kwargs", "Jinja"), f"{code} {answer}")
        code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required"))
        check("--no-jinja: tools refused naming Jinja", openai_error(code, answer, 400, "tools", "Jinja"),
              f"{code} {answer}")
        code, answer = post(port, "/v1/chat/completions", {"messages": HISTORY[1:2], "max_tokens": 2})
        check("--no-jinja: a chat answers", code == 200 and "choices" in answer, f"{code} {answer}")
    finally:
        check("the --no-jinja server stops cleanly", stop_server(server) == 0)
    both = subprocess.run([specd, "serve", "-m", target, "--chat-template", "chatml", "--chat-template-file",
                           "/nonexistent"], capture_output=True, text=True, timeout=60)
    check("a missing --chat-template-file is refused at start", both.returncode != 0 and
          "--chat-template-file" in both.stderr, both.stderr)


def check_small_context(specd, target, templates_dir):
    """A conversation longer than a slot's context is refused, not cut: cut from its start, the
    Functionary prompt lost its tool descriptions and the tiny model took the grammar's free-text
    branch ("all\n" and text), so tool_choice "required" answered free text at 256 tokens a slot."""
    server, port = start_server(specd, ["-m", target, "-c", "1024", "-np", "4", "--chat-template-file",
                                        os.path.join(templates_dir, FUNCTIONARY), "--api-key", "test-key"])
    try:
        check("the server with 256 tokens a slot starts", bool(port))
        if not port:
            return
        code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required"))
        check("a conversation longer than a slot: 400 naming messages and the context, not a cut prompt",
              openai_error(code, answer, 400, "messages", "context holds 256"), f"{code} {answer}")
        code, answer = post(port, "/v1/chat/completions", dict(ASK, tool_choice="required", stream=True))
        check("streamed: the same 400", openai_error(code, answer, 400, "messages", "context holds 256"),
              f"{code} {answer}")
        code, answer = post(port, "/v1/responses", {"model": "m", "input": ASK["messages"], "tools": [
            dict(t["function"], type="function") for t in TOOLS], "max_output_tokens": 4})
        check("/v1/responses: refused too, naming its own field (input)",
              openai_error(code, answer, 400, "input", "context holds 256"), f"{code} {answer}")
        code, answer = post(port, "/v1/messages", {"model": "m", "max_tokens": 4, "messages": ASK["messages"],
                                                   "tools": [{"name": "get_weather", "input_schema": TOOLS[0][
                                                       "function"]["parameters"]}]})
        check("/v1/messages: refused too", anthropic_error(code, answer, 400, "context holds 256"), f"{code} {answer}")
        code, answer = post(port, "/v1/completions", {"prompt": "the " * 300, "max_tokens": 2})
        check("/v1/completions still cuts a long prompt (the old API's rule)", code == 200 and
              answer["usage"]["prompt_tokens"] < 256, f"{code} {answer}")
    finally:
        check("the server with 256 tokens a slot stops cleanly", stop_server(server) == 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_prompt(llama_server, model, template, body):
    """llama-server's /apply-template for `body` with --chat-template-file `template`."""
    port = free_port()
    server = subprocess.Popen([llama_server, "-m", model, "--port", str(port), "--host", "127.0.0.1", "-c", "512",
                               "--chat-template-file", template, "-np", "1", "--no-warmup"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            code, _ = curl(port, "/health", key=None)
            if code == 200:
                break
            if server.poll() is not None:
                return None
            time.sleep(0.1)
        answers = []
        for b in body:
            code, answer = post(port, "/apply-template", b)
            answers.append(answer.get("prompt") if code == 200 and isinstance(answer, dict) else None)
        return answers
    finally:
        server.terminate()
        server.wait(timeout=30)


def compare_with_llama_server(specd, model, templates_dir, llama_server):
    bodies = [{"messages": HISTORY}, {"messages": HISTORY, "tools": TOOLS},
              {"messages": HISTORY[1:2], "chat_template_kwargs": {"enable_thinking": False}}]
    for name in COMPARED:
        template = os.path.join(templates_dir, name)
        theirs = llama_server_prompt(llama_server, model, template, bodies)
        server, port = start_server(specd, ["-m", model, "--chat-template-file", template, "--api-key", "test-key"])
        try:
            ours = [post(port, "/apply-template", b)[1].get("prompt") if port else None for b in bodies]
        finally:
            stop_server(server)
        same = theirs is not None and all(t == o for t, o in zip(theirs, ours) if t is not None) and \
            theirs[0] is not None
        check(f"{name}: the prompts equal llama-server's", same, f"\nllama-server: {theirs}\nspecd:        {ours}")


def main(specd, models, templates_dir, llama_server=None):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    for template, checks in ((QWEN3, check_templates), (QWEN3, check_chat), (FUNCTIONARY, check_tools),
                            (FUNCTIONARY, check_anthropic), (FUNCTIONARY, check_responses),
                            (QWEN3, check_lazy_grammar)):
        # room for the whole prompt (the template's tool descriptions): a cut prompt changes the answer
        server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "4096", "-np", "2", "--chat-template-file",
                                            os.path.join(templates_dir, template), "--api-key", "test-key"])
        try:
            check(f"the server starts with --chat-template-file {template}", bool(port))
            if port:
                checks(port)
        finally:
            check(f"the server with {template} stops cleanly", stop_server(server) == 0)
    check_builtin(specd, target)
    check_small_context(specd, target, templates_dir)
    fim, _ = start_server(specd, ["-m", os.path.join(models, "fim.gguf"), "-c", "4096", "-np", "1",
                                  "--api-key", "test-key"])
    bare, _ = start_server(specd, ["-m", target, "--api-key", "test-key"])
    try:
        fim_port = int(fim.first_line.rsplit(":", 1)[1]) if fim.first_line.startswith("specd: listening") else None
        bare_port = int(bare.first_line.rsplit(":", 1)[1]) if bare.first_line.startswith("specd: listening") else None
        check("the servers for /infill start", bool(fim_port and bare_port))
        if fim_port and bare_port:
            check_infill(fim_port, bare_port)
            check_metrics(bare_port, fim_port)
    finally:
        check("the /infill servers stop cleanly", stop_server(fim) == 0 and stop_server(bare) == 0)
    if llama_server and os.access(llama_server, os.X_OK):
        compare_with_llama_server(specd, target, templates_dir, llama_server)
    else:
        print(f"SKIP the comparison with llama-server: {llama_server or '(none given)'} is not there "
              "(make bench-deps builds it)")
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
