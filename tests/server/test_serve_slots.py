#!/usr/bin/env python3
"""`specd serve` with several slots (-np) on 127.0.0.1: concurrent greedy completions equal their
sequential results, a full queue is 503 with Retry-After and a clear message, a client that
disconnects frees its slot (its completion is cancelled), a client that stops reading its
stream does not stall the others, and flash attention is auto with several slots.

    test_serve_slots.py SPECD MODELS_DIR
"""
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time

from test_serve import check, start_server, stop_server, summary


def post(port, path, body):
    """(status, headers, parsed body) of one POST."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), json.loads(data)


def get(port, path):
    """(status, body text) of one GET."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def status(port):
    return post(port, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "status"})[2]["result"]


def open_stream(port, body, stream=True):
    """A /completion (streaming by default) whose answer is not read: the raw socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    payload = json.dumps(dict(body, stream=stream)).encode()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    return s


def wait_for(what, predicate, limit=200):
    """Polls `predicate` (0.05 s apart, bounded) until it holds; not a timing assertion."""
    for _ in range(limit):
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def running_tasks(port):
    return [s["id_task"] for s in status(port)["slots"] if s["state"] == "processing"]


PROMPTS = ["the little girl saw a big red ball", "one day the dog ran to the park", "she was happy",
           "he had a cat", "the sun was hot"]
ENDLESS = {"prompt": "once", "n_predict": 1000000, "ignore_eos": True, "temperature": 1}


def check_concurrent_equal_sequential(port):
    requests = [{"prompt": p, "n_predict": 24, "temperature": 0, "ignore_eos": True} for p in PROMPTS]
    alone = [post(port, "/completion", r)[2]["content"] for r in requests]
    together = [None] * len(requests)

    def run(i):
        together[i] = post(port, "/completion", requests[i])[2]["content"]
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check("5 concurrent greedy completions on 2 slots equal their sequential results", together == alone,
          (together, alone))


def check_queue_full_and_disconnect(port):
    a, b = open_stream(port, ENDLESS), open_stream(port, ENDLESS)
    running = wait_for("two streams run", lambda: len(running_tasks(port)) == 2 and running_tasks(port))
    check("two endless streams take both slots", running and len(running) == 2, status(port))
    queued = [open_stream(port, ENDLESS) for _ in range(3)]  # fill the queue of three
    wait_for("three queued", lambda: status(port)["n_queued"] == 3)
    _, slots_text = get(port, "/slots")
    slots = json.loads(slots_text)
    code_busy, _ = get(port, "/slots?fail_on_no_slot=1")
    _, metrics = get(port, "/metrics")
    _, props = get(port, "/props")
    check("llama-server's routes see both slots: /slots processing, fail_on_no_slot 503, /metrics processing 2 and "
          "deferred 3, /props total_slots 2",
          [s["state"] for s in slots] == ["processing", "processing"] and all(s["is_processing"] for s in slots)
          and code_busy == 503 and metric(metrics, "llamacpp:requests_processing") == 2
          and metric(metrics, "llamacpp:requests_deferred") == 3 and json.loads(props)["total_slots"] == 2,
          (slots, code_busy, metrics[-600:]))
    code, headers, body = post(port, "/completion", {"prompt": "x", "n_predict": 4})
    message = body.get("error", {}).get("message", "")
    check("past the queue: 503 with Retry-After and why", code == 503 and headers.get("Retry-After") == "1"
          and "all 2 slots are busy and 3 requests are queued" in message, (code, headers, body))
    a.close()  # the client goes away: its completion is cancelled, the queued one takes the slot
    moved = wait_for("the first queued runs", lambda: status(port)["n_queued"] == 2 and len(running_tasks(port)) == 2)
    check("a client that disconnects frees its slot for the queued request", moved, status(port))
    b.close()
    for q in queued:
        q.close()
    idle = wait_for("all idle", lambda: not running_tasks(port))
    check("when every client has gone, every slot is idle", idle, status(port))


def check_blocking_disconnect(port):
    """A blocking (non-streaming) /completion whose client hangs up is cancelled too."""
    s = open_stream(port, ENDLESS, stream=False)
    running = wait_for("it runs", lambda: len(running_tasks(port)) == 1)
    check("a blocking endless completion runs", running, status(port))
    s.close()
    idle = wait_for("it is cancelled", lambda: not running_tasks(port))
    check("its client hangs up: it is cancelled and the slot is idle", idle, status(port))


def check_slow_reader(port):
    """A stream nobody reads (its socket buffers fill) while another client's requests finish."""
    stalled = open_stream(port, {"prompt": "once", "n_predict": 3000, "ignore_eos": True})
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    done = [post(port, "/completion", {"prompt": p, "n_predict": 16, "temperature": 0})[0] for p in PROMPTS]
    check("a client that stops reading does not stall the others", done == [200] * len(PROMPTS), done)
    stalled.close()


def flash_attention_of(specd, target, draft, args):
    """The flash attention setting a server's engine ran with, as its calibration file keys it."""
    with tempfile.TemporaryDirectory() as cache:
        server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "512", "-t", "1",
                                            "--calibration-cache", cache + "/"] + args)
        try:
            if port:
                post(port, "/completion", {"prompt": "once upon a time", "n_predict": 16, "temperature": 0})
        finally:
            stop_server(server)
        keys = [line for f in os.listdir(cache) for line in open(os.path.join(cache, f)) if line.startswith("key ")]
        settings = dict(kv.split("=", 1) for kv in keys[0].split()[1].split(";")) if keys else {}
        return settings.get("fa")


def check_flash_attention_default(specd, target, draft):
    """Several slots share one cache: flash attention auto (llama-server's default), which skips other
    slots' cells; one slot: off (a verification pass reads the cache once); -fa wins either way."""
    got = [flash_attention_of(specd, target, draft, args) for args in (["-np", "2"], [], ["-np", "1"],
                                                                        ["-np", "2", "-fa", "off"])]
    check("flash attention: auto with 2 or 4 slots, off with 1 or when asked", got == ["auto", "auto", "off", "off"],
          got)


def check_stats_are_each_requests_own(specd, target, draft):
    """Four requests in the same rounds: each one's speculative.draft_ms and verify_ms are its part of
    the shared drafts and passes, so they stay within its own decode time (timings.predicted_ms,
    which they are part of). Every request used to count each shared pass in full: verify_ms was
    larger than its whole decode time."""
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "2048", "-np", "4", "-t", "1"])
    try:
        if not port:
            check("server for the per-request stats starts", False)
            return
        kinds = [{}, {}, {"speculative": {"type": ["none"]}}, {"speculative": {"type": ["ngram-simple", "draft"]}}]
        answers = [None] * len(kinds)

        def run(i):
            answers[i] = post(port, "/completion", dict(kinds[i], prompt="once upon a time", n_predict=48,
                                                        temperature=0, ignore_eos=True))[2]
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(kinds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        figures = [(a["speculative"]["draft_ms"], a["speculative"]["verify_ms"], a["timings"]["predicted_ms"])
                   for a in answers]
        check("4 requests in the same rounds: each one's draft_ms + verify_ms is within its own decode time",
              all(d + v <= p * 1.01 + 0.05 for d, v, p in figures), figures)
    finally:
        stop_server(server)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "512", "-np", "2", "--queue", "3",
                                        "-t", "1", "--context-shift"])
    try:
        if port:
            slots = status(port)["slots"]
            check("-np 2: status shows two idle slots", [s["state"] for s in slots] == ["idle", "idle"], slots)
            check_concurrent_equal_sequential(port)
            check_queue_full_and_disconnect(port)
            check_blocking_disconnect(port)
            check_slow_reader(port)
        else:
            check("server starts", False)
    finally:
        rc = stop_server(server)
    check("stops cleanly", rc == 0, rc)
    check_flash_attention_default(specd, target, draft)
    check_stats_are_each_requests_own(specd, target, draft)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
