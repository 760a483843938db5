"""The built book, opened in headless Chromium as a reader would.

Every page of `_build/html` is served on 127.0.0.1 and loaded in Debian's chromium,
driven over the DevTools protocol (websocket-client, pinned). For each page: every
<img> has a non-zero natural size, the console shows no error, no exception is thrown,
no request leaves 127.0.0.1 (the book reads offline: MathJax, fonts and scripts are all
local), and a full-page screenshot goes to _build/screenshots/ (build output). On chapter
pages, no plumbing is on show: no visible code cell holds a glue call, the parameters or
their check.

Without a build the tests skip, unless LLAMANAT_REQUIRE_BOOK=1 (set by `make test`,
which builds the book first), where a missing build or browser is a failure.
"""
from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from llamanat_core.paths import ROOT

BUILD = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"  # beside the built book, never in the sources
REQUIRE = os.environ.get("LLAMANAT_REQUIRE_BOOK") == "1"
VIEWPORT = (1280, 900)
MAX_SHOT_HEIGHT = 16_000  # CSS pixels; longer pages are cut (the checks still cover all of it)
PAGE_TIMEOUT = float(os.environ.get("LLAMANAT_PAGE_TIMEOUT", "60"))  # seconds; raise on a loaded machine

pytestmark = pytest.mark.browser


REFRESH = re.compile(r'<meta http-equiv="Refresh" content="0; url=([^"]+)"', re.I)


def _pages() -> tuple[list[str], dict[str, str]]:
    """The built pages, and the redirect pages (Sphinx's index.html) with their targets:
    a redirect navigates away while it is inspected, so it is checked by its target."""
    if not BUILD.is_dir():
        return [], {}
    skip = {"_static", "_sources", "_images"}
    pages, redirects = [], {}
    for p in sorted(BUILD.rglob("*.html")):
        rel = p.relative_to(BUILD)
        if skip & set(rel.parts):
            continue
        m = REFRESH.search(p.read_text(encoding="utf-8", errors="replace"))
        if m:
            redirects[rel.as_posix()] = (rel.parent / m.group(1)).as_posix()
        else:
            pages.append(rel.as_posix())
    return pages, redirects


PAGES, REDIRECTS = _pages()


def _missing(reason: str):
    if REQUIRE:
        pytest.fail(reason)
    pytest.skip(reason)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if path := shutil.which(name):
            return path
    return None


# ------------------------------------------------------------------ the static server

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        pass


@pytest.fixture(scope="module")
def server():
    if not PAGES:
        _missing(f"no built book at {BUILD} (run `make book` or `jupyter-book build .`)")
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(BUILD)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


# ------------------------------------------------------------------ a minimal DevTools client

class DevTools:
    """One page target, spoken to over its websocket: commands, and the events between."""

    def __init__(self, ws_url: str):
        import websocket

        self._ws_mod = websocket
        self.ws = websocket.create_connection(ws_url, timeout=PAGE_TIMEOUT, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def _recv(self, deadline: float) -> dict | None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        self.ws.settimeout(remaining)
        try:
            return json.loads(self.ws.recv())
        except self._ws_mod.WebSocketTimeoutException:
            return None

    def send(self, method: str, timeout: float = PAGE_TIMEOUT, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while (msg := self._recv(deadline)) is not None:
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"DevTools command {method} got no answer in {timeout} s")

    def wait_for(self, event: str, timeout: float = PAGE_TIMEOUT) -> dict:
        for msg in self.events:
            if msg["method"] == event:
                return msg
        deadline = time.monotonic() + timeout
        while (msg := self._recv(deadline)) is not None:
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == event:
                    return msg
        raise TimeoutError(f"no {event} within {timeout} s")

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (msg := self._recv(deadline)) is not None:
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        self.ws.close()


@pytest.fixture(scope="module")
def browser():
    if not PAGES:
        _missing(f"no built book at {BUILD}")
    exe = _chromium()
    if exe is None:
        _missing("chromium is not installed (tools/ensure_chromium.sh installs it, as `make test` does)")
    pytest.importorskip("websocket", reason="websocket-client is pinned in requirements.txt")
    profile = Path(tempfile.mkdtemp(prefix="llamanat-chromium-"))
    log = open(profile.parent / f"{profile.name}.log", "wb")
    proc = subprocess.Popen(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--no-default-browser-check",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         f"--user-data-dir={profile}", "--remote-debugging-port=0",
         f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                pytest.fail(f"chromium did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = [t for t in json.load(r) if t.get("type") == "page"]
        tab = DevTools(targets[0]["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            tab.send(f"{domain}.enable")
        tab.send("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0], height=VIEWPORT[1],
                 deviceScaleFactor=1, mobile=False)
        yield tab
        tab.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
        Path(log.name).unlink(missing_ok=True)


# Wait until the page is done: images (lazy ones forced eager), MathJax typesetting, fonts.
SETTLE = """
(async () => {
  const imgs = Array.from(document.images);
  for (const i of imgs) { i.loading = 'eager'; }
  await Promise.all(imgs.map(i => i.complete ? null :
    new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  if (document.fonts) { await document.fonts.ready; }
  return {
    images: imgs.map(i => ({src: i.getAttribute('src'), w: i.naturalWidth, h: i.naturalHeight})),
    title: document.title,
    math: document.querySelectorAll('mjx-container').length,
    mathErrors: document.querySelectorAll('mjx-merror').length,
    height: Math.ceil(document.documentElement.scrollHeight),
  };
})()
"""


def _problems(events: list[dict], origin: str) -> tuple[list[str], list[str]]:
    errors, remote = [], []
    for e in events:
        method, p = e["method"], e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            errors.append(f"console.{p['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not (url.startswith(origin) or url.startswith(("data:", "blob:", "about:"))):
                remote.append(url)
        elif method == "Network.loadingFailed" and not p.get("canceled"):
            errors.append(f"request failed: {p.get('errorText')} ({p.get('type')})")
    return errors, remote


@pytest.mark.parametrize("page", PAGES or ["(no build)"])
def test_page_renders_offline_without_errors(page, server, browser):
    url = f"{server}/{page}"
    browser.events.clear()
    browser.send("Page.navigate", url=url)
    browser.wait_for("Page.loadEventFired")
    state = browser.evaluate(SETTLE)
    browser.drain(0.3)  # late console messages, font and script loads
    errors, remote = _problems(browser.events, server)

    # Full-page screenshot: grow the viewport to the page (captureBeyondViewport smears
    # the theme's sticky sidebars), capture, then restore the reader's viewport.
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = min(max(state["height"], VIEWPORT[1]), MAX_SHOT_HEIGHT)
    browser.send("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0], height=height,
                 deviceScaleFactor=1, mobile=False)
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shot = browser.send("Page.captureScreenshot", format="png")
    browser.send("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0], height=VIEWPORT[1],
                 deviceScaleFactor=1, mobile=False)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "__", page.removesuffix(".html")) + ".png"
    (SHOTS / name).write_bytes(base64.b64decode(shot["data"]))

    assert not remote, f"{page} requested resources off this machine: {remote}"
    assert not errors, f"{page} logged errors: {errors}"
    broken = [i["src"] for i in state["images"] if not (i["w"] > 0 and i["h"] > 0)]
    assert not broken, f"{page}: images that did not load: {broken}"
    assert state["mathErrors"] == 0, f"{page}: {state['mathErrors']} MathJax errors"


def test_redirect_pages_point_at_a_built_page():
    if not PAGES:
        _missing(f"no built book at {BUILD}")
    assert "index.html" in REDIRECTS, "the book's index.html should redirect to its root page"
    for page, target in REDIRECTS.items():
        assert target in PAGES, f"{page} redirects to {target}, which is not a built page"


def test_every_toc_entry_was_built():
    if not PAGES:
        _missing(f"no built book at {BUILD}")
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]
    missing = [f for f in files if not (BUILD / f"{f}.html").exists()]
    assert not missing, f"toc entries without a built page: {missing}"


def test_chapter_pages_have_figures():
    """Each chapter page shows at least one figure (every chapter measures, with plots)."""
    if not PAGES:
        _missing(f"no built book at {BUILD}")
    from llamanat_core.book.execute import CHAPTERS

    for name in CHAPTERS:
        page = BUILD / "artifacts" / f"{name}.html"
        if page.exists():
            assert re.search(r"<img[^>]+src=\"[^\"]*_images/", page.read_text()), f"{name}: no figure"


def test_local_links_resolve():
    """Every relative link of every page points at a file of the build."""
    if not PAGES:
        _missing(f"no built book at {BUILD}")
    broken = []
    for page in PAGES:
        path = BUILD / page
        for href in re.findall(r'(?:href|src)="([^"#?]+)[^"]*"', path.read_text()):
            if urlparse(href).scheme or href.startswith(("//", "mailto:", "javascript:")):
                continue
            if not (path.parent / unquote(href)).resolve().exists():
                broken.append(f"{page} -> {href}")
    assert not broken, f"broken local links: {broken[:20]}"


def test_search_finds_a_chapter(server, browser):
    """The search page works offline: its index loads and a query returns the model chapter."""
    browser.events.clear()
    browser.send("Page.navigate", url=f"{server}/search.html?q=parameters")
    browser.wait_for("Page.loadEventFired")
    hits = browser.evaluate("""
      (async () => {
        // Results are appended one by one; wait for the summary line and a stable list.
        let last = -1, stable = 0;
        for (let i = 0; i < 200 && stable < 5; i++) {
          await new Promise(r => setTimeout(r, 100));
          const n = document.querySelectorAll('#search-results li a').length;
          const done = (document.querySelector('#search-results .search-summary') || {}).textContent;
          stable = (n === last && done) ? stable + 1 : 0;
          last = n;
        }
        return Array.from(document.querySelectorAll('#search-results li a'))
                    .map(a => a.getAttribute('href'));
      })()""")
    errors, remote = _problems(browser.events, server)
    assert not remote and not errors, (remote, errors)
    assert any("artifacts/model" in h for h in hits), f"search for 'parameters' found {hits}"


# Code a reader sees on the page: cell inputs with a layout box (collapsed hide-input cells
# sit in a closed <details> and have none; removed cells are not in the page at all).
VISIBLE_CODE = """
Array.from(document.querySelectorAll('div.cell_input'))
  .filter(e => e.getClientRects().length > 0)
  .map(e => e.innerText)
"""
PLUMBING = re.compile(r"\bglue(_all)?\(|check_chapter_parameters|papermill replaces this cell")


def test_no_plumbing_code_is_visible(server, browser):
    """Glue calls, the parameters cell and its check are removed or collapsed in every
    chapter page; the page still shows code that teaches (at least one visible cell)."""
    from llamanat_core.book.execute import CHAPTERS

    shown = {}
    for name in CHAPTERS:
        browser.events.clear()
        browser.send("Page.navigate", url=f"{server}/artifacts/{name}.html")
        browser.wait_for("Page.loadEventFired")
        cells = browser.evaluate(VISIBLE_CODE)
        shown[name] = len(cells)
        plumbing = [c.strip().splitlines()[0][:80] for c in cells if PLUMBING.search(c)]
        assert not plumbing, f"{name}: visible code cells with plumbing: {plumbing}"
    assert all(n > 0 for n in shown.values()), f"chapters without any visible code: {shown}"
