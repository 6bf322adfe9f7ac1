"""1,500 slow connections against `specd serve` (used by test_serve.py), on 127.0.0.1 only:
a third send nothing, a third trickle a request header that never ends (one byte every 0.25 s), a
third send full POST headers and trickle the body. While they are open, /health and a short
completion must still answer in under a second; the deadline (--request-timeout) must then close
every one of them, although the tricklers never go idle. Bounded: 1,500 sockets, about 15 s."""
import http.client
import json
import resource
import socket
import statistics
import threading
import time

N_SLOW = 1500
TIMEOUT_S = 6      # --request-timeout of the server under test
TICK_S = 0.25      # one byte per trickling connection per tick
HEADER_TRICKLE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
BODY_TRICKLE = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft == resource.RLIM_INFINITY or soft >= need


class Slow:
    """One slow client: what it sends, byte by byte, and when the server closed it."""

    def __init__(self, sock, kind):
        self.sock, self.kind, self.opened, self.closed = sock, kind, time.monotonic(), None
        self.sent = 0

    def next_byte(self):
        if self.kind == 1:
            return HEADER_TRICKLE[self.sent:self.sent + 1] or b"a"
        return b"x"  # kind 2: body bytes; the headers went at once

    def tick(self):
        """Sends one more byte (tricklers) and notes a close by the server."""
        if self.closed is not None:
            return
        try:
            data = self.sock.recv(1)
            if not data:
                self.closed = time.monotonic()
                return
        except BlockingIOError:
            pass
        except OSError:
            self.closed = time.monotonic()
            return
        if self.kind == 0:
            return
        try:
            self.sock.send(self.next_byte())
            self.sent += 1
        except BlockingIOError:
            pass
        except OSError:
            self.closed = time.monotonic()


def open_slow(port, n):
    clients = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        kind = i % 3
        if kind == 2:
            s.sendall(BODY_TRICKLE)
        s.setblocking(False)
        clients.append(Slow(s, kind))
    return clients


def trickle(clients, stop):
    while not stop.is_set():
        for c in clients:
            c.tick()
        stop.wait(TICK_S)


def timed_request(port, method, path, body=None):
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        response = conn.getresponse()
        data = response.read()
        return time.monotonic() - start, response.status, data
    except OSError as e:
        return time.monotonic() - start, 0, str(e).encode()
    finally:
        conn.close()


def run(specd, target, draft, check, start_server, stop_server):
    if not raise_fd_limit(N_SLOW + 256):
        print(f"skip slow connections: cannot raise the open-file limit to {N_SLOW + 256}")
        return
    server, port = start_server(specd, ["--request-timeout", str(TIMEOUT_S), "--max-conns", "4000",
                                        "--max-conns-per-ip", "2000", "-m", target, "-md", draft, "-c", "256",
                                        "-t", "1"])
    clients, stop = [], threading.Event()
    try:
        if not port:
            check("server for the slow connections starts", False)
            return
        start = time.monotonic()
        clients = open_slow(port, N_SLOW)
        opened_in = time.monotonic() - start
        pump = threading.Thread(target=trickle, args=(clients, stop), daemon=True)
        pump.start()
        time.sleep(1.0)
        open_now = sum(c.closed is None for c in clients)
        health, completion = [], []
        for _ in range(5):
            took, status, data = timed_request(port, "GET", "/health")
            health.append(took if status == 200 else 99.0)
        for _ in range(3):
            took, status, data = timed_request(port, "POST", "/completion",
                                               {"prompt": "once", "n_predict": 8, "temperature": 0})
            ok = status == 200 and json.loads(data).get("tokens_predicted") == 8
            completion.append(took if ok else 99.0)
        measured_at = time.monotonic() - start
        still_open = sum(c.closed is None for c in clients)
        print(f"slow connections: {N_SLOW} opened in {opened_in:.2f} s; {still_open} still open after the "
              f"measurements ({measured_at:.2f} s after the first opened)")
        print(f"  /health: median {statistics.median(health) * 1000:.1f} ms, max {max(health) * 1000:.1f} ms; "
              f"completion (8 tokens): median {statistics.median(completion) * 1000:.1f} ms, "
              f"max {max(completion) * 1000:.1f} ms")
        check(f"{N_SLOW} slow connections open at once (per-IP limit above it)", open_now == N_SLOW, open_now)
        check("/health answers in under a second with them open", max(health) < 1.0, health)
        check("a short completion answers in under a second with them open", max(completion) < 1.0, completion)
        check("... measured while they were all still open", still_open == N_SLOW, still_open)
        deadline = start + opened_in + TIMEOUT_S + 3.0
        while time.monotonic() < deadline and any(c.closed is None for c in clients):
            time.sleep(0.25)
        left = [c for c in clients if c.closed is None]
        late = max((c.closed - c.opened for c in clients if c.closed is not None), default=0.0)
        tricklers = [c for c in clients if c.kind != 0]
        check(f"the deadline closed every slow connection, tricklers included (latest after {late:.1f} s, "
              f"--request-timeout {TIMEOUT_S})", not left and all(c.closed is not None for c in tricklers)
              and late < TIMEOUT_S + 2.0, (len(left), late))
        took, status, _ = timed_request(port, "GET", "/health")
        check("the server still answers afterwards", status == 200, status)
    finally:
        stop.set()
        for c in clients:
            c.sock.close()
        if server:
            rc = stop_server(server)
            check("the server under slow connections stops cleanly", rc == 0, rc)
