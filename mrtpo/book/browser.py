"""The rendered book as a reader sees it: every page opened in headless Chromium, screenshotted, and checked.

``python -m mrtpo.book check`` (``make book-check``) opens each HTML page of ``_build/html`` at a desktop window
width, saves a full-page screenshot to ``_build/screenshots/`` and reports, per page, what a reader should not
see: horizontal overflow (content cut at, or pushed past, the text column's edge outside a scroll box), a broken
image, a machine-specific path, a visible error, traceback or warning, and an empty figure (a blank image or a
``<Figure ... with 0 Axes>`` line).

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: NUL-separated JSON on the
child's fds 3 and 4), so nothing beyond the Debian ``chromium`` package is needed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

SKIP = {"genindex.html", "search.html"}  # Sphinx's generated index and search pages: no content of ours

#: In-page check, evaluated after load. Returns ``[{kind, detail}]``. Overflow: an element of the article that
#: reaches past the article column's right edge, or a box whose content is wider than the box (clipped, or
#: scrolling sideways: either way the reader does not see the right of a table or a line without scrolling).
PAGE_SCRIPT = r"""
(() => {
  const problems = [];
  const add = (kind, detail) => problems.push({kind, detail});
  const name = el => {
    const cls = (el.className && typeof el.className === 'string') ? '.' + el.className.trim().split(/\s+/).slice(0, 2).join('.') : '';
    const txt = (el.innerText || el.getAttribute('src') || el.getAttribute('alt') || '').trim().replace(/\s+/g, ' ').slice(0, 60);
    return `<${el.tagName.toLowerCase()}${cls}> "${txt}"`;
  };
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1)
    add('overflow', `the page is ${doc.scrollWidth}px wide in a ${window.innerWidth}px window`);
  const article = document.querySelector('article') || document.querySelector('main') || document.body;
  const edge = article.getBoundingClientRect().right;
  const flagged = [];
  for (const el of article.querySelectorAll('*')) {
    // MathJax's own boxes clip a pixel or two of glyph overhang by design
    if (el.closest('.math, mjx-container') || flagged.some(f => f.contains(el)) || el.getClientRects().length === 0) continue;
    const r = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (r.width > 0 && r.right > edge + 1) {
      add('overflow', `${name(el)} ends at ${Math.round(r.right)}px, past the text column's edge at ${Math.round(edge)}px`);
      flagged.push(el);
    } else if (style.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1) {
      add('overflow', `${name(el)}: content ${el.scrollWidth}px wide in a ${el.clientWidth}px box (${style.overflowX})`);
      flagged.push(el);
    }
  }
  for (const img of document.images) {
    if (!img.complete || img.naturalWidth === 0) add('broken image', img.getAttribute('src') || '(no src)');
  }
  const shown = el => el.offsetParent !== null || getComputedStyle(el).position === 'fixed';
  for (const el of article.querySelectorAll('.output.traceback, .output.error, .output.stderr, .system-message, .problematic')) {
    if (shown(el)) add('error', `${name(el)}`);
  }
  const bad = /Traceback \(most recent call last\)|^\s*\w*(Error|Exception|Warning): |^\s*warnings\.warn\(/m;
  const emptyFigure = /<Figure size [\d.]+x[\d.]+ with 0 Axes>/;
  for (const el of article.querySelectorAll('.cell_output, .output')) {
    const text = el.innerText || '';
    const m = text.match(bad);
    if (m && shown(el)) add('error', `output shows "${text.slice(Math.max(0, m.index - 20), m.index + 100).replace(/\s+/g, ' ').trim()}"`);
    if (emptyFigure.test(text)) add('empty figure', text.match(emptyFigure)[0]);
  }
  return problems;
})()
"""

#: settles the page before it is checked: web fonts, MathJax typesetting, lazy images
SETTLE_SCRIPT = r"""
(async () => {
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  for (const img of document.images) { img.loading = 'eager'; if (!img.complete) await new Promise(r => { img.onload = img.onerror = r; }); }
  await new Promise(r => setTimeout(r, 200));
  return true;
})()
"""


def chromium_binary() -> str:
    """Path of the Chromium executable (``$CHROMIUM`` or the Debian package's), or an error that says how to get it."""
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise RuntimeError("the book check needs Chromium: install the Debian package (`apt-get install -y chromium`; "
                       "`.ci/run` does it when missing) or set $CHROMIUM to a Chromium/Chrome executable")


def machine_paths() -> list[str]:
    """Absolute paths that identify the machine that built the book: repository, home, cache, interpreter, temp."""
    from mrtpo.files.paths import ROOT, cache_root

    found = {str(ROOT), str(Path.home()), str(cache_root()), sys.prefix, tempfile.gettempdir()}
    return sorted((p for p in found if len(p) > 4), key=len, reverse=True)


#: absolute paths of typical machines, wherever the book was built (``/home/x/``, ``/Users/x/``, ``/tmp/``, ...),
#: and Python's repr of an absolute path object
PATH_PATTERN = re.compile(r"PosixPath\(['\"]/|WindowsPath\(|(?<![\w.:/-])(/(home|Users|root|tmp|private|mnt|work|scratch)/"
                          r"[\w.-]+|[A-Z]:\\\\?Users\\)")


def find_machine_paths(text: str) -> list[str]:
    """Machine-specific paths in ``text`` (each with a little context), for HTML pages and committed results."""
    spans = []
    for literal in machine_paths():
        spans += [(m.start(), m.end()) for m in re.finditer(re.escape(literal), text)]
    spans += [(m.start(), m.end()) for m in PATH_PATTERN.finditer(text)]
    hits, end = [], -1
    for start, stop in sorted(spans):
        if start > end + 40:  # one report per place, however many patterns matched it
            hits.append(" ".join(text[max(0, start - 30) : stop + 40].split()))
        end = max(end, stop)
    return list(dict.fromkeys(hits))


def blank_fraction(path: Path) -> float:
    """Share of an image's pixels (downsampled) that differ from its most common colour: ~0 for an empty figure."""
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        im.thumbnail((400, 400))
        colours = im.getcolors(maxcolors=400 * 400)
    background = max(colours)[0]
    return 1.0 - background / sum(n for n, _ in colours)


class DevTools:
    """A headless Chromium and a DevTools-protocol session on its pipe."""

    def __init__(self, width: int = 1280, height: int = 900):
        self.width, self.height = width, height
        self.profile = tempfile.TemporaryDirectory(prefix="book-check-")
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        args = [chromium_binary(), "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--hide-scrollbars", "--no-first-run", "--no-default-browser-check", "--mute-audio",
                "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage",
                f"--user-data-dir={self.profile.name}", "about:blank"]
        # bash maps the pipe ends onto fds 3 (commands in) and 4 (replies out), where Chromium expects them
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{to_child} 4>&{from_child}', *args],
                                     pass_fds=(to_child, from_child), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()}) during the book check")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept in ``events``)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"Chromium: {method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> dict:
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read())

    def evaluate(self, script: str):
        result = self.call("Runtime.evaluate", session=True, expression=script, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"Chromium: page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        self.evaluate(SETTLE_SCRIPT)

    def screenshot(self, path: Path) -> None:
        """Full-page PNG: the window is made as tall as the document for the capture (the layout stays the
        reader's, at the same width), then set back."""
        height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=height,
                  deviceScaleFactor=1, mobile=False)
        shot = self.call("Page.captureScreenshot", session=True, format="png")
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_child)
        os.close(self._from_child)
        self.profile.cleanup()


def pages(html_root: Path) -> list[Path]:
    """Content pages of a built book (Sphinx's index/search pages, redirects and static files left out)."""
    return sorted(p for p in html_root.rglob("*.html")
                  if p.name not in SKIP and not any(part.startswith("_") for part in p.relative_to(html_root).parts)
                  and not re.search(r'<meta http-equiv="refresh"', p.read_text(errors="replace"), re.I))


def local_images(page: Path, html: str) -> list[Path]:
    """Files of the page's ``<img src>`` that lie next to it (data URIs and remote images left out)."""
    out = []
    for src in re.findall(r'<img[^>]*?\ssrc="([^"]+)"', html):
        if src.startswith(("data:", "http:", "https:")):
            continue
        path = (page.parent / unquote(urlparse(src).path)).resolve()
        if path.is_file():
            out.append(path)
    return out


def check_book(html_root: Path, screenshots: Path, width: int = 1280, verbose: bool = True) -> dict[str, list[dict]]:
    """Open every page of ``html_root`` in headless Chromium; return ``{page: [{kind, detail}]}`` (empty: clean).

    Full-page screenshots go to ``screenshots/<page path with / as __>.png``, and the findings to
    ``screenshots/report.json``.
    """
    html_root = Path(html_root)
    if not (html_root / "index.html").exists():
        raise FileNotFoundError(f"no built book at {html_root}: run `make book` (or `python -m mrtpo.book build`) first")
    screenshots = Path(screenshots)
    screenshots.mkdir(parents=True, exist_ok=True)
    findings: dict[str, list[dict]] = {}
    browser = DevTools(width=width)
    try:
        for page in pages(html_root):
            rel = page.relative_to(html_root).as_posix()
            html = page.read_text(errors="replace")
            problems = [{"kind": "machine path", "detail": hit} for hit in find_machine_paths(html)]
            for image in local_images(page, html):
                if blank_fraction(image) < 0.005:
                    problems.append({"kind": "empty figure", "detail": f"{image.name} is blank"})
            browser.open(page.as_uri())
            # a detail cut in the middle of a surrogate pair (JavaScript strings are UTF-16) is printed with a '?'
            problems += [{k: v.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for k, v in p.items()}
                         for p in browser.evaluate(PAGE_SCRIPT)]
            browser.screenshot(screenshots / (rel.removesuffix(".html").replace("/", "__") + ".png"))
            findings[rel] = problems
            if verbose:
                print(f"[check] {'ok  ' if not problems else 'FAIL'} {rel}", flush=True)
                for p in problems:
                    print(f"         {p['kind']}: {p['detail']}", flush=True)
    finally:
        browser.close()
    (screenshots / "report.json").write_text(json.dumps(findings, indent=1))
    return findings
