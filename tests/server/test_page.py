"""The chat page at GET / in a real headless browser (Debian's chromium): load it, send a message,
wait for the streamed answer, check that the text and the speculative statistics appeared and that
accepted-draft text is marked, and save a screenshot under the test's output directory.

usage: test_page.py SPECD MODELS_DIR OUT_DIR   (exit 77: skipped, with the reason)
"""
import html.parser
import os
import shutil
import subprocess
import sys
import urllib.parse

from test_serve import check, failures, start_server, stop_server

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class PageDom(html.parser.HTMLParser):
    """What the test needs from the page's DOM after the answer: the messages and the stats."""

    def __init__(self):
        super().__init__()
        self.stack = []          # (tag, attrs) of open elements
        self.messages = []       # {"role", "text", "done", "draft_text"}
        self.stats = {}          # dd id -> text
        self.model = ""

    def _inside(self, cls=None, id_=None):
        for tag, attrs in reversed(self.stack):
            if cls and cls in (attrs.get("class") or "").split():
                return True
            if id_ and attrs.get("id") == id_:
                return True
        return False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.stack.append((tag, attrs))
        classes = (attrs.get("class") or "").split()
        if tag == "div" and "msg" in classes:
            role = next((c for c in classes if c != "msg"), "")
            self.messages.append({"role": role, "text": "", "done": attrs.get("data-done") == "1", "draft_text": ""})

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if not self.stack:
            return
        tag, attrs = self.stack[-1]
        if self._inside(cls="msg") and self.messages:
            self.messages[-1]["text"] += data
            if "draft" in (attrs.get("class") or "").split():
                self.messages[-1]["draft_text"] += data
        elif tag == "dd" and attrs.get("id"):
            self.stats[attrs["id"]] = data.strip()
        elif attrs.get("id") == "model":
            self.model += data


def run_chromium(chromium, url, extra, timeout=120):
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--window-size=1200,800", "--virtual-time-budget=30000"] + extra + [url]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def main(specd, models, out_dir):
    chromium = find_chromium()
    if not chromium:
        print("skip: no chromium (Debian's chromium package; scripts/deps.sh --test-tools installs it, make test runs that)")
        return SKIP
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(models, "chat-chatml.gguf")
    draft = os.path.join(models, "draft.gguf")
    server, port = start_server(specd, ["-m", target, "-md", draft, "-c", "512", "-t", "1"])
    try:
        if not port:
            check("the server starts", False, server.first_line)
            return 1
        query = urllib.parse.urlencode({"say": "Tell me a story", "temperature": "0", "max_tokens": "40"})
        url = f"http://127.0.0.1:{port}/?{query}"
        dumped = run_chromium(chromium, url, ["--dump-dom"])
        check("chromium ran the page", dumped.returncode == 0 and "<body" in dumped.stdout,
              (dumped.returncode, dumped.stderr[-500:]))
        dom = PageDom()
        dom.feed(dumped.stdout)
        roles = [m["role"] for m in dom.messages]
        answer = next((m for m in dom.messages if m["role"] == "assistant"), None)
        check("the message was sent and answered", roles == ["user", "assistant"], (roles, dom.messages))
        check("the answer streamed in completely", answer is not None and answer["done"] and answer["text"],
              answer)
        check("the model's name is shown", "chat-chatml.gguf" in dom.model, dom.model)
        check("the statistics appeared", dom.stats.get("s-tokens") not in (None, "", "-")
              and dom.stats.get("s-steps") not in (None, "", "-") and dom.stats.get("s-type") not in (None, "", "-"),
              dom.stats)
        accepted = int(dom.stats.get("s-accepted", "0") or 0) if dom.stats.get("s-accepted", "-") != "-" else 0
        check("accepted-draft text is marked exactly when drafts were accepted",
              answer is not None and bool(answer["draft_text"]) == (accepted > 0), (accepted, answer))
        shot = os.path.join(out_dir, "page.png")
        shot_run = run_chromium(chromium, url, [f"--screenshot={shot}"])
        check("a screenshot was saved", shot_run.returncode == 0 and os.path.getsize(shot) > 1000
              if os.path.exists(shot) else False, shot_run.stderr[-500:])
        print(f"screenshot: {shot}")
    finally:
        stop_server(server)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
