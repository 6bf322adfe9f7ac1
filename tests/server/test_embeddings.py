#!/usr/bin/env python3
"""`specd serve`'s embeddings and rerank as llama-server's (issue 46), through curl on the tiny
models: --embedding, --pooling, --rerank; /embedding, /embeddings, /v1/embeddings (OpenAI's shape,
encoding_format float and base64, llama-server's embd_normalize), /rerank and /v1/rerank (Jina's
and TEI's shapes); errors in llama-server's shape (a server without --embedding, empty input, an
input too long, wrong types); generation on the same server unchanged while embeddings run; and
the numbers against llama-server's on the same model and input, where it is built.

    test_embeddings.py SPECD MODELS_DIR [LLAMA_SERVER]

Tolerance against llama-server: 1e-6 absolute on every float. Both run llama.cpp's same CPU
kernels on the same f32 weights with the same settings (flash attention auto, f16 caches, the
input decoded alone), so the floats come out equal or within a few units in the last place: the
pooled sums' order can differ with how a pass is split into threads' chunks, and llama-server
itself gives two values 1e-8 apart for the same text alone and batched with another input. A
wrong pooling, normalization, prompt or token would be off by far more (1e-2 and up)."""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_serve import check, curl, curl_json, served, summary  # noqa: E402

TOL = 1e-6
TEXTS = ["hello world", "the cat sat on the mat", "a", "quick brown fox and the lazy dog"]
QUERY = "the cat"
DOCS = ["the cat sat on the mat", "a dog ran", "hello world", "cat cat cat", "the quick brown fox"]


def post(port, path, body):
    return curl_json(port, path, body, key=None)


def close(a, b, tol=TOL):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def error_of(code, answer, status, kind):
    """llama-server's error shape: {"error": {code, message, type}} with that status."""
    err = answer.get("error") if isinstance(answer, dict) else None
    return code == status and isinstance(err, dict) and err.get("code") == status and err.get("type") == kind and \
        isinstance(err.get("message"), str) and err["message"] != ""


def v1_vectors(port, inputs, **extra):
    code, answer = post(port, "/v1/embeddings", dict({"input": inputs}, **extra))
    if code != 200:
        return None, answer
    return [d["embedding"] for d in sorted(answer["data"], key=lambda d: d["index"])], answer


# ---- specd alone ---------------------------------------------------------------------------------

def check_shapes(port):
    vectors, answer = v1_vectors(port, TEXTS[:2])
    check("/v1/embeddings answers OpenAI's shape", vectors is not None and answer.get("object") == "list" and
          answer.get("model") == "embed.gguf" and [d.get("object") for d in answer["data"]] == ["embedding"] * 2 and
          [d.get("index") for d in answer["data"]] == [0, 1] and len(vectors[0]) == 32, answer)
    n = sum(post(port, "/tokenize", {"content": t, "add_special": True})[1]["tokens"].__len__() for t in TEXTS[:2])
    check("usage counts the inputs' tokens (BOS included)", vectors is not None and
          answer["usage"] == {"prompt_tokens": n, "total_tokens": n}, (answer.get("usage") if vectors else answer, n))
    norms = [math.sqrt(sum(x * x for x in v)) for v in vectors or []]
    check("pooled embeddings are normalized to euclidean length 1 by default", norms and
          all(abs(x - 1) < 1e-5 for x in norms), norms)
    check("two different inputs embed differently", vectors and not close(vectors[0], vectors[1], 1e-3))
    _, named = post(port, "/v1/embeddings", {"input": "x", "model": "my-name"})
    check("the body's model is echoed, as llama-server", named.get("model") == "my-name", named)

    code, llama = post(port, "/embedding", {"content": TEXTS[0]})
    check("/embedding answers llama-server's own shape: [{index, embedding: [row]}]", code == 200 and
          isinstance(llama, list) and llama[0]["index"] == 0 and len(llama[0]["embedding"]) == 1 and
          close(llama[0]["embedding"][0], vectors[0], 0), llama)
    code, both = post(port, "/embeddings", {"input": TEXTS[:2]})
    check("/embeddings takes input too, one item per input", code == 200 and [i["index"] for i in both] == [0, 1], both)
    code, content_v1 = post(port, "/v1/embeddings", {"content": TEXTS[0]})
    check("/v1/embeddings with content answers llama-server's own shape (as llama-server)", code == 200 and
          isinstance(content_v1, list) and close(content_v1[0]["embedding"][0], vectors[0], 0), content_v1)


def f32(values):
    """Numbers read as float32: /rpc sends 15 digits, enough to give back the very floats."""
    return [struct.unpack("<f", struct.pack("<f", x))[0] for x in values]


def check_json_rpc(port):
    vectors, _ = v1_vectors(port, TEXTS[:2])
    code, answer = post(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "embeddings", "params": {"input": TEXTS[:2]}})
    result = answer.get("result", {}) if isinstance(answer, dict) else {}
    check("JSON-RPC embeddings: /v1/embeddings' answer, the same floats", code == 200 and
          [f32(d["embedding"]) for d in result.get("data", [])] == [f32(v) for v in vectors], answer)
    code, answer = post(port, "/rpc", {"jsonrpc": "2.0", "id": 2, "method": "embeddings", "params": {"input": []}})
    err = answer.get("error", {}) if isinstance(answer, dict) else {}
    check("JSON-RPC embeddings, an empty list: -32602 naming llama-server's type", err.get("code") == -32602 and
          "invalid_request_error" in err.get("message", ""), answer)
    code, answer = post(port, "/rpc", {"jsonrpc": "2.0", "id": 3, "method": "rerank",
                                       "params": {"query": "x", "documents": ["y"]}})
    err = answer.get("error", {}) if isinstance(answer, dict) else {}
    check("JSON-RPC rerank on an embedding model: -32600 not_supported_error", err.get("code") == -32600 and
          "not_supported_error" in err.get("message", ""), answer)


def check_base64(port):
    floats, _ = v1_vectors(port, TEXTS[:2])
    code, answer = post(port, "/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "base64"})
    decoded = []
    for d in answer.get("data", []) if code == 200 else []:
        raw = base64.b64decode(d["embedding"])
        decoded.append(list(struct.unpack(f"<{len(raw) // 4}f", raw)))
    check("encoding_format base64 decodes to the very floats of float", code == 200 and decoded == floats and
          all(d.get("encoding_format") == "base64" for d in answer["data"]), answer)
    code, plain = post(port, "/v1/embeddings", {"input": "x", "encoding_format": "float"})
    check("encoding_format float is the default shape", code == 200 and isinstance(plain["data"][0]["embedding"], list))


def check_normalize(port):
    raw, _ = v1_vectors(port, TEXTS[1], embd_normalize=-1)
    l2, _ = v1_vectors(port, TEXTS[1])
    taxi, _ = v1_vectors(port, TEXTS[1], embd_normalize=1)
    top, _ = v1_vectors(port, TEXTS[1], embd_normalize=0)
    p3, _ = v1_vectors(port, TEXTS[1], embd_normalize=3)
    r = raw[0]
    norm2 = math.sqrt(sum(x * x for x in r))
    check("embd_normalize -1: raw, its euclidean normalization equals the default", not close(r, l2[0], 1e-3) and
          close([x / norm2 for x in r], l2[0]), (r[:3], l2[0][:3]))
    check("embd_normalize 1: taxicab (the magnitudes sum to 1)", abs(sum(abs(x) for x in taxi[0]) - 1) < 1e-5)
    check("embd_normalize 0: the largest magnitude is 32760 (int16's range)", abs(max(abs(x) for x in top[0]) - 32760) < 1e-2)
    p = sum(abs(x) ** 3 for x in r) ** (1 / 3)
    check("embd_normalize 3: the 3-norm", close([x / p for x in r], p3[0]), (p3[0][:3],))


def check_inputs(port):
    _, tokens = post(port, "/tokenize", {"content": TEXTS[1], "add_special": True})
    by_text, _ = v1_vectors(port, TEXTS[1])
    by_ids, _ = v1_vectors(port, tokens["tokens"])
    check("token ids embed as their text", by_ids and close(by_ids[0], by_text[0], 0))
    several, _ = v1_vectors(port, [tokens["tokens"], TEXTS[0]])
    check("a list of token lists and strings: one input each", several and len(several) == 2 and
          close(several[0], by_text[0], 0))
    _, head = post(port, "/tokenize", {"content": "hello", "add_special": True})
    _, tail = post(port, "/tokenize", {"content": "world", "add_special": False})
    mixed, answer = v1_vectors(port, [head["tokens"][1], "world"])  # numbers make it one input
    ids, _ = v1_vectors(port, [head["tokens"][1]] + tail["tokens"])
    check("an array mixing ids and text is one input (text after the first element gets no BOS)", mixed and
          len(mixed) == 1 and close(mixed[0], ids[0], 0), answer)
    obj, _ = v1_vectors(port, [{"prompt_string": TEXTS[1]}])
    check("{prompt_string} is an input", obj and close(obj[0], by_text[0], 0))


def check_errors(port, n_max):
    bad = {
        "no input": {},
        "an empty list": {"input": []},
        "an input without tokens": {"input": [[]]},
        "a number as the input": {"input": 5},
        "an object in a list": {"input": [{"x": 1}]},
        "a token id out of the vocabulary": {"input": [1, 100000]},
        "a negative token id": {"input": [[1, -3]]},
        "encoding_format hex": {"input": "x", "encoding_format": "hex"},
        "encoding_format not a string": {"input": "x", "encoding_format": 1},
        "embd_normalize not an integer": {"input": "x", "embd_normalize": "2"},
        "multimodal data": {"input": [{"prompt_string": "x", "multimodal_data": ["AAAA"]}]},
    }
    for name, body in bad.items():
        code, answer = post(port, "/v1/embeddings", body)
        check(f"{name}: 400 invalid_request_error", error_of(code, answer, 400, "invalid_request_error"), (code, answer))
    code, answer = post(port, "/v1/embeddings", "{not json")
    check("a body that is not JSON: 400 in llama-server's shape", error_of(code, answer, 400, "invalid_request_error"),
          answer)
    long_input = list(range(3, 3 + n_max + 1))
    code, answer = post(port, "/v1/embeddings", {"input": long_input})
    err = answer.get("error", {}) if isinstance(answer, dict) else {}
    check("an input over the batch: 400 exceed_context_size_error with its length and the most",
          error_of(code, answer, 400, "exceed_context_size_error") and err.get("n_prompt_tokens") == n_max + 1 and
          err.get("n_ctx") == n_max, answer)
    code, answer = post(port, "/v1/embeddings", {"input": long_input[:n_max]})
    check("an input of exactly the batch is embedded", code == 200, answer)
    code, answer = post(port, "/v1/embeddings", {"input": ["x"] * 2049})
    check("more than 2048 inputs: 400", error_of(code, answer, 400, "invalid_request_error"), answer)
    code, answer = curl_json(port, "/v1/embeddings", key=None)
    check("GET /v1/embeddings: 405 in llama-server's shape", error_of(code, answer, 405, "invalid_request_error"), answer)
    code, answer = post(port, "/rerank", {"query": "x", "documents": ["y"]})
    check("/rerank on an embedding server: 501 'Start it with `--reranking`'", error_of(code, answer, 501,
          "not_supported_error") and "--reranking" in answer["error"]["message"], answer)
    code, answer = post(port, "/v1/embeddings", {"input": "x"})
    check("the server still answers after every refusal", code == 200, answer)


def completion(port, body):
    return post(port, "/completion", body)


def check_generation_unchanged(port):
    """Embeddings run on their own context: a completion's text (greedy, drafted with -md) is the
    same alone and while embeddings hammer the server from other clients."""
    body = {"prompt": "the cat sat on", "n_predict": 48, "temperature": 0, "cache_prompt": False}
    code, alone = completion(port, body)
    stop = threading.Event()
    answers = []

    def hammer():
        while not stop.is_set():
            answers.append(post(port, "/v1/embeddings", {"input": TEXTS})[0])

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    busy = [completion(port, body) for _ in range(3)]
    stop.set()
    for t in threads:
        t.join()
    drafted = (alone.get("timings") or {}).get("draft_n", 0) if code == 200 else 0
    check("a completion while embeddings run gives the same text as alone", code == 200 and
          all(c == 200 and a.get("content") == alone.get("content") for c, a in busy), (alone, busy))
    check("the completion drafted (speculation stays on with --embedding)", drafted > 0, alone.get("timings"))
    check("every embedding meanwhile was answered", answers and all(c == 200 for c in answers), answers[:5])


def check_rerank(port):
    code, jina = post(port, "/rerank", {"query": QUERY, "documents": DOCS})
    results = jina.get("results", []) if code == 200 else []
    scores = [r["relevance_score"] for r in results]
    check("/rerank answers Jina's shape, every document, best first", code == 200 and jina.get("object") == "list" and
          jina.get("model") == "rerank.gguf" and sorted(r["index"] for r in results) == list(range(len(DOCS))) and
          scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores), jina)
    check("the scores tell documents apart", len(set(scores)) == len(DOCS), scores)
    code, top = post(port, "/v1/rerank", {"query": QUERY, "documents": DOCS, "top_n": 2})
    check("/v1/rerank top_n 2: the two best", code == 200 and top["results"] == results[:2], top)
    code, same = post(port, "/v1/reranking", {"query": QUERY, "documents": DOCS})
    check("/v1/reranking answers as /rerank", code == 200 and same == jina, same)
    n = jina.get("usage", {}).get("prompt_tokens", 0)
    check("usage counts every document's prompt", n > len(DOCS) * 3 and jina["usage"]["total_tokens"] == n, jina)
    code, tei = post(port, "/reranking", {"query": QUERY, "texts": DOCS, "return_text": True})
    check("texts: TEI's shape (a list of {index, score, text}), same scores", code == 200 and isinstance(tei, list) and
          [(t["index"], t["score"], t["text"]) for t in tei] ==
          [(r["index"], r["relevance_score"], DOCS[r["index"]]) for r in results], tei)
    bad = {"no query": {"documents": DOCS}, "a query not a string": {"query": 3, "documents": DOCS},
           "no documents": {"query": "x"}, "empty documents": {"query": "x", "documents": []},
           "documents not strings": {"query": "x", "documents": ["a", 2]}, "top_n negative": {"query": "x",
           "documents": DOCS, "top_n": -1}}
    for name, body in bad.items():
        code, answer = post(port, "/rerank", body)
        check(f"rerank, {name}: 400 invalid_request_error", error_of(code, answer, 400, "invalid_request_error"), answer)
    code, rpc = post(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "rerank",
                                    "params": {"query": QUERY, "documents": DOCS}})
    got = rpc.get("result", {}) if isinstance(rpc, dict) else {}
    check("JSON-RPC rerank: /rerank's answer", code == 200 and got.get("usage") == jina.get("usage") and
          [(r["index"], f32([r["relevance_score"]])) for r in got.get("results", [])] ==
          [(r["index"], f32([r["relevance_score"]])) for r in results], rpc)
    code, answer = post(port, "/v1/embeddings", {"input": "x"})
    check("/v1/embeddings on a reranker: 400 (its output is a score)", error_of(code, answer, 400,
          "invalid_request_error"), answer)


def check_no_embedding(specd, models):
    with served(specd, ["-m", os.path.join(models, "target.gguf")], "no --embedding") as (_, port):
        if not port:
            return
        for path in ("/embedding", "/embeddings", "/v1/embeddings"):
            code, answer = post(port, path, {"input": "x"})
            check(f"{path} without --embedding: 501 'Start it with `--embeddings`'", error_of(code, answer, 501,
                  "not_supported_error") and "--embeddings" in answer["error"]["message"], answer)
        code, answer = post(port, "/v1/rerank", {"query": "x", "documents": ["y"]})
        check("/v1/rerank without --rerank: 501", error_of(code, answer, 501, "not_supported_error"), answer)


def check_flags(specd, models):
    out = subprocess.run([specd, "serve", "--help"], capture_output=True, text=True).stdout
    check("serve --help names --embedding, --pooling, --rerank and the routes",
          all(w in out for w in ("--embedding", "--embeddings", "--pooling", "--rerank", "--reranking",
                                 "/embedding", "/v1/embeddings", "/rerank", "/v1/rerank", "/reranking",
                                 "/v1/reranking")))
    bad = subprocess.run([specd, "serve", "--port", "0", "-m", os.path.join(models, "embed.gguf"), "--pooling",
                          "median"], capture_output=True, text=True, timeout=60)
    check("--pooling median is refused, naming the choices", bad.returncode != 0 and "none, mean, cls, last or rank"
          in bad.stderr, bad.stderr)
    embed = os.path.join(models, "embed.gguf")
    with served(specd, ["-m", embed, "--embedding"], "the default normalization") as (_, port):
        raw = v1_vectors(port, TEXTS[1], embd_normalize=-1)[0] if port else None
        taxicab = v1_vectors(port, TEXTS[1], embd_normalize=1)[0] if port else None
    with served(specd, ["-m", embed, "--embedding", "--embd-normalize", "-1"], "--embd-normalize -1") as (_, port):
        if port:
            check("--embd-normalize -1: a request without embd_normalize is not normalized",
                  raw and v1_vectors(port, TEXTS[1])[0] == raw)
            check("--embd-normalize: a request's own embd_normalize still wins",
                  taxicab and v1_vectors(port, TEXTS[1], embd_normalize=1)[0] == taxicab)
    with served(specd, ["-m", os.path.join(models, "embed.gguf"), "--embeddings", "--pooling", "none"],
                "--pooling none") as (_, port):
        if port:
            code, answer = post(port, "/v1/embeddings", {"input": "x"})
            check("--pooling none: /v1/embeddings refused as llama-server ('not OAI compatible')",
                  error_of(code, answer, 400, "invalid_request_error") and "OAI" in answer["error"]["message"], answer)
            _, toks = post(port, "/tokenize", {"content": TEXTS[1], "add_special": True})
            code, rows = post(port, "/embedding", {"content": TEXTS[1]})
            check("--pooling none: /embedding gives one row per token, not normalized", code == 200 and
                  len(rows[0]["embedding"]) == len(toks["tokens"]) and
                  any(abs(math.sqrt(sum(x * x for x in r)) - 1) > 1e-3 for r in rows[0]["embedding"]), rows)


# ---- against llama-server ------------------------------------------------------------------------

def llama_server_up(llama_server, args):
    port = free_port()
    server = subprocess.Popen([llama_server, "--port", str(port), "--host", "127.0.0.1", "-np", "1", "-c", "256",
                               "-t", "2", "--no-warmup"] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        code, _ = curl(port, "/health", key=None)
        if code == 200:
            return server, port
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.terminate()
    server.wait(timeout=30)
    return None, None


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def both(specd, llama_server, args, compare):
    """Runs compare(specd_port, llama_port) with both servers up on the same model and flags."""
    theirs, lport = llama_server_up(llama_server, args)
    if not theirs:
        check(f"llama-server starts with {args}", False)
        return
    try:
        with served(specd, args + ["-c", "256", "-t", "2"], f"specd {args}") as (_, port):
            if port:
                compare(port, lport)
    finally:
        theirs.terminate()
        theirs.wait(timeout=30)


def max_diff(a, b):
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0) if len(a) == len(b) else float("inf")


def compare_embeddings(pooling):
    def compare(port, lport):
        worst, same_shape = 0.0, True
        for text in TEXTS:
            for path, body in (("/embedding", {"content": text}),) + \
                    ((("/v1/embeddings", {"input": text}),) if pooling != "none" else ()):
                ours, theirs = post(port, path, body)[1], post(lport, path, body)[1]
                if path == "/embedding":
                    a = [x for row in ours[0]["embedding"] for x in row]
                    b = [x for row in theirs[0]["embedding"] for x in row]
                    same_shape &= len(ours[0]["embedding"]) == len(theirs[0]["embedding"])
                else:
                    a, b = ours["data"][0]["embedding"], theirs["data"][0]["embedding"]
                    # "model": specd names the file as its /v1/models does (no directories), llama-server
                    # the -m path as given
                    same_shape &= ours["usage"] == theirs["usage"] and ours.keys() == theirs.keys()
                worst = max(worst, max_diff(a, b))
        check(f"--pooling {pooling}: the embeddings equal llama-server's (max |diff| {worst:.2e} <= {TOL})",
              same_shape and worst <= TOL, worst)
        print(f"     --pooling {pooling}: max |specd - llama-server| = {worst:.3e}")
    return compare


def compare_base64(port, lport):
    body = {"input": TEXTS[:2], "encoding_format": "base64"}
    ours, theirs = post(port, "/v1/embeddings", body)[1], post(lport, "/v1/embeddings", body)[1]

    def floats(a):
        raw = base64.b64decode(a)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    worst = max(max_diff(floats(o["embedding"]), floats(t["embedding"])) for o, t in zip(ours["data"], theirs["data"]))
    check(f"base64: the decoded floats equal llama-server's (max |diff| {worst:.2e})", worst <= TOL and
          [sorted(o) for o in ours["data"]] == [sorted(t) for t in theirs["data"]], (ours, theirs))


def compare_rerank(port, lport):
    for path, body in (("/rerank", {"query": QUERY, "documents": DOCS}),
                       ("/v1/rerank", {"query": QUERY, "texts": DOCS, "return_text": True, "top_n": 3})):
        ours, theirs = post(port, path, body)[1], post(lport, path, body)[1]
        a = ours["results"] if isinstance(ours, dict) else ours
        b = theirs["results"] if isinstance(theirs, dict) else theirs
        key = "score" if isinstance(ours, list) else "relevance_score"
        worst = max_diff([r[key] for r in a], [r[key] for r in b])
        strip = [{k: v for k, v in r.items() if k != key} for r in a]
        check(f"{path}: the scores and order equal llama-server's (max |diff| {worst:.2e})", worst <= TOL and
              strip == [{k: v for k, v in r.items() if k != key} for r in b] and
              (isinstance(ours, list) or ours["usage"] == theirs["usage"]), (ours, theirs))
        print(f"     {path}: max |specd - llama-server| = {worst:.3e}")


def compare_with_llama_server(specd, models, llama_server):
    embed = os.path.join(models, "embed.gguf")
    for pooling in ("mean", "cls", "last", "none"):
        both(specd, llama_server, ["-m", embed, "--embedding", "--pooling", pooling], compare_embeddings(pooling))
    both(specd, llama_server, ["-m", embed, "--embeddings"], compare_base64)
    for model in ("rerank.gguf", "rerank-template.gguf"):
        both(specd, llama_server, ["-m", os.path.join(models, model), "--rerank"], compare_rerank)


def main(specd, models, llama_server=None):
    embed = os.path.join(models, "embed.gguf")
    args = ["-m", embed, "-md", os.path.join(models, "draft.gguf"), "--embedding", "-np", "2", "-c", "512",
            "-b", "64", "-ub", "64", "--draft-max", "4"]
    with served(specd, args, "embeddings") as (_, port):
        if port:
            for fn in (check_shapes, check_base64, check_normalize, check_inputs, check_json_rpc):
                fn(port)
            check_errors(port, 64)
            check_generation_unchanged(port)
    with served(specd, ["-m", os.path.join(models, "rerank.gguf"), "--rerank"], "rerank") as (_, port):
        if port:
            check_rerank(port)
    check_no_embedding(specd, models)
    check_flags(specd, models)
    if llama_server and os.access(llama_server, os.X_OK):
        compare_with_llama_server(specd, models, llama_server)
    else:
        print(f"SKIP the comparison with llama-server: {llama_server or '(none given)'} is not there "
              "(scripts/deps.sh builds it into deps/llama/build-tools/bin)")
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
