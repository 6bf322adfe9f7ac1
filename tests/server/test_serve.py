#!/usr/bin/env python3
"""`specd serve` through curl, on 127.0.0.1 only: health, API key, JSON-RPC over HTTP (batch,
notification -> 204), /completion blocking and as Server-Sent Events, body limit, bad routes.

    test_serve.py SPECD MODELS_DIR
The server listens on a free port (--port 0, read from its first line) and is stopped at the end.
"""
import json
import os
import socket
import subprocess
import sys

failures = []
KEY = "test-key"


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


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


def sse_events(text):
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def run_checks(port):
    code, text = curl(port, "/health", key=None)
    check("health without a key", code == 200 and json.loads(text)["status"] == "ok", (code, text))
    code, _ = curl(port, "/", key=None)
    check("GET / answers", code == 200, code)
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=None)
    check("401 without the key", code == 401 and "unauthorized" in text, (code, text))
    code, _ = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key="wrong")
    check("401 with a wrong key", code == 401, code)
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"}, key=None,
                      extra=["-H", f"X-Api-Key: {KEY}"])
    check("X-Api-Key works too", code == 200 and json.loads(text)["result"]["state"] == "ready", (code, text))

    code, text = curl(port, "/rpc", [{"jsonrpc": "2.0", "id": "a", "method": "tokenize", "params": {"text": "she"}},
                                     {"jsonrpc": "2.0", "method": "status"},
                                     {"jsonrpc": "2.0", "id": 2, "method": "nope"}])
    batch = json.loads(text) if code == 200 else None
    check("batch: answers for requests only, ids echoed", code == 200 and len(batch) == 2
          and batch[0]["id"] == "a" and batch[1]["error"]["code"] == -32601, (code, text))
    code, text = curl(port, "/rpc", {"jsonrpc": "2.0", "method": "status"})
    check("notification: 204 without a body", code == 204 and text == "", (code, text))
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
          and all(len(p["probs"]) == 2 for p in entries), (code, text[:500]))
    code, text = curl(port, "/completion", {"prompt": "x", "temperature": "hot"})
    check("bad field: 400 naming it", code == 400 and json.loads(text)["error"]["data"]["field"] == "temperature",
          (code, text))
    code, text = curl(port, "/completion", {"prompt": "x" * 5000})
    check("body over --max-body: 413", code == 413 and "larger than 4096" in text, (code, text))
    code, _ = curl(port, "/nowhere", {})
    check("unknown route: 404", code == 404, code)
    code, _ = curl(port, "/rpc")
    check("GET /rpc: 405", code == 405, code)


def ipv6_available():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def check_ipv6(specd, target):
    """--host ::1 listens on IPv6 loopback (skipped where the machine has no IPv6)."""
    if not ipv6_available():
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
        server.terminate()
        server.wait(timeout=30)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    code = subprocess.run([specd, "serve", "--host", "example.com", "-m", target], capture_output=True, text=True,
                          timeout=60)
    check("--host must be an address", code.returncode == 2 and "--host must be an IPv4 or IPv6 address" in code.stderr,
          code.stderr)
    code = subprocess.run([specd, "serve", "-m", target, "--bogus"], capture_output=True, text=True, timeout=60)
    check("unknown option is refused", code.returncode == 2 and "--bogus" in code.stderr, code.stderr)
    server = subprocess.Popen([specd, "serve", "--port", "0", "--api-key", KEY, "--max-body", "4096", "-m", target,
                               "-md", draft, "-c", "256", "-t", "1"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        check("listens on 127.0.0.1 by default", line.startswith("specd: listening on http://127.0.0.1:"), line)
        if line.startswith("specd: listening on"):
            run_checks(int(line.rsplit(":", 1)[1]))
    finally:
        server.terminate()
        try:
            rc = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            rc = -9
    check("stops cleanly on SIGTERM", rc == 0, rc)
    check_ipv6(specd, target)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
