"""The chat page at GET / in a real headless browser (Debian's chromium): load it, send a message,
wait for the streamed answer, check that the text and the speculative statistics appeared and that
accepted-draft text is marked, and save a screenshot under the test's output directory. With the
pinned llama.cpp's templates: on a Functionary template (tool calls) the page offers its tools box,
shows the model's call as name(arguments) and sends the result back as a `tool` message for a
second answer; on DeepSeek-R1's (its generation prompt opens <think>) it shows the thinking in its
own block, and offers no tools box.

usage: test_page.py SPECD MODELS_DIR OUT_DIR [TEMPLATES_DIR]   (exit 77: skipped, with the reason)
"""
import base64
import html.parser
import json
import os
import select
import shutil
import subprocess
import sys
import time
import urllib.parse

from test_serve import check, start_server, stop_server, summary

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


class Browser:
    """Headless chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON
    messages ended by NUL on fds 3 and 4), so the test waits for the page's own "answer done" mark
    instead of guessing a time (a fixed virtual-time budget cut slow streams short under load)."""

    def __init__(self, chromium):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():  # the child's fds 3 and 4, whatever numbers the pipes got here
            hi_r, hi_w = os.dup(to_chrome_r), os.dup(from_chrome_w)  # never 4 then 3: dup takes the lowest
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--window-size=1200,800", "--remote-debugging-pipe", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(3, 4, to_chrome_r, from_chrome_w),
            preexec_fn=child_fds)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id, self._buffer = 0, b""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def call(self, method, params=None, session=None, timeout=60):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            ready, _, _ = select.select([self._from_chrome], [], [], 1.0)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buffer += chunk
        raise TimeoutError(method)

    def page(self, method, params=None):
        return self.call(method, params, self.session)

    def evaluate(self, expression):
        return self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


ANSWER_SETTLED = ("(() => { const all = document.querySelectorAll('.msg.assistant, .msg.error');"
                  " const a = all[all.length - 1];"
                  " return !!a && (a.dataset.done === '1' || a.classList.contains('error'))"
                  " && !document.getElementById('send').disabled; })()")
FUNCTIONARY = "meetkai-functionary-medium-v3.2.jinja"  # a tool call may open the answer (test_chat_jinja.py)
DEEPSEEK_R1 = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"


def chat_once(browser, url, shot, timeout=120):
    """Opens the page (which sends ?say=...), waits until the answer is done and the stats are
    shown, saves a screenshot; returns the page's HTML."""
    browser.page("Page.enable")
    browser.page("Page.navigate", {"url": url})
    return settle(browser, shot, timeout)


def settle(browser, shot, timeout=120):
    """Waits until the page's latest answer is done; saves a screenshot; returns the page's HTML."""
    time.sleep(0.3)  # the previous answer's mark stays until the next one's message exists
    deadline = time.time() + timeout
    while time.time() < deadline and not browser.evaluate(ANSWER_SETTLED):
        time.sleep(0.2)
    html = browser.evaluate("document.documentElement.outerHTML") or ""
    png = browser.page("Page.captureScreenshot", {"format": "png"}).get("data", "")
    with open(shot, "wb") as f:
        f.write(base64.b64decode(png))
    return html


def boxes_shown(browser):
    """Whether the tools box is offered, and the thinking switch's CSS display ("none": hidden)."""
    return (browser.evaluate("!document.getElementById('tools-box').hidden"),
            browser.evaluate("getComputedStyle(document.getElementById('thinking-box')).display"))


def page_state(browser):
    """The messages as the page shows them: role, text, thinking, tool calls (name, arguments)."""
    return browser.evaluate("""Array.from(document.querySelectorAll('.msg')).map((m) => ({
        role: m.className.replace('msg', '').trim(), done: m.dataset.done === '1', finish: m.dataset.finish || '',
        thinking: (m.querySelector('.thinking-text') || {}).textContent || '',
        calls: Array.from(m.querySelectorAll('.tool-call')).map((c) => c.dataset.name),
        text: m.textContent}))""") or []


def check_tools(specd, models, templates, chromium, out_dir):
    """A Functionary template: the tools box, a call shown, its result sent back, a second answer."""
    server, port = start_server(specd, ["-m", os.path.join(models, "chat-chatml.gguf"), "-md",
                                        os.path.join(models, "draft.gguf"), "-c", "4096", "-np", "1", "-t", "1",
                                        "--chat-template-file", os.path.join(templates, FUNCTIONARY)])
    try:
        check("the server starts with a tool-calling template", bool(port), server.first_line)
        if not port:
            return
        query = urllib.parse.urlencode({"say": "Weather in Rome?", "temperature": "0", "max_tokens": "60",
                                        "tools": "1", "tool_choice": "required"})
        browser = Browser(chromium)
        try:
            chat_once(browser, f"http://127.0.0.1:{port}/?{query}", os.path.join(out_dir, "page-tools.png"))
            offered, thinking_box = boxes_shown(browser)
            first = page_state(browser)
            call = browser.evaluate("(() => { const c = document.querySelector('.tool-call');"
                                    " return c ? c.textContent : ''; })()") or ""
            # the result, typed into the box under the call and sent
            browser.evaluate("(() => { const f = document.querySelector('.tool-results'); if (!f) return false;"
                             " for (const i of f.querySelectorAll('input')) i.value = 'sunny, 21 C';"
                             " f.requestSubmit(); return true; })()")
            settle(browser, os.path.join(out_dir, "page-tool-result.png"))
            second = page_state(browser)
        finally:
            browser.close()
        check("the tools box is offered for a template with tool calls", offered is True, offered)
        check("no thinking switch for a template without enable_thinking", thinking_box == "none", thinking_box)
        answer = next((m for m in first if m["role"] == "assistant"), {})
        check("the model's tool call is shown as name(arguments), finish_reason tool_calls",
              answer.get("calls") == ["get_weather"] and answer.get("finish") == "tool_calls" and
              ("Rome" in call or "Oslo" in call), (first, call))
        roles = [m["role"] for m in second]
        check("the result went back as a tool message and the model answered again",
              roles == ["user", "assistant", "tool", "assistant"] and second[-1]["done"] and
              second[2]["text"] == "sunny, 21 C", second)
    finally:
        stop_server(server)


def check_thinking(specd, models, templates, chromium, out_dir):
    """DeepSeek-R1's template opens <think> in its generation prompt: the tiny model's whole answer is
    its thinking, shown in the thinking block; no tools box for a template without tools."""
    server, port = start_server(specd, ["-m", os.path.join(models, "chat-chatml.gguf"), "-c", "1024", "-np", "1",
                                        "-t", "1", "--chat-template-file", os.path.join(templates, DEEPSEEK_R1)])
    try:
        check("the server starts with a thinking template", bool(port), server.first_line)
        if not port:
            return
        query = urllib.parse.urlencode({"say": "Hi", "temperature": "0", "max_tokens": "16"})
        browser = Browser(chromium)
        try:
            chat_once(browser, f"http://127.0.0.1:{port}/?{query}", os.path.join(out_dir, "page-thinking.png"))
            offered, switch = boxes_shown(browser)
            state = page_state(browser)
        finally:
            browser.close()
        answer = next((m for m in state if m["role"] == "assistant"), {})
        check("the thinking is shown in its own block", answer.get("done") and answer.get("thinking", "").strip() != "",
              state)
        check("no tools box for a template without tool calls", offered is False, offered)
        check("the thinking switch for a template that reads enable_thinking", switch not in (None, "none"), switch)
    finally:
        stop_server(server)


def main(specd, models, out_dir, templates=None):
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
        shot = os.path.join(out_dir, "page.png")
        browser = Browser(chromium)
        try:
            page = chat_once(browser, url, shot)
        finally:
            browser.close()
        check("chromium ran the page", "<body" in page, page[:300])
        dom = PageDom()
        dom.feed(page)
        roles = [m["role"] for m in dom.messages]
        answer = next((m for m in dom.messages if m["role"] == "assistant"), None)
        check("the message was sent and answered", roles == ["user", "assistant"], (roles, dom.messages))
        check("the answer streamed in completely", answer is not None and answer["done"] and answer["text"],
              answer)
        check("the model's name is shown", "chat-chatml.gguf" in dom.model, dom.model)
        check("the statistics appeared", dom.stats.get("s-tokens") not in (None, "", "-")
              and dom.stats.get("s-steps") not in (None, "", "-") and dom.stats.get("s-type") not in (None, "", "-"),
              dom.stats)
        accepted = int(dom.stats["s-accepted"]) if dom.stats.get("s-accepted", "-").isdigit() else 0
        check("accepted-draft text is marked exactly when drafts were accepted",
              answer is not None and bool(answer["draft_text"]) == (accepted > 0), (accepted, answer))
        check("a screenshot was saved", os.path.exists(shot) and os.path.getsize(shot) > 1000, shot)
        print(f"screenshot: {shot}")
    finally:
        stop_server(server)
    if templates and os.path.exists(os.path.join(templates, FUNCTIONARY)):
        check_tools(specd, models, templates, chromium, out_dir)
        check_thinking(specd, models, templates, chromium, out_dir)
    else:
        print("note: no llama.cpp templates folder given: the tools and thinking checks are skipped")
    return summary()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
