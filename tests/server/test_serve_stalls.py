#!/usr/bin/env python3
"""One client must not stall the others (127.0.0.1 only): while long blocking completions and long
polls wait, /health, /tokenize and the admin calls still answer at once; a model swap refuses new
completions at once (503, Retry-After) instead of holding them; one connection's completions take
at most its share of the queue, and a batch is bounded (calls, bytes of answer); a grammar too dear
to step beside others is refused when it comes; a large chat template is rendered off the threads
that answer /health.

    test_serve_stalls.py SPECD MODELS_DIR
Waits are bounded; the bounds are generous (seconds), the old behaviour they catch took the whole
--time-limit.
"""
import http.client
import json
import os
import sys
import tempfile
import threading
import time

from test_serve import ADMIN, check, rpc, served, summary
from test_serve_stop import ENDLESS, Request, busy, status, wait_for


def timed(port, method, path, body=None, key=None, timeout=30):
    """(seconds, status, parsed body or text) of one request on a fresh connection; seconds None
    when it did not answer within `timeout`."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    start = time.monotonic()
    try:
        c.request(method, path, body if isinstance(body, (str, bytes)) or body is None else json.dumps(body), headers)
        r = c.getresponse()
        data = r.read()
        took = time.monotonic() - start
        try:
            return took, r.status, json.loads(data)
        except ValueError:
            return took, r.status, data[:300]
    except (OSError, http.client.HTTPException):
        return None, 0, None
    finally:
        c.close()


def check_long_waits(specd, target, draft):
    """8 blocking completions on -np 4 (4 run, 4 wait for a slot) and 10 polls that wait up to 20 s
    held all 8 call workers: /tokenize and the admin shutdown waited for the --time-limit."""
    args = ["-m", target, "-md", draft, "-c", "2048", "-np", "4", "--queue", "16", "-t", "1", "--context-shift", "--time-limit", "20",
            "--admin-api-key", ADMIN]
    with served(specd, args, "long waits") as (_, port):
        if not port:
            return
        blocking = [Request(port, "/completion", ENDLESS) for _ in range(8)]
        for r in blocking:
            r.start()
        check("8 long blocking completions: 4 run, 4 wait for a slot", busy(port, n_running=4, n_queued=4),
              status(port))
        _, started = rpc(port, "completion.start", dict(ENDLESS), key=None)
        job = started.get("result", {}).get("id")
        polls = [threading.Thread(target=rpc, args=(port, "completion.poll", {"id": job, "wait_ms": 20000}),
                                  kwargs={"key": None}, daemon=True) for _ in range(10)]
        for p in polls:
            p.start()
        time.sleep(0.5)  # the polls are in, waiting
        took, code, r = timed(port, "POST", "/tokenize", {"content": "once upon a time"}, timeout=5)
        check(f"/tokenize answers beside them ({took} s, under 2 s)", took is not None and took < 2 and code == 200
              and r.get("tokens"), (took, code, r))
        took, code, r = timed(port, "POST", "/detokenize", {"tokens": [1, 2]}, timeout=5)
        check(f"/detokenize too ({took} s)", took is not None and took < 2 and code == 200, (took, code, r))
        took, code, r = timed(port, "GET", "/health")
        check(f"/health too ({took} s, under 1 s)", took is not None and took < 1 and code == 200, (took, code, r))
        took, code, r = timed(port, "POST", "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "shutdown"}, key=ADMIN)
        check(f"the admin shutdown answers beside them ({took} s, under 2 s)", took is not None and took < 2
              and code == 200 and r.get("result", {}).get("was_loaded") is True, (took, code, r))
        for t in blocking + polls:
            t.join(10)
        check("every blocking completion is answered", all(r.status in (200, 503) for r in blocking),
              [r.status for r in blocking])


def check_swap(specd, target, draft):
    """A model swap (init while a completion runs) held every new request until the running ones
    ended (a 4-token completion waited 13 s behind one long stream); now it is refused at once:
    503 with Retry-After, and the swap goes on once the running one ends."""
    args = ["-m", target, "-md", draft, "-c", "1024", "-np", "2", "-t", "1", "--context-shift", "--admin-api-key", ADMIN]
    with served(specd, args, "the swap") as (_, port):
        if not port:
            return
        _, started = rpc(port, "completion.start", dict(ENDLESS), key=None)
        job = started.get("result", {}).get("id")
        code, r = rpc(port, "init", {"model": target, "model_draft": draft, "async": True}, key=ADMIN)
        check("init (async) while a long completion runs", code == 200 and "result" in r, (code, r))
        seen = None
        end = time.monotonic() + 20
        while time.monotonic() < end:  # while the load runs, completions still go on (200)
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            start = time.monotonic()
            try:
                c.request("POST", "/completion", json.dumps({"prompt": "once", "n_predict": 4}))
                resp = c.getresponse()
                seen = (time.monotonic() - start, resp.status, resp.getheader("Retry-After"), resp.read()[:300])
            except (OSError, http.client.HTTPException) as e:
                seen = (None, 0, None, repr(e))
            finally:
                c.close()
            if seen[1] != 200:
                break
            time.sleep(0.1)
        check("during the swap's wait a new completion gets 503 with Retry-After at once (under 2 s)",
              seen and seen[0] is not None and seen[0] < 2 and seen[1] == 503 and seen[2] and b"swapped" in seen[3],
              seen)
        rpc(port, "completion.cancel", {"id": job}, key=None)
        swapped = wait_for(lambda: status(port).get("loading_model", "") == "" and not status(port).get("busy"), 20)
        took, code, r = timed(port, "POST", "/completion", {"prompt": "once", "n_predict": 4})
        check("after the swap, completions run again", swapped and code == 200, (swapped, code, r))


def batch(port, calls, key=None, timeout=60):
    """One JSON-RPC batch of (method, params) over /rpc: (status, parsed answer or text)."""
    body = [{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)]
    _, code, r = timed(port, "POST", "/rpc", json.dumps(body), key=key, timeout=timeout)
    return code, r


def check_client_share(specd, target, draft):
    """A batch of 100 completion.start took every slot and all 64 queue places: another client then
    got 503 at once. Batches had no bounds either (12000 status calls: a 14 MB answer)."""
    args = ["-m", target, "-md", draft, "-c", "2048", "-np", "4", "-t", "1", "--context-shift", "--time-limit", "30",
            "--max-body", str(16 << 20)]
    with served(specd, args, "a client's share") as (_, port):
        if not port:
            return
        code, r = batch(port, [("completion.start", dict(ENDLESS))] * 100)
        started = [x for x in r if "result" in x] if isinstance(r, list) else []
        refused = [x for x in r if "error" in x] if isinstance(r, list) else []
        check(f"a batch of 100 completion.start: {len(started)} started (4 slots and half of the 64 queue places), "
              "the rest refused as busy, naming the client's share", code == 200 and len(started) == 36
              and len(refused) == 64 and all(x["error"]["code"] == -32001 and "this client" in x["error"]["message"]
                                             for x in refused), (code, str(r)[:400]))
        code, r = rpc(port, "completion.start", {"prompt": "once", "n_predict": 4}, key=None)
        check("another client still gets a queue place", code == 200 and "id" in r.get("result", {}), (code, r))
        code, r = batch(port, [("status", {})] * 257)
        check("a batch of 257 calls is refused whole, naming the bound", code == 200 and isinstance(r, dict)
              and r.get("error", {}).get("code") == -32600 and "at most 256" in r["error"]["message"], (code, str(r)[:300]))
        text = "once upon a time " * 2500  # about 40 KB of text, about as much answer
        code, r = batch(port, [("tokenize", {"text": text})] * 200)
        done = [x for x in r if "result" in x] if isinstance(r, list) else []
        cut = [x for x in r if "error" in x] if isinstance(r, list) else []
        check(f"a batch whose answers pass 4 MiB: {len(done)} run, the {len(cut)} after refused, not run",
              code == 200 and len(done) + len(cut) == 200 and 0 < len(done) < 200 and cut
              and "not run" in cut[0]["error"]["message"] and cut[-1]["id"] == 199, (code, str(r)[:300]))


def check_dear_grammar(specd, target, draft):
    """A grammar of 30000 alternatives (390 KB) cost seconds a step, on the scheduler's thread: a
    small completion in another slot waited for it (60000: 15 s). Now it is priced when it comes
    (its build and one step, on the request's own worker) and refused with a 400 naming the field."""
    args = ["-m", target, "-md", draft, "-c", "2048", "-np", "2", "-t", "1"]
    with served(specd, args, "a dear grammar") as (_, port):
        if not port:
            return
        grammar = "root ::= " + " | ".join(f'"w{i:07d}"' for i in range(30000))
        result = {}

        def dear():
            result["r"] = timed(port, "POST", "/completion", {"prompt": "once", "n_predict": 8, "grammar": grammar},
                                timeout=120)
        sender = threading.Thread(target=dear, daemon=True)
        sender.start()
        small = []
        while sender.is_alive() and len(small) < 200:
            small.append(timed(port, "POST", "/completion", {"prompt": "the little girl", "n_predict": 8},
                               timeout=60)[0])
            time.sleep(0.02)
        sender.join(120)
        took, code, r = result.get("r", (None, 0, None))
        e = r.get("error", {}) if isinstance(r, dict) else {}
        check(f"the grammar of {len(grammar) // 1000} KB is refused ({took} s): 400 naming 'grammar', its cost",
              code == 400 and e.get("data", {}).get("field") == "grammar" and "costs too much" in e.get("message", ""),
              (took, code, r))
        worst = max((x if x is not None else 99 for x in small), default=0)
        check(f"an 8-token completion in the other slot meanwhile: {len(small)} of them, the slowest {worst:.2f} s "
              "(under 2 s)", worst < 2, small)


def check_large_template(specd, target):
    """A 900 KB /apply-template (30000 messages) was rendered on the connection's thread: with
    --http-threads 1, /health waited for it."""
    with tempfile.TemporaryDirectory() as tmp:
        template = os.path.join(tmp, "chat.jinja")
        with open(template, "w") as f:
            f.write("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                    "{% if add_generation_prompt %}<|assistant|>{% endif %}")
        args = ["-m", target, "-c", "512", "-t", "1", "--http-threads", "1", "--chat-template-file", template]
        with served(specd, args, "a large template") as (_, port):
            if not port:
                return
            messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"}
                        for i in range(30000)]
            body = json.dumps({"messages": messages}, separators=(",", ":"))
            result = {}

            def apply():
                result["r"] = timed(port, "POST", "/apply-template", body, timeout=120)
            worker = threading.Thread(target=apply, daemon=True)
            worker.start()
            time.sleep(0.3)  # the body is in, the template renders
            health = []
            while worker.is_alive() and len(health) < 40:
                health.append(timed(port, "GET", "/health", timeout=30)[0])
                time.sleep(0.05)
            worker.join(120)
            took, code, r = result.get("r", (None, 0, None))
            check(f"/apply-template of {len(body) // 1000} KB is answered ({took} s)", code == 200
                  and isinstance(r, dict) and r.get("prompt", "").count("<|user|>") == 15000, (took, code))
            worst = max((h if h is not None else 99 for h in health), default=0)
            check(f"/health while it renders, --http-threads 1: {len(health)} answers, the slowest {worst:.2f} s "
                  "(under 1 s)", worst < 1, health)


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    check_long_waits(specd, target, draft)
    check_swap(specd, target, draft)
    check_client_share(specd, target, draft)
    check_dear_grammar(specd, target, draft)
    check_large_template(specd, target)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
