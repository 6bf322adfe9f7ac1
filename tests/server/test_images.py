#!/usr/bin/env python3
"""Images with speculation on (issue 46), through curl on the tiny models and the tiny vision
projector (tools/make_tiny_mmproj.c): an OpenAI chat with an image_url data URI answered with the
draft model drafting (drafted > 0) and the same text as with speculation off, and as the
model-free drafters give; another image gives another text (the image is used); Anthropic image
blocks, Responses input_image parts and /completion's multimodal_data give the same answer as the
chat route; bad images answer a 400 naming what is wrong (an http URL, not base64, not an image,
a marker count that is not the image count, a prompt ending with an image, a server without
--mmproj). Where llama-server was built (make bench-deps), its text on the same model, projector and
image (speculation off there) equals specd's with speculation on; skipped, saying so, where not.

    test_images.py SPECD MODELS_DIR TEMPLATES_DIR LLAMA_SERVER
"""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from concurrent.futures import ThreadPoolExecutor

from test_serve import check, curl, curl_json, served, summary

N = 32


def png(width, height, pixel):
    """A PNG of width x height RGB pixels, pixel(x, y) -> (r, g, b)."""
    rows = b"".join(b"\x00" + bytes(c for x in range(width) for c in pixel(x, y)) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


IMAGE_A = base64.b64encode(png(32, 32, lambda x, y: ((x * 8) % 256, (y * 8) % 256, 128))).decode()
IMAGE_B = base64.b64encode(png(40, 24, lambda x, y: (255 - (x * 6) % 256, (x * y) % 256, 30))).decode()


def data_uri(image):
    return "data:image/png;base64," + image


def chat(port, image, speculative=None, question="what is in the picture?"):
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": question},
                                                      {"type": "image_url", "image_url": {"url": data_uri(image)}}]}],
            "max_tokens": N, "temperature": 0}
    if speculative is not None:
        body["speculative"] = speculative
    return curl_json(port, "/v1/chat/completions", body)


def chat_text(answer):
    return answer["choices"][0]["message"]["content"] if isinstance(answer, dict) and "choices" in answer else None


def check_props(port, vision):
    code, props = curl_json(port, "/props")
    check(f"/props: modalities.vision {vision}, the media marker", code == 200
          and props.get("modalities", {}).get("vision") is vision and props.get("media_marker") == "<__media__>",
          (code, props.get("modalities") if isinstance(props, dict) else props))


def check_chat(port):
    """The goal: speculation on (the draft model, made to draft), drafted > 0, text equal to the
    target alone; the model-free drafters too; another image, another text."""
    code, alone = chat(port, IMAGE_A, {"type": ["none"]})
    check("chat with an image, speculation off: 200", code == 200 and chat_text(alone), (code, alone))
    code, drafted = chat(port, IMAGE_A, {"n_min": 4, "n_max": 4})
    spec = drafted.get("speculative", {}) if isinstance(drafted, dict) else {}
    check("chat with an image, speculation on: the draft model drafted", code == 200 and spec.get("drafted", 0) > 0,
          (code, spec))
    check("chat with an image, speculation on: the same text as the target alone",
          chat_text(drafted) == chat_text(alone), (chat_text(drafted), chat_text(alone)))
    code, adaptive = chat(port, IMAGE_A)
    check("chat with an image, the server's default drafting: the same text", code == 200
          and chat_text(adaptive) == chat_text(alone), (code, adaptive))
    for drafter in ("ngram-simple", "suffix"):
        code, answer = chat(port, IMAGE_A, {"type": [drafter]})
        check(f"chat with an image, {drafter}: the same text", code == 200 and chat_text(answer) == chat_text(alone),
              (code, answer))
    code, other = chat(port, IMAGE_B, {"n_min": 4, "n_max": 4})
    check("another image gives another text (the image is used)", code == 200 and chat_text(other)
          and chat_text(other) != chat_text(alone), (chat_text(other), chat_text(alone)))
    code, again = chat(port, IMAGE_A, {"n_min": 4, "n_max": 4})
    check("the first image again, after another: its text again (the prompt cache tells images apart)",
          code == 200 and chat_text(again) == chat_text(alone), (chat_text(again), chat_text(alone)))
    return chat_text(alone)


def check_stream_and_slots(specd, args, expected):
    """Streamed, the same text; two image chats and a text one at once in two slots (an image's
    prompt goes in whole while the other slot runs), each the text it gets alone."""
    with served(specd, args + ["-np", "2"], "two slots") as (_, port):
        if not port:
            return
        body = {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is in the picture?"},
            {"type": "image_url", "image_url": {"url": data_uri(IMAGE_A)}}]}],
            "max_tokens": N, "temperature": 0, "stream": True, "speculative": {"n_min": 4, "n_max": 4}}
        code, text = curl(port, "/v1/chat/completions", body, extra=["-N"])
        events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]  # not [DONE]
        streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        check("streamed chat with an image: the blocking text", code == 200 and streamed == expected, (code, streamed))
        text_body = {"prompt": "one day the dog ran", "n_predict": N, "temperature": 0, "ignore_eos": True}
        code, solo_text = curl_json(port, "/completion", text_body)
        code_b, solo_b = chat(port, IMAGE_B, {"n_min": 4, "n_max": 4})
        with ThreadPoolExecutor(4) as pool:
            jobs = [pool.submit(chat, port, IMAGE_A, {"n_min": 4, "n_max": 4}),
                    pool.submit(chat, port, IMAGE_B, {"n_min": 4, "n_max": 4}),
                    pool.submit(curl_json, port, "/completion", text_body)]
            (ca, a), (cb, b), (ct, t) = [j.result() for j in jobs]
        check("side by side in two slots: each image chat and the text request as alone", ca == 200 and cb == 200
              and ct == 200 and chat_text(a) == expected and chat_text(b) == chat_text(solo_b)
              and t.get("content") == solo_text.get("content"), (chat_text(a), chat_text(b), t))
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is in the picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_A}}]}]}
        code, made = curl_json(port, "/apply-template", {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look:"}, {"type": "image_url", "image_url": {"url": data_uri(IMAGE_A)}}]}]})
        check("/apply-template with an image: the marker where it stood", code == 200
              and "look:" in made.get("prompt", "") and "<__media__>" in made.get("prompt", ""), (code, made))
        code, counted = curl_json(port, "/v1/messages/count_tokens", body)
        code_c, answer = chat(port, IMAGE_A, {"type": ["none"]})
        check("count_tokens with an image: the chat's prompt tokens (the image's positions counted)", code == 200
              and code_c == 200 and counted.get("input_tokens") == answer["usage"]["prompt_tokens"], (counted, answer))


def check_queue_of_images(specd, args):
    """One slot and 28 image requests at once: more images than the engine keeps (16 + 4 a slot),
    so requests waiting in the queue find theirs let go and the server holds them again
    (request_images.c): each answer is the one its request gets alone."""
    images = [base64.b64encode(png(32, 32, lambda x, y, k=k: ((x * k) % 256, (y + k * 9) % 256, k * 7 % 256))).decode()
              for k in range(1, 29)]

    def ask(image):
        body = {"prompt": {"prompt_string": "<__media__> is", "multimodal_data": [image]}, "n_predict": 6,
                "temperature": 0, "ignore_eos": True, "speculative": {"n_min": 2, "n_max": 2}}
        return curl_json(port, "/completion", body)

    with served(specd, args + ["-np", "1"], "a queue of images") as (_, port):
        if not port:
            return
        alone = [ask(image) for image in images]
        with ThreadPoolExecutor(28) as pool:
            together = list(pool.map(ask, images))
        same = [a[0] == 200 and t[0] == 200 and a[1].get("content") == t[1].get("content")
                for a, t in zip(alone, together)]
        check("28 image requests queued at one slot: each answered as alone", all(same),
              [t for t, ok in zip(together, same) if not ok][:2])


def check_other_routes(port, expected):
    """Anthropic's image blocks, the Responses API's input_image parts: the chat route's prompt."""
    body = {"model": "m", "max_tokens": N, "temperature": 0,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is in the picture?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE_A}}]}]}
    code, answer = curl_json(port, "/v1/messages", body)
    text = "".join(b.get("text", "") for b in answer.get("content", [])) if isinstance(answer, dict) else None
    check("Anthropic image block: the chat route's text", code == 200 and text == expected, (code, answer))
    body["messages"][0]["content"][1]["source"] = {"type": "url", "url": "http://example.com/a.png"}
    code, answer = curl_json(port, "/v1/messages", body)
    check("Anthropic image by URL: 400, not fetched", code == 400 and "not fetched" in str(answer), (code, answer))
    body = {"model": "m", "max_output_tokens": N, "temperature": 0,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "what is in the picture?"},
                                                   {"type": "input_image", "image_url": data_uri(IMAGE_A)}]}]}
    code, answer = curl_json(port, "/v1/responses", body)
    text = answer.get("output_text") if isinstance(answer, dict) else None
    if text is None and isinstance(answer, dict):
        text = "".join(c.get("text", "") for o in answer.get("output", []) for c in o.get("content", []) or [])
    check("Responses input_image: the chat route's text", code == 200 and text == expected, (code, answer))


def completion(port, prompt_string, images, speculative=None, n=N):
    body = {"prompt": {"prompt_string": prompt_string, "multimodal_data": images}, "n_predict": n,
            "temperature": 0, "ignore_eos": True}
    if speculative is not None:
        body["speculative"] = speculative
    return curl_json(port, "/completion", body)


def check_completion(port):
    prompt = "a picture: <__media__> shows"
    code, alone = completion(port, prompt, [IMAGE_A], {"type": ["none"]})
    check("/completion multimodal_data, speculation off: 200", code == 200 and "content" in alone, (code, alone))
    code, drafted = completion(port, prompt, [IMAGE_A], {"n_min": 4, "n_max": 4})
    timings = drafted.get("timings", {}) if isinstance(drafted, dict) else {}
    check("/completion multimodal_data, speculation on: drafted, the same text", code == 200
          and timings.get("draft_n", 0) > 0 and drafted.get("content") == alone.get("content"), (code, drafted, alone))
    code, two = completion(port, "<__media__> and <__media__> then", [IMAGE_A, IMAGE_B], {"n_min": 4, "n_max": 4})
    code_off, two_off = completion(port, "<__media__> and <__media__> then", [IMAGE_A, IMAGE_B], {"type": ["none"]})
    check("/completion with two images: the same text with and without speculation", code == 200 and code_off == 200
          and two.get("content") == two_off.get("content"), (code, two, two_off))
    return alone.get("content") if isinstance(alone, dict) else None


def error_message(answer):
    if not isinstance(answer, dict):
        return str(answer)
    err = answer.get("error", {})
    return err.get("message", "") if isinstance(err, dict) else str(err)


def check_bad_images(port):
    cases = [
        ("an http URL", {"url": "http://example.com/cat.png"}, "not fetched"),
        ("a data URI that is not base64", {"url": "data:image/png;base64,@@@"}, "not base64"),
        ("a data URI without base64", {"url": "data:image/png,abc"}, "not a base64 data URI"),
        ("bytes that are no image", {"url": "data:image/png;base64," + base64.b64encode(b"hello").decode()},
         "not an image"),
        ("no url", {}, "must be"),
    ]
    for what, image_url, needle in cases:
        body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                          {"type": "image_url", "image_url": image_url}]}],
                "max_tokens": 4}
        code, answer = curl_json(port, "/v1/chat/completions", body)
        check(f"an image part with {what}: 400 saying so", code == 400 and needle in error_message(answer),
              (code, answer))
    code, answer = completion(port, "one <__media__> two <__media__>", [IMAGE_A])
    check("two markers, one image: 400", code == 400 and "2 image markers" in error_message(answer), (code, answer))
    code, answer = completion(port, "ends with <__media__>", [IMAGE_A])
    check("a prompt ending with an image: 400", code == 400 and "ends with an image" in error_message(answer),
          (code, answer))
    code, answer = completion(port, "x <__media__> y", ["not base64!"])
    check("multimodal_data that is not base64: 400", code == 400 and "base64" in error_message(answer), (code, answer))
    code, answer = completion(port, "x " * 1100 + "<__media__> y", [IMAGE_A])
    check("a prompt with an image longer than the context: 400, not cut", code == 400
          and "not cut" in error_message(answer), (code, answer))
    code, answer = curl_json(port, "/health")
    check("the server is still up after the bad images", code == 200, (code, answer))


def check_without_projector(specd, target):
    with served(specd, ["-m", target, "-c", "1024", "-t", "1", "--chat-template", "chatml"], "no projector") as (_, port):
        if not port:
            return
        check_props(port, False)
        code, answer = chat(port, IMAGE_A)
        check("an image to a server without --mmproj: 400 naming --mmproj", code == 400
              and "--mmproj" in error_message(answer), (code, answer))


def check_init(specd, models, target):
    """init's "mmproj" over HTTP: confined to --models-dir as the models are, a file that is no
    projector refused naming the field, a projector loaded (vision in /props)."""
    args = ["-m", target, "-c", "512", "-t", "1", "--admin-api-key", "adm", "--models-dir", models]
    with served(specd, args, "init") as (_, port):
        if not port:
            return

        def init(params):
            return curl_json(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "init", "params": params}, key="adm")

        code, answer = init({"model": "target.gguf", "mmproj": "/etc/passwd"})
        check("init's mmproj outside --models-dir: refused naming mmproj", answer.get("error", {}).get("data", {})
              .get("field") == "mmproj" and "models directory" in error_message(answer), answer)
        code, answer = init({"model": "target.gguf", "mmproj": "draft.gguf"})
        check("init's mmproj that is no projector: refused naming mmproj", answer.get("error", {}).get("data", {})
              .get("field") == "mmproj" and "vision projector" in error_message(answer), answer)
        code, answer = init({"model": "target.gguf", "mmproj": "mmproj.gguf", "args": ["-c", "512"]})
        code_p, props = curl_json(port, "/props", key="adm")
        check("init with mmproj: loaded, vision in /props", answer.get("result", {}).get("state") == "ready"
              and props.get("modalities", {}).get("vision") is True, (answer, props))


def llama_server_text(llama_server, target, mmproj, prompt, images):
    """llama-server's /completion text on the same model, projector and images (its speculation off)."""
    port = 20000 + os.getpid() % 20000
    with tempfile.TemporaryFile() as log:
        # llama-server draws a random image marker unless LLAMA_MEDIA_MARKER pins one
        env = dict(os.environ, LLAMA_MEDIA_MARKER="<__media__>")
        server = subprocess.Popen([llama_server, "-m", target, "--mmproj", mmproj, "-c", "1024", "-t", "1", "-np", "1",
                                   "--port", str(port), "--host", "127.0.0.1", "--no-webui"],
                                  stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            for _ in range(300):
                code, _ = curl_json(port, "/health", key=None)
                if code == 200:
                    break
                time.sleep(0.1)
            code, answer = curl_json(port, "/completion", {
                "prompt": {"prompt_string": prompt, "multimodal_data": images}, "n_predict": N, "temperature": 0,
                "ignore_eos": True, "cache_prompt": False}, key=None)
            if code != 200:
                log.seek(0)
                print(log.read().decode("utf-8", "replace")[-2000:])
            return code, answer
        finally:
            server.terminate()
            server.wait(timeout=30)


def check_llama_server(llama_server, port, target, mmproj):
    if not os.access(llama_server, os.X_OK):
        print(f"skip: llama-server is not built at {llama_server} (make bench-deps builds it): the comparison of "
              "image answers with llama-server's is not made")
        return
    prompt = "a picture: <__media__> shows"
    code, theirs = llama_server_text(llama_server, target, mmproj, prompt, [IMAGE_A])
    code_ours, ours = completion(port, prompt, [IMAGE_A], {"n_min": 4, "n_max": 4})
    check("llama-server (speculation off) and specd (speculation on): the same text for an image prompt",
          code == 200 and code_ours == 200 and theirs.get("content") == ours.get("content")
          and ours.get("timings", {}).get("draft_n", 0) > 0, (code, theirs, ours))


def main(specd, models, templates_dir, llama_server):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    mmproj = os.path.join(models, "mmproj.gguf")
    # a Jinja template: Anthropic's and the Responses API's routes need one
    template = os.path.join(templates_dir, "Qwen-Qwen3-0.6B.jinja")
    args = ["-m", target, "-md", draft, "--mmproj", mmproj, "-c", "1024", "-t", "1", "--chat-template-file", template]
    with served(specd, args, "images") as (_, port):
        if port:
            check_props(port, True)
            expected = check_chat(port)
            check_other_routes(port, expected)
            check_completion(port)
            check_bad_images(port)
            check_llama_server(llama_server, port, target, mmproj)
    check_stream_and_slots(specd, args, expected)
    check_queue_of_images(specd, args)
    check_without_projector(specd, target)
    check_init(specd, models, target)
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
