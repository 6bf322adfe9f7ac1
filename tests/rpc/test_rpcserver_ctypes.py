#!/usr/bin/env python3
"""The drop-in libspecd-rpcserver.so from Python through ctypes, the way an app uses the old ABI.

    test_rpcserver_ctypes.py LIBRARY MODELS_DIR
MODELS_DIR holds the tiny target.gguf and draft.gguf.
"""
import ctypes
import json
import os
import sys
import threading
import time

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def load(path):
    lib = ctypes.CDLL(path)
    # As apps declared them for the old library: strings in, strings out.
    for name in ("poll_system_status", "tokenize", "get_completion", "async_completion_init",
                 "async_completion_poll", "async_completion_cancel"):
        getattr(lib, name).restype = ctypes.c_char_p
    for name in ("tokenize", "get_completion", "async_completion_init", "async_completion_poll",
                 "async_completion_cancel", "init", "init_async"):
        getattr(lib, name).argtypes = [ctypes.c_char_p]
    lib.init.restype = ctypes.c_int
    return lib


def call(fn, request=None):
    if request is None:
        return json.loads(fn())
    text = request if isinstance(request, str) else json.dumps(request)
    return json.loads(fn(text.encode()))


def main(path, models):
    target, draft = os.path.join(models, "target.gguf"), os.path.join(models, "draft.gguf")
    lib = load(path)
    check("only the old names are exported", not hasattr(lib, "specd_tokenize") and not hasattr(lib, "llama_decode")
          and not hasattr(lib, "specd_rpc"))

    status = call(lib.poll_system_status)
    check("status before init", status["init_success"] == 0, status)
    rc = lib.init(b"-m /no/such/model.gguf")
    status = call(lib.poll_system_status)
    check("init with a missing file fails", rc != 0 and status["init_success"] == -1
          and "/no/such/model.gguf" in status.get("error", ""), (rc, status))
    rc = lib.init(b"-m x.gguf --frobnicate 3")
    status = call(lib.poll_system_status)
    check("init names an unknown flag", rc == -32602 and "--frobnicate" in status.get("error", ""), (rc, status))

    settings = {"model": target, "model_draft": draft, "n_ctx": 256, "n_threads": 1, "model_alias": "tiny"}
    lib.init_async(json.dumps(settings).encode())
    for _ in range(1000):
        status = call(lib.poll_system_status)
        if status["init_success"] != 0:
            break
        time.sleep(0.01)
    check("init_async becomes ready", status["init_success"] == 1 and status["model_alias"] == "tiny", status)

    tok = call(lib.tokenize, {"text": "the little girl"})
    check("tokenize returns pieces", tok["success"] and tok["tokens"][1:] == [" the", " little", " girl"]
          and tok["length"] == 4, tok)
    bad = call(lib.tokenize, {"txt": "x"})
    check("tokenize names an unknown field", not bad["success"] and bad["error"]["code"] == -32602
          and bad["error"]["data"]["field"] == "txt", bad)

    request = {"prompt": "one day the dog ran", "n_predict": 32, "temperature": 0, "ignore_eos": True}
    plain = call(lib.get_completion, dict(request, speculative={"type": ["none"]}))
    spec = call(lib.get_completion, dict(request, speculative={"type": ["draft"], "n_max": 4}))
    check("speculation is lossless per request", plain["content"] == spec["content"]
          and spec["speculative"]["type"] == "draft" and plain["speculative"]["type"] == "none", (plain, spec))
    check("old response fields", all(k in spec for k in (
        "content", "stop", "model", "tokens_predicted", "tokens_evaluated", "generation_settings", "prompt",
        "truncated", "stopped_eos", "stopped_word", "stopped_limit", "stopping_word", "tokens_cached", "timings",
        "prompt_stats")), sorted(spec))

    started = call(lib.async_completion_init, request)
    check("async_completion_init answers at once", started["success"] and "prompt_stats" in started, started)
    text, finished = "", False
    while not finished:
        update = call(lib.async_completion_poll, "")
        text += "".join(u["content"] for u in update["completion_updates"])
        finished = update["finished"]
        time.sleep(0.002)
    check("async chunks concatenate to the blocking content", text == plain["content"], (text, plain["content"]))

    # A long completion cancelled from another thread while this one polls.
    started = call(lib.async_completion_init, {"prompt": "she", "n_predict": -1, "ignore_eos": True, "seed": 1})
    threading.Timer(0.02, lambda: call(lib.async_completion_cancel, "{}")).start()
    last, finished = None, False
    while not finished:
        update = call(lib.async_completion_poll, json.dumps({"wait_ms": 100}))
        if update["completion_updates"]:
            last = update["completion_updates"][-1]
        finished = update["finished"]
    check("cancel from another thread stops it", last and last["stop"] and last["stop_type"] in ("cancelled", "context"),
          last)

    # The returned strings come from malloc: an app may free them to stop the old leak.
    libc = ctypes.CDLL(None)
    lib.poll_system_status.restype = ctypes.c_void_p
    p = lib.poll_system_status()
    check("returned strings can be freed", json.loads(ctypes.string_at(p))["init_success"] == 1)
    libc.free(ctypes.c_void_p(p))

    lib.deinit()
    after = call(lib.get_completion, {"prompt": "a"})
    check("after deinit: no model", not after["success"] and after["error"]["code"] == -32000, after)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
