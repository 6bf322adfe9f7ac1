#!/usr/bin/env python3
"""The work one request may make `specd serve` do (127.0.0.1 only): -n / --n-predict (the default
and the ceiling of n_predict and its aliases), --time-limit (a completion ends after that long in
its slot), llama-server's t_max_predict_ms (it ends at the next newline after that long), each
ending with a stop_type and a stopping_limit that name the limit; a runaway grammar (--step-limit)
that holds up nobody while it runs; and the memory large bodies took goes back to the system.

    test_serve_limits.py SPECD MODELS_DIR
"""
import http.client
import json
import os
import statistics
import sys
import threading
import time

from test_serve import check, curl, curl_json, rpc, served, sse_events, summary

ENDLESS = {"prompt": "once upon a time", "n_predict": 1000000, "ignore_eos": True, "temperature": 1}


def post(port, path, body):
    return curl_json(port, path, body, key=None)


def check_n_predict(specd, target, draft):
    with served(specd, ["-m", target, "-md", draft, "-c", "512", "-t", "1", "-n", "20"], "-n 20") as (_, port):
        if not port:
            return
        for body, limit in (({}, "--n-predict"), ({"n_predict": -1}, "--n-predict"), ({"n_predict": 12}, "n_predict"),
                            ({"max_tokens": 20}, "max_tokens")):
            code, r = post(port, "/completion", dict(body, prompt="once", ignore_eos=True))
            want = body.get("n_predict", body.get("max_tokens", -1))
            want = 20 if want < 0 else want
            check(f"-n 20, {json.dumps(body) or 'no n_predict'}: {want} tokens, stopping_limit {limit}",
                  code == 200 and r["tokens_predicted"] == want and r["stop_type"] == "limit"
                  and r["stopped_limit"] is True and r["stopping_limit"] == limit, (code, r))
        for path, body, field in (("/completion", {"n_predict": 21}, "n_predict"),
                                  ("/completion", {"max_tokens": 1000}, "max_tokens"),
                                  ("/v1/completions", {"max_tokens": 2 ** 31 - 1}, "max_tokens")):
            code, r = post(port, path, dict(body, prompt="once"))
            e = r.get("error", {}) if isinstance(r, dict) else {}
            named = e.get("param") if path.startswith("/v1") else e.get("data", {}).get("field")
            check(f"-n 20: {path} with {json.dumps(body)} is refused with 400 naming {field} and the limit",
                  code == 400 and named == field and "--n-predict 20" in e.get("message", ""), (code, r))
        code, r = rpc(port, "completion", {"prompt": "once", "n_predict": 100}, key=None)
        check("-n 20: JSON-RPC too (-32602 naming n_predict)", r.get("error", {}).get("code") == -32602
              and r["error"]["data"]["field"] == "n_predict", r)


def check_time_limit(specd, target, draft):
    args = ["-m", target, "-md", draft, "-c", "512", "-t", "1", "--time-limit", "1", "--context-shift"]
    with served(specd, args, "--time-limit 1") as (_, port):
        if not port:
            return
        start = time.monotonic()
        code, r = post(port, "/completion", ENDLESS)
        took = time.monotonic() - start
        shown = {k: r.get(k) for k in ("stop_type", "stopping_limit", "tokens_predicted")} if isinstance(r, dict) else r
        check(f"--time-limit 1: an endless completion ends after 1 s ({took:.2f} s) with stop_type time_limit, "
              "stopping_limit --time-limit", code == 200 and r["stop_type"] == "time_limit"
              and r["stopped_limit"] is True and r["stopping_limit"] == "--time-limit" and r["tokens_predicted"] > 0
              and 0.9 < took < 5, (code, shown))
        code, text = curl(port, "/completion", dict(ENDLESS, stream=True), key=None)
        events = sse_events(text)
        check("--time-limit 1: a stream's final event too", code == 200 and events and events[-1]["stop"] is True
              and events[-1]["stop_type"] == "time_limit" and events[-1]["stopping_limit"] == "--time-limit",
              (code, text[-300:]))
        code, r = post(port, "/v1/completions", {"prompt": "once", "max_tokens": 1000000,
                                                 "logit_bias": {"2": -100}})  # no end of text: 2 is the models' EOS
        check("--time-limit 1: OpenAI's finish_reason length, stop_type time_limit", code == 200
              and r["choices"][0]["finish_reason"] == "length" and r["stop_type"] == "time_limit", (code, r))


def check_t_max_predict_ms(specd, target, draft):
    """t_max_predict_ms as llama-server reads it: once that long has passed since the first token,
    generation ends with the next step whose text holds a newline (made frequent with logit_bias)."""
    with served(specd, ["-m", target, "-md", draft, "-c", "512", "-t", "1", "--context-shift"],
                "t_max_predict_ms") as (_, port):
        if not port:
            return
        newline = post(port, "/tokenize", {"content": "\n"})[1]["tokens"][-1]
        body = dict(ENDLESS, t_max_predict_ms=300, logit_bias={str(newline): 2.0})
        start = time.monotonic()
        code, r = post(port, "/completion", body)
        took = time.monotonic() - start
        check(f"t_max_predict_ms 300: ends at a newline after 300 ms ({took:.2f} s), stop_type time_limit, "
              "stopping_limit t_max_predict_ms", code == 200 and r["stop_type"] == "time_limit"
              and r["stopping_limit"] == "t_max_predict_ms" and "\n" in r["content"] and 0.3 < took < 10,
              (code, r if not isinstance(r, dict) else {k: r.get(k) for k in ("stop_type", "stopping_limit", "content")}))
        code, r = post(port, "/completion", {"prompt": "once", "n_predict": 8, "t_max_predict_ms": 0})
        check("t_max_predict_ms 0: no limit (n_predict ends it)", code == 200 and r.get("stopping_limit") == "n_predict",
              (code, r))


AMBIGUOUS = 'root ::= x\nx ::= [a-z] x | [a-z] x x | ""'  # llama.cpp's parse stacks multiply with every letter


def timed_post(port, path, body, timeout=30):
    """(ms, status, parsed body or None) of one POST; None ms when it did not answer in `timeout`."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.monotonic()
    try:
        c.request("POST" if body is not None else "GET", path, json.dumps(body) if body is not None else None)
        r = c.getresponse()
        data = r.read()
        return (time.monotonic() - start) * 1000, r.status, json.loads(data)
    except (OSError, http.client.HTTPException, ValueError):
        return None, 0, None
    finally:
        c.close()


def check_runaway_grammar(specd, target, draft):
    """The ambiguous grammar used to take over 60 s for 128 tokens and hold every other slot's
    steps (an 8-token request: 1.5 s instead of 5 ms). Now its slot steps apart and ends once one
    step's own work passes --step-limit (10 ms by default); an ordinary grammar is not cut."""
    with served(specd, ["-m", target, "-md", draft, "-c", "2048", "-t", "1"], "the runaway grammar") as (_, port):
        if not port:
            return
        worst = {"prompt": "once", "n_predict": 128, "grammar": AMBIGUOUS, "temperature": 1, "seed": 1}
        ms, code, r = timed_post(port, "/completion", worst)
        check(f"the ambiguous grammar ends within 10 s ({(ms or 0) / 1000:.2f} s), stop_type time_limit, "
              "stopping_limit --step-limit", ms is not None and ms < 10000 and code == 200
              and r["stop_type"] == "time_limit" and r["stopping_limit"] == "--step-limit", (ms, code, r and
              {k: r.get(k) for k in ("stop_type", "stopping_limit", "tokens_predicted")}))
        _, code, r = timed_post(port, "/completion", {"prompt": "once", "n_predict": 64, "temperature": 1, "seed": 1,
                                                      "grammar": "root ::= [a-z ]+"})
        check("an ordinary grammar runs to its n_predict", code == 200 and r.get("stopping_limit") == "n_predict"
              and r["tokens_predicted"] == 64, (code, r and {k: r.get(k) for k in ("stop_type", "stopping_limit")}))
        stop = threading.Event()

        def keep_sending_the_worst():
            seed = 0
            while not stop.is_set():
                seed += 1
                timed_post(port, "/completion", dict(worst, seed=seed))
        sender = threading.Thread(target=keep_sending_the_worst)
        sender.start()
        time.sleep(0.3)
        health, short = [], []
        end = time.monotonic() + 3
        while time.monotonic() < end:
            health.append(timed_post(port, "/health", None)[0])
            short.append(timed_post(port, "/completion", {"prompt": "the little girl", "n_predict": 8,
                                                          "temperature": 0, "ignore_eos": True})[0])
            time.sleep(0.05)
        stop.set()
        sender.join(60)
        median = lambda xs: statistics.median(x if x is not None else 1e9 for x in xs)  # noqa: E731
        check(f"while it runs (sent again and again): /health {median(health):.1f} ms and an 8-token completion in "
              f"another slot {median(short):.1f} ms (medians, under 50 ms)", median(health) < 50 and median(short) < 50,
              (sorted(short), sorted(health)))


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS:"))


def check_memory_returned(specd, target, draft):
    """8 concurrent 1 MiB /tokenize bodies, twice: every one answered, and afterwards the server is
    about as large as before (glibc kept 60-150 MB of them for good)."""
    with served(specd, ["-m", target, "-md", draft, "-c", "512", "-t", "1"], "the memory test") as (server, port):
        if not port:
            return
        body = json.dumps({"content": "once upon a time " * 61000})
        before = rss_mb(server.pid)
        codes = []

        def tokenize():  # http.client: a 1 MiB body is too long for curl's command line
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                c.request("POST", "/tokenize", body, {"Content-Type": "application/json"})
                r = c.getresponse()
                codes.append((r.status, len(r.read())))
            except (OSError, http.client.HTTPException) as e:
                codes.append((0, repr(e)))
            finally:
                c.close()
        for _ in range(2):
            threads = [threading.Thread(target=tokenize) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        time.sleep(0.5)
        after = rss_mb(server.pid)
        sanitized = os.environ.get("SPECD_SANITIZED")  # its allocator keeps freed memory on purpose
        check(f"16 x 1 MiB /tokenize: all answered, memory back (RSS {before} MB before, {after} MB after"
              + (f"; not checked under {sanitized})" if sanitized else ")"),
              [c for c, _ in codes] == [200] * 16 and (sanitized or after <= before + 20), (codes, before, after))


def main(specd, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    check_n_predict(specd, target, draft)
    check_time_limit(specd, target, draft)
    check_t_max_predict_ms(specd, target, draft)
    check_memory_returned(specd, target, draft)
    check_runaway_grammar(specd, target, draft)
    return summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
