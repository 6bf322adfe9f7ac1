#!/usr/bin/env python3
"""How `specd serve` stops with every slot busy and requests queued (127.0.0.1 only): SIGTERM, and
the admin `shutdown` method. Every running completion ends at once with its final answer, whose
stop_type is "shutdown" (streams: a final event; blocking: 200 with the text so far); every queued
request is answered (a stream: its final event; a blocking one: 503 with Retry-After); the process
exits 0 well within its 10 s watchdog.

    test_serve_stop.py SPECD MODELS_DIR
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

from test_serve import ADMIN, check, rpc, sse_events, start_server, stop_server, summary, timed_stop

ENDLESS = {"prompt": "once upon a time", "n_predict": 1000000, "ignore_eos": True, "temperature": 1}


class Request(threading.Thread):
    """One request on its own connection, read to the end (the server closes it when it stops)."""

    def __init__(self, port, path, body, key=None):
        super().__init__(daemon=True)
        self.port, self.path, self.body, self.key = port, path, body, key
        self.status, self.headers, self.text = 0, {}, ""

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        try:
            c.request("POST", self.path, json.dumps(self.body), headers)
            r = c.getresponse()
            self.status, self.headers = r.status, dict(r.getheaders())
            chunks = []
            try:
                while True:
                    piece = r.read1(65536) if self.body.get("stream") else r.read()
                    if not piece:
                        break
                    chunks.append(piece)
            except (http.client.IncompleteRead, ConnectionError, socket.timeout):
                pass  # the text so far is what counts
            self.text = b"".join(chunks).decode("utf-8", "replace")
        except (ConnectionError, socket.timeout, http.client.HTTPException) as e:
            self.text = f"no answer: {e!r}"
        finally:
            c.close()

    def final(self):
        """The last event of a stream, or the parsed blocking answer ({} when there is none)."""
        if self.body.get("stream"):
            events = [e for e in sse_events(self.text.replace("data: [DONE]", ""))]
            return events[-1] if events else {}
        try:
            return json.loads(self.text)
        except ValueError:
            return {}


def status(port, key=None):
    return rpc(port, "status", key=key)[1]["result"]


def wait_for(predicate, limit_s=30):
    """Polls until `predicate` holds (bounded); not a timing assertion."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def busy(port, key=None, n_running=2, n_queued=0):
    def ready():
        s = status(port, key)
        return sum(x["state"] == "processing" for x in s["slots"]) == n_running and s["n_queued"] == n_queued
    return wait_for(ready)


def check_stream_ended(name, r):
    last = r.final()
    check(f"{name}: its stream ends with a final event, stop_type \"shutdown\"",
          r.status == 200 and last.get("stop") is True and last.get("stop_type") == "shutdown", (r.status, r.text[-400:]))


def check_refused(name, r):
    message = r.final().get("error", {}).get("message", "")
    check(f"{name}: 503 with Retry-After, saying the server stops", r.status == 503
          and r.headers.get("Retry-After") == "1" and "stopping" in message, (r.status, r.headers, r.text[:300]))


def check_sigterm(specd, target, draft):
    """-np 2: a stream and a blocking request run; a stream, an OpenAI stream and 8 blocking requests
    wait in the queue (the request lane's threads grow with them: once the 8th waited for a worker
    of 8, now every one has its own). Then SIGTERM."""
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "512", "-np", "2", "--queue", "16", "-t", "1",
                                        "--context-shift"])
    if not port:
        check("server for the SIGTERM test starts", False)
        stop_server(server)
        return
    running = [Request(port, "/completion", dict(ENDLESS, stream=True)), Request(port, "/completion", ENDLESS)]
    for r in running:
        r.start()
    ok = busy(port)
    queued_streams = [Request(port, "/completion", dict(ENDLESS, stream=True)),
                      Request(port, "/v1/completions", {"prompt": "once", "max_tokens": 100000, "stream": True})]
    for r in queued_streams:  # first: a stream's start needs a worker for a moment, which the blocking ones hold
        r.start()
    ok = ok and busy(port, n_queued=2)
    queued_blocking = [Request(port, "/completion", ENDLESS) for _ in range(7)]
    for r in queued_blocking:
        r.start()
    ok = ok and busy(port, n_queued=9)
    eighth = Request(port, "/completion", ENDLESS)
    eighth.start()
    ok = ok and busy(port, n_queued=10)
    check("2 running, 10 queued (the 8th blocking one has a worker too)", ok, status(port))
    rc, took = timed_stop(server)
    for r in running + queued_streams + queued_blocking + [eighth]:
        r.join(10)
    check(f"SIGTERM with busy slots and a queue: exit status 0 within 5 s ({took:.2f} s)", rc == 0 and took < 5,
          (rc, took))
    check_stream_ended("the running stream", running[0])
    blocking = running[1].final()
    check("the running blocking request: 200, its text so far, stop_type \"shutdown\"",
          running[1].status == 200 and blocking.get("stop_type") == "shutdown" and blocking.get("tokens_predicted", 0) > 0
          and blocking.get("stopped_limit") is False, (running[1].status, running[1].text[:300]))
    check_stream_ended("the queued stream", queued_streams[0])
    openai = sse_events(queued_streams[1].text.replace("data: [DONE]", ""))
    check("the queued OpenAI stream: a last chunk with a finish_reason and stop_type \"shutdown\", then [DONE]",
          queued_streams[1].status == 200 and openai and openai[-1].get("stop_type") == "shutdown"
          and openai[-1]["choices"][0]["finish_reason"] == "length"
          and queued_streams[1].text.rstrip().endswith("data: [DONE]"), queued_streams[1].text[-400:])
    for i, r in enumerate(queued_blocking):
        check_refused(f"queued blocking request {i + 1}", r)
    check_refused("queued blocking request 8", eighth)


def check_admin_shutdown(specd, target, draft):
    """The admin `shutdown` over HTTP unloads the models: the same final answers, and the server
    stays up (health 503 until the next init)."""
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "512", "-np", "2", "--queue", "4", "-t", "1",
                                        "--context-shift", "--admin-api-key", ADMIN])
    try:
        if not port:
            check("server for the shutdown test starts", False)
            return
        running = [Request(port, "/completion", dict(ENDLESS, stream=True)), Request(port, "/completion", ENDLESS)]
        for r in running:
            r.start()
        ok = busy(port)
        queued = [Request(port, "/completion", dict(ENDLESS, stream=True)), Request(port, "/completion", ENDLESS)]
        for r in queued:
            r.start()
        ok = ok and busy(port, n_queued=2)
        check("2 running, 2 queued", ok, status(port))
        start = time.monotonic()
        code, answer = rpc(port, "shutdown", key=ADMIN)
        for r in running + queued:
            r.join(10)
        took = time.monotonic() - start
        check(f"admin shutdown with busy slots: answered, every request over within 2 s ({took:.2f} s)",
              code == 200 and answer.get("result", {}).get("was_loaded") is True and took < 2
              and not any(r.is_alive() for r in running + queued), (code, answer, took))
        check_stream_ended("shutdown: the running stream", running[0])
        check("shutdown: the running blocking request ends with stop_type \"shutdown\"",
              running[1].status == 200 and running[1].final().get("stop_type") == "shutdown", running[1].text[:300])
        check_stream_ended("shutdown: the queued stream", queued[0])
        check("shutdown: the queued blocking request gets 503 with Retry-After",
              queued[1].status == 503 and queued[1].headers.get("Retry-After") == "1", (queued[1].status, queued[1].text))
        code, health = rpc(port, "status", key=ADMIN)
        check("... and the server goes on, with no model", code == 200 and health["result"]["state"] == "uninitialized",
              health)
    finally:
        rc = stop_server(server)
    check("then SIGTERM: exit status 0", rc == 0, rc)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    check_sigterm(specd, target, draft)
    check_admin_shutdown(specd, target, draft)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
