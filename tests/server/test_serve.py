#!/usr/bin/env python3
"""`specd serve` on 127.0.0.1 only: health, keys (API and admin), admin methods and the models
directory, JSON-RPC over HTTP (batch, notification -> 204), /completion blocking and as Server-Sent
Events, body limits (413 from the header, NUL bytes), bad routes, slow calls off the HTTP threads,
the per-IP limit, 1,500 slow connections (serve_slow.py), SIGTERM during a stream, IPv6.

    test_serve.py SPECD MODELS_DIR
Each server listens on a free port (--port 0, read from its first line) and is stopped at the end.
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import serve_slow

failures = []
KEY = "test-key"
ADMIN = "admin-key"


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def summary():
    """The run's last line (how many checks failed) and its exit status: 1 where any did."""
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


def curl(port, path, body=None, key=KEY, extra=()):
    """Returns (HTTP status, body text)."""
    args = ["curl", "-s", "-m", "60", "-o", "-", "-w", "\n%{http_code}", f"http://127.0.0.1:{port}{path}"]
    if key:
        args += ["-H", f"Authorization: Bearer {key}"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary",
                 body if isinstance(body, str) else json.dumps(body)]
    args += list(extra)
    out = subprocess.run(args, capture_output=True, text=True, timeout=90).stdout
    text, _, code = out.rpartition("\n")
    return int(code or 0), text


def curl_json(port, path, body=None, key=KEY):
    """As curl, the answer parsed: (HTTP status, the JSON, or the text where it is not JSON)."""
    code, text = curl(port, path, body, key=key)
    try:
        return code, json.loads(text)
    except ValueError:
        return code, text


def rpc(port, method, params=None, key=KEY):
    """One JSON-RPC call over /rpc: (HTTP status, parsed response or the text)."""
    request = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        request["params"] = params
    return curl_json(port, "/rpc", request, key=key)


def raw_http(port, data, wait=5.0):
    """Sends raw bytes on a fresh connection; returns what the server answers before it closes or
    `wait` seconds pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        try:
            s.sendall(data)
        except OSError:  # refused (closed at once)
            return ""
        got = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got and b"Content-Length" in got:
                head, _, body = got.partition(b"\r\n\r\n")
                length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0]
                             .split(b":")[1])
                if len(body) >= length:
                    break
        return got.decode("utf-8", "replace")


def sse_events(text):
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def start_server(specd, args):
    """Starts `specd serve --port 0 ARGS`; returns (process, port) or (process, None)."""
    server = subprocess.Popen([specd, "serve", "--port", "0"] + args, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    server.first_line = line
    port = int(line.rsplit(":", 1)[1]) if line.startswith("specd: listening on http://") else None
    if port is None:
        print(f"server did not start: {line!r}")
    return server, port


def stop_server(server, timeout=30):
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return -9


def timed_stop(server, timeout=15):
    """SIGTERM: (exit status, seconds it took); killed (-9) past `timeout`."""
    start = time.monotonic()
    rc = stop_server(server, timeout)
    return rc, time.monotonic() - start


@contextlib.contextmanager
def served(specd, args, what):
    """`specd serve --port 0 ARGS` for `what`: (process, port), port None when it did not start (the
    failure checked); stopped after."""
    server, port = start_server(specd, args)
    try:
        if not port:
            check(f"the server for {what} starts", False)
        yield server, port
    finally:
        stop_server(server)


# ---- the main server: API key, admin key, models directory ---------------------------------------

def run_checks(port, target):
    code, text = curl(port, "/health", key=None)
    check("health without a key: readiness only", code == 200 and json.loads(text) == {"status": "ok"}, (code, text))
    code, text = curl(port, "/health")
    check("health with the key: the full status", code == 200 and json.loads(text)["status"] == "ok"
          and json.loads(text)["model"] == target, (code, text))
    code, text = curl(port, "/", key=None)
    check("GET / without a key: the chat page, with no secret in it", code == 200 and "<title>specd</title>" in text
          and "/v1/chat/completions" in text and KEY not in text and target not in text, (code, text[:200]))
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=None)
    check("401 without the key", code == 401 and "unauthorized" in text, (code, text))
    code, _ = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key="wrong")
    check("401 with a wrong key", code == 401, code)
    code, _ = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=KEY[:-1])
    check("401 with a prefix of the key", code == 401, code)
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=None,
                      extra=["-H", f"X-Api-Key: {KEY}"])
    check("X-Api-Key works too", code == 200 and json.loads(text)["result"]["state"] == "ready", (code, text))
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=None,
                      extra=["-H", f"authorization: bEARER {KEY}"])
    check("the Bearer scheme in any case", code == 200 and json.loads(text)["result"]["state"] == "ready",
          (code, text))

    code, text = curl(port, "/rpc", [{"jsonrpc": "2.0", "id": "a", "method": "tokenize", "params": {"text": "she"}},
                                     {"jsonrpc": "2.0", "method": "status"},
                                     {"jsonrpc": "2.0", "id": 2, "method": "nope"}])
    batch = json.loads(text) if code == 200 else None
    check("batch: answers for requests only, ids echoed", code == 200 and len(batch) == 2
          and batch[0]["id"] == "a" and batch[1]["error"]["code"] == -32601, (code, text))
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "method": "status"})
    check("notification: 204 without a body", code == 204 and text == "", (code, text))
    code, text = curl(port, "/rpc", [{"jsonrpc": "2.0", "method": "completion",
                                      "params": {"prompt": "x", "n_predict": 2}}])
    check("a slow notification (on a worker): 204 too", code == 204 and text == "", (code, text))
    code, text = curl(port, "/rpc", "{not json")
    check("parse error", code == 200 and json.loads(text)["error"]["code"] == -32700, (code, text))

    request = {"prompt": "one day the dog ran", "n_predict": 24, "temperature": 0, "ignore_eos": True}
    code, text = curl(port, "/completion", request)
    blocking = json.loads(text)
    check("completion", code == 200 and blocking["tokens_predicted"] == 24 and blocking["stop"], (code, text))
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 3, "method": "completion", "params": request})
    check("the same through /rpc", code == 200 and json.loads(text)["result"]["content"] == blocking["content"], text)
    code, text = curl(port, "/completion", dict(request, stream=True), extra=["-N"])
    events = sse_events(text)
    check("SSE stream: chunks then a final event, same text",
          code == 200 and len(events) > 1 and events[-1]["stop"] and not any(e["stop"] for e in events[:-1])
          and "".join(e["content"] for e in events) == blocking["content"], (code, text[:500]))
    code, text = curl(port, "/completion", dict(request, stream=True, n_probs=2), extra=["-N"])
    events = sse_events(text)
    entries = [p for e in events for p in e.get("completion_probabilities", [])]
    check("SSE with n_probs: each event carries its tokens' probabilities, one entry per token",
          code == 200 and all("completion_probabilities" in e for e in events) and len(entries) == 24
          and all(len(p["top_logprobs"]) == 2 for p in entries), (code, text[:500]))  # llama-server's shape
    check_origins(port, request)
    code, text = curl(port, "/completion", {"prompt": "x", "temperature": "hot"})
    check("bad field: 400 naming it", code == 400 and json.loads(text)["error"]["data"]["field"] == "temperature",
          (code, text))
    code, text = curl(port, "/completion", {"prompt": "x" * 5000})
    check("body over --max-body: 413", code == 413 and "larger than 4096" in text, (code, text))
    code, text = curl(port, "/completion", None, extra=["-H", "Transfer-Encoding: chunked", "--data-binary",
                                                         "x" * 5000])
    check("chunked body over --max-body: 413", code == 413 and "larger than 4096" in text, (code, text))
    code, _ = curl(port, "/nowhere", {})
    check("unknown route: 404", code == 404, code)
    code, _ = curl(port, "/rpc")
    check("GET /rpc: 405", code == 405, code)
    check_bodies(port)


def merged(pieces):
    out = []
    for p in pieces:
        if out and out[-1]["draft"] == p["draft"]:
            out[-1] = {"text": out[-1]["text"] + p["text"], "draft": p["draft"]}
        elif p["text"]:
            out.append(dict(p))
    return out


def check_origins(port, request):
    """return_origins: the text in pieces from accepted drafts or the target's own tokens."""
    # Fixed chains of 3: which tokens are drafts does not depend on timings, so runs compare.
    asked = dict(request, return_origins=True, speculative={"type": ["draft"], "n_min": 3, "n_max": 3, "tree": "off"})
    code, text = curl(port, "/completion", asked)
    done = json.loads(text)
    pieces = done.get("origins", [])
    drafted = sum(1 for p in pieces if p["draft"])
    check("origins: the pieces concatenate to the content",
          code == 200 and "".join(p["text"] for p in pieces) == done["content"], (code, text[:500]))
    check("origins: draft pieces exactly when drafts were accepted",
          (drafted > 0) == (done["speculative"]["accepted"] > 0), (pieces, done["speculative"]))
    code, text = curl(port, "/completion", dict(asked, speculative={"type": ["none"]}))
    none = json.loads(text)
    check("origins without speculation: all the target's own",
          code == 200 and none["origins"] and not any(p["draft"] for p in none["origins"]), text[:300])
    code, text = curl(port, "/completion", dict(asked, stream=True), extra=["-N"])
    streamed = [p for e in sse_events(text) for p in e.get("origins", [])]
    check("origins streamed: the same pieces as the blocking answer", merged(streamed) == merged(pieces),
          (streamed, pieces))


def check_bodies(port):
    """NUL bytes and a Content-Length over the limit."""
    body = b'{"jsonrpc":"2.0","id":1,"method":"status"}\x00garbage'
    answer = raw_http(port, b"POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    check("/rpc: a NUL byte is refused with 400 naming its offset",
          answer.startswith("HTTP/1.1 400") and f"NUL byte at offset {body.index(0)}" in answer, answer[:400])
    body = b'{"prompt": "a\x00b", "n_predict": 1}'
    answer = raw_http(port, b"POST /completion HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + KEY.encode() +
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    check("/completion: a NUL byte is refused with 400 naming its offset",
          answer.startswith("HTTP/1.1 400") and f"NUL byte at offset {body.index(0)}" in answer, answer[:400])
    start = time.monotonic()
    answer = raw_http(port, b"POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() +
                      b"\r\nContent-Length: 100000000\r\n\r\n", wait=5)
    check("Content-Length over --max-body: 413 from the header alone, before the body",
          answer.startswith("HTTP/1.1 413") and "larger than 4096" in answer and time.monotonic() - start < 4,
          answer[:400])
    answer = raw_http(port, b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", wait=5)
    check("without the key: 401 from the header alone", answer.startswith("HTTP/1.1 401"), answer[:200])
    check_query_args(port)


def check_query_args(port):
    """Hundreds of query arguments overflowed libmicrohttpd's per-connection pool, after which it
    waited for the request timeout (10 s) without answering: now 414 at once, on every route and
    before the key is looked at; 64 arguments still pass."""
    query = "&".join(["a=b"] * 500)
    for method, path, v1 in (("GET", "/health", False), ("POST", "/completion", False), ("GET", "/slots", False),
                             ("POST", "/v1/chat/completions", True)):
        start = time.monotonic()
        answer = raw_http(port, f"{method} {path}?{query} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}"
                          .encode(), wait=8)
        took = time.monotonic() - start
        body = answer.partition("\r\n\r\n")[2]
        message = json.loads(body)["error"]["message"] if body.startswith("{") else ""
        check(f"{method} {path} with 500 query arguments: 414 at once ({took:.2f} s), naming the limit"
              + (" (OpenAI's error shape)" if v1 else ""),
              answer.startswith("HTTP/1.1 414") and took < 2 and "more than 64 query arguments" in message
              and ('"type":"invalid_request_error"' in body) == v1, answer[:300])
    code, text = curl(port, "/health?" + "&".join(["a=b"] * 64), key=None)
    check("64 query arguments pass", code == 200 and json.loads(text) == {"status": "ok"}, (code, text))
    start = time.monotonic()
    answer = raw_http(port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: b\r\n" % i for i in range(2000))
                      + b"\r\n", wait=8)
    check(f"2000 headers: 431 at once ({time.monotonic() - start:.2f} s; libmicrohttpd's own answer)",
          answer.startswith("HTTP/1.1 431") and time.monotonic() - start < 2, answer[:200])


def check_admin(port, models, confined_dir):
    """init and shutdown need the admin key; with --models-dir, init's paths must lie under it."""
    code, r = rpc(port, "init", {"cmd": "-m target.gguf"})
    check("init with the API key: forbidden (-32005)", code == 200 and r["error"]["code"] == -32005
          and "admin" in r["error"]["message"], (code, r))
    code, r = rpc(port, "shutdown")
    check("shutdown with the API key: forbidden", code == 200 and r["error"]["code"] == -32005, (code, r))
    code, r = rpc(port, "status")
    check("... and the model is still loaded", r["result"]["state"] == "ready", r)
    code, r = rpc(port, "init", {"cmd": "-m target.gguf"}, key=None)
    check("init without any key: 401", code == 401, (code, r))

    def refused(params):
        code, r = rpc(port, "init", params, key=ADMIN)
        return r.get("error", {}) if isinstance(r, dict) else {"message": r}

    shadow, missing = refused({"model": "/etc/shadow"}), refused({"model": "/nonexistent/x.gguf"})
    check("a path outside --models-dir: refused, same message whether it exists or not",
          shadow.get("code") == -32602 and shadow.get("data", {}).get("field") == "model"
          and "not a file under the models directory" in shadow.get("message", "")
          and shadow["message"].replace("/etc/shadow", "P") == missing.get("message", "").replace("/nonexistent/x.gguf", "P"),
          (shadow, missing))
    outside = os.path.join(models, "target.gguf")
    cases = {
        "an existing model outside (absolute path)": {"model": outside},
        "'..' out of the directory": {"model": os.path.relpath(outside, confined_dir)},
        "a symlink in the directory to a file outside": {"model": "escape.gguf"},
        "the directory itself": {"model": "."},
        "cmd form": {"cmd": f"-m {outside} -c 256"},
        "args form": {"args": ["-m", outside]},
        "a draft outside (args form)": {"args": ["-m", "target.gguf", "-md", "/etc/passwd"]},
    }
    for name, params in cases.items():
        e = refused(params)
        check(f"init refuses {name}", e.get("code") == -32602 and "not a file under the models directory"
              in e.get("message", ""), e)
    e = refused({"args": ["-m", "target.gguf", "--lora", "lora.gguf"]})
    check("init refuses LoRA adapters while --models-dir confines it (their paths are the command line's)",
          e.get("code") == -32602 and "can only be given on specd serve's command line" in e.get("message", ""), e)
    code, r = rpc(port, "status")
    check("... and none of them changed the loaded model", r["result"]["state"] == "ready"
          and r["result"]["model"] == outside, r)

    check_calibration_confined(port, confined_dir)

    code, r = rpc(port, "init", {"cmd": "-m target.gguf -md draft.gguf -c 256 -t 1"}, key=ADMIN)
    real = os.path.realpath(os.path.join(confined_dir, "target.gguf"))
    check("init with the admin key and a path under --models-dir (relative, cmd form) loads it",
          code == 200 and r.get("result", {}).get("state") == "ready" and r["result"]["model"] == real, r)
    code, r = rpc(port, "init", {"args": ["-m", os.path.join(confined_dir, "sub", "..", "target.gguf"), "-c", "256",
                                          "-t", "1"]}, key=ADMIN)
    check("init: '..' that stays inside the directory is fine (args form)",
          r.get("result", {}).get("model") == real, r)
    code, text = curl(port, "/completion", {"prompt": "once", "n_predict": 4})
    check("completions work on the model loaded over HTTP", code == 200 and json.loads(text)["tokens_predicted"] == 4,
          (code, text))
    code, r = rpc(port, "shutdown", key=ADMIN)
    check("shutdown with the admin key", r.get("result", {}).get("was_loaded") is True, r)
    code, text = curl(port, "/health", key=None)
    check("health after shutdown: 503 unavailable, nothing more", code == 503 and json.loads(text) == {"status": "unavailable"},
          (code, text))
    code, r = rpc(port, "init", {"model": "target.gguf", "n_ctx": 256, "n_threads": 1}, key=ADMIN)
    check("init again (settings object form)", r.get("result", {}).get("state") == "ready", r)


def check_calibration_confined(port, confined_dir):
    """--models-dir covers the calibration cache init writes (a file, or a folder that gets one file
    per models and settings): every form, the same message whether the path exists or not, and
    nothing is ever written outside; a file or new folder inside works."""
    outside = tempfile.mkdtemp(prefix="specd-outside-")
    os.symlink(outside, os.path.join(confined_dir, "link-out"))
    try:
        def refused(params):
            code, r = rpc(port, "init", dict(params, n_threads=1), key=ADMIN)
            return r.get("error", {}) if isinstance(r, dict) else {"message": r}

        existing, missing = refused({"model": "target.gguf", "calibration_cache": outside}), \
            refused({"model": "target.gguf", "calibration_cache": "/nonexistent/cache"})
        check("a calibration cache outside --models-dir: refused naming calibration_cache, the same message "
              "whether it exists or not", existing.get("code") == -32602
              and existing.get("data", {}).get("field") == "calibration_cache"
              and "not a file or existing folder under the models directory" in existing.get("message", "")
              and existing["message"].replace(outside, "P") == missing.get("message", "").replace("/nonexistent/cache", "P"),
              (existing, missing))
        cases = {
            "a folder outside (args form)": {"args": ["-m", "target.gguf", "--calibration-cache", outside + "/"]},
            "a file outside (cmd form)": {"cmd": f"-m target.gguf --calibration-cache {outside}/c.txt"},
            "'..' out of the directory": {"model": "target.gguf", "calibration_cache": "sub/../../c.txt"},
            "a symlink in the directory to a folder outside": {"model": "target.gguf", "calibration_cache": "link-out/"},
            "a new file below the symlink": {"model": "target.gguf", "calibration_cache": "link-out/c.txt"},
            "a file in a folder that does not exist": {"model": "target.gguf", "calibration_cache": "no/such/c.txt"},
        }
        for name, params in cases.items():
            e = refused(params)
            check(f"init refuses a calibration cache: {name}", e.get("code") == -32602
                  and e.get("data", {}).get("field") == "calibration_cache"
                  and "not a file or existing folder under the models directory" in e.get("message", ""), e)
        inside = os.path.join(confined_dir, "costs")  # absolute: a server that ignored --models-dir would not
        # write into its working directory
        code, r = rpc(port, "init", {"cmd": f"-m target.gguf -md draft.gguf -c 256 -t 1 --calibration-cache {inside}/"},
                      key=ADMIN)
        code, text = curl(port, "/completion", {"prompt": "once upon a time", "n_predict": 16, "temperature": 0})
        written = os.listdir(inside) if os.path.isdir(inside) else []
        check("a new calibration folder inside --models-dir is used (a file written in it)",
              r.get("result", {}).get("state") == "ready" and code == 200 and len(written) == 1
              and written[0].startswith("calibration-"), (r, code, written))
        check("... and nothing was ever written outside", os.listdir(outside) == [], os.listdir(outside))
    finally:
        os.unlink(os.path.join(confined_dir, "link-out"))
        shutil.rmtree(outside, ignore_errors=True)


def check_startup_refusals(specd, target, models):
    def fails(args, words):
        r = subprocess.run([specd, "serve"] + args + ["-m", target], capture_output=True, text=True, timeout=60)
        return r.returncode == 2 and all(w in r.stderr for w in words), r.stderr
    check("--host must be an address", *fails(["--host", "example.com"], ["--host must be an IPv4 or IPv6 address"]))
    check("unknown option is refused", *fails(["--bogus"], ["--bogus"]))
    check("an empty --api-key is refused", *fails(["--api-key", ""], ["--api-key must not be empty"]))
    check("an empty --admin-api-key is refused", *fails(["--admin-api-key", ""], ["--admin-api-key must not be empty"]))
    check("the admin key must differ from the API key", *fails(["--api-key", "k", "--admin-api-key", "k"],
                                                              ["must differ"]))
    check("--models-dir must be a directory", *fails(["--models-dir", target], ["is not a directory"]))
    check("a model that cannot be loaded is an error", *fails(["-md", os.path.join(models, "nope.gguf")],
                                                              ["specd: error: init:"]))


def check_llama_server_switches(specd, target):
    """llama-server's switches for what specd's server always does start it unchanged."""
    args = ["-m", target, "-t", "1", "-cb", "--cont-batching", "--metrics", "--slots", "--threads-http", "2",
            "-to", "30", "-kvu", "--defrag-thold", "0.1", "--no-warmup"]
    with served(specd, args, "llama-server's switches") as (_, port):
        if port:
            metrics = curl(port, "/metrics", key=None)
            slots = curl(port, "/slots", key=None)
            check("llama-server's -cb, --metrics, --slots, --threads-http, -to, -kvu, --defrag-thold, --no-warmup "
                  "are taken, /metrics and /slots served", metrics[0] == 200 and "specd:requests_total" in metrics[1]
                  and slots[0] == 200, f"{metrics[:2]} {slots[:2]}")


def check_sampling_defaults(specd, target):
    """llama-server's --temp, --top-k, ... at start: what a request that sets none samples with."""
    r = subprocess.run([specd, "serve", "-m", target, "--repeat-last-n", "-7"], capture_output=True, text=True,
                       timeout=60)
    check("a sampling default out of range is refused at start, naming it", r.returncode == 2
          and "repeat_last_n" in r.stderr and "-7" in r.stderr, r.stderr)
    with served(specd, ["-m", target, "-t", "1", "--temp", "0", "--top-k", "5", "--repeat-penalty", "1.3"],
                "sampling defaults") as (_, port):
        if not port:
            return
        props = json.loads(curl(port, "/props", key=None)[1] or "{}")
        params = props.get("default_generation_settings", {}).get("params", {})
        check("/props shows the server's sampling defaults", params.get("temperature") == 0
              and params.get("top_k") == 5 and abs(params.get("repeat_penalty", 0) - 1.3) < 1e-6, json.dumps(params))
        body = {"prompt": "Once upon a time", "n_predict": 12}
        plain = json.loads(curl(port, "/completion", body, key=None)[1] or "{}")
        settings = plain.get("generation_settings", {})
        explicit = json.loads(curl(port, "/completion", dict(body, temperature=0, top_k=5, repeat_penalty=1.3),
                                   key=None)[1] or "{}")
        check("a request that sets none samples with them (greedy here), as one that sets them",
              settings.get("temperature") == 0 and settings.get("top_k") == 5
              and plain.get("content") == explicit.get("content") and plain.get("content"), json.dumps(settings))
        hot = json.loads(curl(port, "/completion", dict(body, temperature=1.0, seed=3), key=None)[1] or "{}")
        check("what a request gives is read over them", hot.get("generation_settings", {}).get("temperature") == 1.0
              and hot.get("generation_settings", {}).get("top_k") == 5, json.dumps(hot.get("generation_settings")))
        chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        first = json.loads(curl(port, "/v1/chat/completions", chat, key=None)[1] or "{}")
        again = json.loads(curl(port, "/v1/chat/completions", chat, key=None)[1] or "{}")
        text = [c.get("choices", [{}])[0].get("message", {}).get("content") for c in (first, again)]
        check("OpenAI's route too: no temperature given, the server's 0 (the same text twice)",
              text[0] is not None and text[0] == text[1], json.dumps(text))
    with served(specd, ["-m", target, "-t", "1", "--temp", "1", "-s", "7"], "a default seed") as (_, port):
        if not port:
            return
        body = {"prompt": "Once upon a time", "n_predict": 24}
        runs = [json.loads(curl(port, "/completion", body, key=None)[1] or "{}") for _ in range(2)]
        own = json.loads(curl(port, "/completion", dict(body, seed=-1), key=None)[1] or "{}")
        check("-s / --seed at start: a request without a seed takes it (the same text twice, its reply says "
              "seed 7); one that asks for -1 draws its own", runs[0].get("content")
              and runs[0].get("content") == runs[1].get("content")
              and runs[0].get("generation_settings", {}).get("seed") == 7
              and own.get("generation_settings", {}).get("seed") == -1,
              json.dumps([r.get("generation_settings", {}).get("seed") for r in runs + [own]]))


# ---- slow calls off the HTTP threads, limits, stopping ------------------------------------------

def timed(fn):
    start = time.monotonic()
    result = fn()
    return time.monotonic() - start, result


def check_no_blocking(specd, target, draft):
    """With one HTTP thread: a long blocking completion and an open stream do not hold it."""
    server, port = start_server(specd, ["--http-threads", "1", "-m", target, "-md", draft, "-c", "256", "-t", "1",
                                        "--context-shift"])
    try:
        if not port:
            check("server with one HTTP thread starts", False)
            return
        long_request = {"prompt": "once", "n_predict": 1000000, "ignore_eos": True}
        blocking = threading.Thread(target=lambda: curl(port, "/completion", long_request, key=None))
        blocking.start()
        time.sleep(0.5)
        latency, (code, text) = timed(lambda: curl(port, "/health", key=None))
        check(f"during a blocking completion /health answers ({latency * 1000:.0f} ms)", code == 200 and latency < 1.0,
              (code, text, latency))
        latency, (code, r) = timed(lambda: rpc(port, "status", key=None))
        check(f"... and a status call ({latency * 1000:.0f} ms, busy)", r["result"]["busy"] is True and latency < 1.0,
              (r, latency))
        code, r = rpc(port, "init", {"cmd": "-m x"}, key=None)
        check("no --admin-api-key: init is forbidden to everyone", r["error"]["code"] == -32005, r)
        code, r = rpc(port, "completion.cancel", key=None)
        blocking.join(timeout=30)
        check("the blocking completion is cancelled and answers", not blocking.is_alive() and r["result"]["cancelled"],
              r)
    finally:
        stop_server(server)


def check_per_ip_limit(specd, target):
    """--max-conns-per-ip N: the N+1-th connection from one address is refused."""
    server, port = start_server(specd, ["--max-conns-per-ip", "3", "-m", target, "-t", "1"])
    held = []
    try:
        if not port:
            check("server with a per-IP limit starts", False)
            return
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        time.sleep(0.3)
        answer = raw_http(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", wait=3)
        check("the 4th connection from 127.0.0.1 is refused (limit 3)", answer == "", answer[:200])
        for s in held:
            s.close()
        held = []
        time.sleep(0.3)
        answer = raw_http(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", wait=3)
        check("... and served once the others closed", answer.startswith("HTTP/1.1 200"), answer[:200])
    finally:
        for s in held:
            s.close()
        stop_server(server)


def check_sigterm_during_stream(specd, target, draft):
    """SIGTERM during a long streamed completion: the stream ends and the server exits 0 quickly."""
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "256", "-t", "1", "--context-shift"])
    if not port:
        check("server for the SIGTERM test starts", False)
        stop_server(server)
        return
    body = json.dumps({"prompt": "once", "n_predict": 1000000, "ignore_eos": True, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)
        got = b""
        while got.count(b"data: ") < 3:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        rc, took = timed_stop(server)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
    text = got.decode("utf-8", "replace")
    check(f"SIGTERM during a stream: exit status 0 within 5 s ({took:.2f} s)", rc == 0 and took < 5, (rc, took))
    check("... the stream had started and was ended", text.count("data: ") >= 3, text[:300])


def check_calibration_cache(specd, target, draft):
    """A server keeps the pass costs it learns where `specd run` does ($XDG_CACHE_HOME/specd/
    calibration/), and reads them at the next start; --calibration-cache off writes nothing."""
    cache_home = tempfile.mkdtemp(prefix="specd-cache-")
    env = dict(os.environ, XDG_CACHE_HOME=cache_home)
    folder = os.path.join(cache_home, "specd", "calibration")
    body = {"prompt": "the little girl", "n_predict": 24, "temperature": 0, "ignore_eos": True}
    try:
        for extra, wanted in (([], True), (["--calibration-cache", "off"], False)):
            shutil.rmtree(folder, ignore_errors=True)
            server = subprocess.Popen([specd, "serve", "--port", "0", "-m", target, "-md", draft, "-t", "1", "-c", "256"]
                                      + extra, stdout=subprocess.PIPE, text=True, env=env)
            line = server.stdout.readline()
            port = int(line.rsplit(":", 1)[1]) if line.startswith("specd: listening on http://") else None
            try:
                code, _ = curl(port, "/completion", body, key=None) if port else (0, "")
            finally:
                stop_server(server)
            files = os.listdir(folder) if os.path.isdir(folder) else []
            check(f"serve {' '.join(extra) or '(default)'}: calibration file {'written' if wanted else 'not written'}",
                  code == 200 and (len(files) == 1 and files[0].startswith("calibration-")) == wanted
                  and (wanted or not files), (code, files))
    finally:
        shutil.rmtree(cache_home, ignore_errors=True)


def check_no_webui(specd, target):
    """--no-webui: GET / answers readiness as /health does."""
    server, port = start_server(specd, ["--no-webui", "-m", target, "-t", "1"])
    try:
        code, text = curl(port, "/", key=None) if port else (0, "")
        check("--no-webui: GET / answers readiness only", code == 200 and json.loads(text) == {"status": "ok"},
              (code, text[:200]))
    finally:
        stop_server(server)


def check_ipv6(specd, target):
    """--host ::1 listens on IPv6 loopback (skipped where the machine has no IPv6)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        print("skip IPv6: this machine cannot bind ::1")
        return
    server = subprocess.Popen([specd, "serve", "--host", "::1", "--port", "0", "-m", target, "-t", "1"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        check("listens on [::1]", line.startswith("specd: listening on http://[::1]:"), line)
        port = line.rsplit(":", 1)[1].strip() if line.startswith("specd: listening on") else "0"
        out = subprocess.run(["curl", "-s", "-m", "30", "-o", "-", "-w", "\n%{http_code}", f"http://[::1]:{port}/health"],
                             capture_output=True, text=True, timeout=60).stdout
        check("health over IPv6", out.endswith("\n200"), out)
    finally:
        stop_server(server)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    check_startup_refusals(specd, target, models)
    check_llama_server_switches(specd, target)
    check_sampling_defaults(specd, target)
    confined = tempfile.mkdtemp(prefix="specd-models-")
    try:
        for name in ("target.gguf", "draft.gguf"):
            shutil.copy(os.path.join(models, name), confined)
        os.mkdir(os.path.join(confined, "sub"))
        os.symlink(target, os.path.join(confined, "escape.gguf"))
        server, port = start_server(specd, ["--api-key", KEY, "--admin-api-key", ADMIN, "--models-dir", confined,
                                            "--max-body", "4096", "-m", target, "-md", draft, "-c", "256", "-t", "1"])
        try:
            check("listens on 127.0.0.1 by default", server.first_line.startswith("specd: listening on http://127.0.0.1:"),
                  server.first_line)
            if port:
                run_checks(port, target)
                check_admin(port, models, confined)
        finally:
            rc = stop_server(server)
        check("stops cleanly on SIGTERM", rc == 0, rc)
    finally:
        shutil.rmtree(confined, ignore_errors=True)
    check_no_blocking(specd, target, draft)
    check_per_ip_limit(specd, target)
    serve_slow.run(specd, target, draft, check, start_server, stop_server)
    check_sigterm_during_stream(specd, target, draft)
    check_ipv6(specd, target)
    check_no_webui(specd, target)
    check_calibration_cache(specd, target, draft)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
