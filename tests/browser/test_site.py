"""The built HTML book as a reader sees it, offline.

Serves ``_build/html`` on 127.0.0.1 and opens every page in headless Chromium (Debian's, driven by
Playwright), asserting for each page:

- math is rendered: every Sphinx math element holds MathJax output (``mjx-container``) and no raw
  TeX delimiters are left in the text;
- every image loaded;
- no console error beyond the allowlist below, and no failed request;
- nothing was fetched from outside the local server (MathJax and fonts are served by the site);
- every internal link resolves to an existing page, and its ``#fragment`` to an element id there.

Run after the build: ``make book && pytest tests/browser`` (``make test`` does both).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
CHROMIUM = os.environ.get("RLNOTES_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

# Console messages that are known, harmless noise of sphinx-book-theme / pydata-sphinx-theme.
CONSOLE_ALLOWLIST = [
    re.compile(r"THEBE_JS_URL'? has already been declared"),  # theme declares it twice
    re.compile(r"invalid theme mode", re.I),                # pydata theme before its mode is stored
    re.compile(r"favicon\.ico"),                            # the book ships no favicon
]
PAGE_TIMEOUT_MS = 30_000


def _pages() -> list[str]:
    if not SITE.is_dir():
        return []
    skip = {"_static", "_sources", "_images", "_downloads", ".doctrees"}
    return sorted(
        p.relative_to(SITE).as_posix()
        for p in SITE.rglob("*.html")
        if not (set(p.relative_to(SITE).parts) & skip)
    )


PAGES = _pages()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output readable
        pass


@pytest.fixture(scope="session")
def server():
    if not SITE.is_dir():
        pytest.fail(f"{SITE} does not exist: build the book first (make book)")
    handler = functools.partial(_Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run tools/ensure_chromium.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()


class _IdsAndLinks(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)


@functools.lru_cache(maxsize=None)
def _ids_of(relpath: str) -> frozenset:
    parser = _IdsAndLinks()
    parser.feed((SITE / relpath).read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def _allowed(text: str) -> bool:
    return any(p.search(text) for p in CONSOLE_ALLOWLIST)


def test_site_has_pages():
    assert "index.html" in PAGES or any(p.endswith("intro.html") for p in PAGES), (
        f"no pages found in {SITE}: build the book first (make book)")


@pytest.mark.parametrize("relpath", PAGES)
def test_page(relpath, server, browser):
    problems: list[str] = []
    outside: list[str] = []
    context = browser.new_context()
    page = context.new_page()

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and not _allowed(m.text)
            and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: not _allowed(str(e)) and problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: not _allowed(r.url) and urlparse(r.url).hostname == "127.0.0.1"
            and problems.append(f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and not _allowed(r.url)
            and problems.append(f"HTTP {r.status}: {r.url}"))

    url = urljoin(server, relpath)
    html = (SITE / relpath).read_text(encoding="utf-8", errors="replace")
    redirect = re.search(r'http-equiv="refresh"[^>]*url=([^"]+)"', html, re.I)
    if redirect:  # Jupyter Book's index.html only redirects to the landing page
        target = (SITE / relpath).parent / redirect.group(1)
        assert target.is_file(), f"{relpath} redirects to missing {redirect.group(1)}"
        context.close()
        return
    page.goto(url, wait_until="load", timeout=PAGE_TIMEOUT_MS)

    # Math: wait for MathJax to finish typesetting, then look for raw TeX.
    n_math = page.locator(".math").count()
    if n_math:
        try:
            page.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=PAGE_TIMEOUT_MS)
            page.evaluate("() => MathJax.startup.promise")
        except Exception as err:  # MathJax never loaded: the unrendered check below reports it
            problems.append(f"MathJax did not start: {str(err).splitlines()[0]}")
        unrendered = page.evaluate(
            """() => Array.from(document.querySelectorAll('.math'))
                   .filter(el => !el.querySelector('mjx-container'))
                   .map(el => el.textContent.slice(0, 80))""")
        if unrendered:
            problems.append(f"{len(unrendered)} of {n_math} math elements not rendered, e.g. {unrendered[:3]}")
    raw_tex = page.evaluate(
        r"""() => {
            const out = [];
            const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            const pat = /\\\(|\\\)|\\\[|\\\]|\$\$|\$\\[a-zA-Z]+|\\begin\{/;
            while (walker.nextNode()) {
                const node = walker.currentNode;
                const el = node.parentElement;
                if (!el || el.closest('pre, code, script, style, mjx-container, .highlight, textarea')) continue;
                if (pat.test(node.textContent)) out.push(node.textContent.trim().slice(0, 80));
            }
            return out;
        }""")
    if raw_tex:
        problems.append(f"raw TeX left on the page: {raw_tex[:3]}")

    # Images: every <img> decoded with a non-zero size.
    broken = page.evaluate(
        """async () => {
            const imgs = Array.from(document.images);
            await Promise.all(imgs.map(img => img.complete ? null :
                new Promise(res => { img.onload = img.onerror = res; })));
            return imgs.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src);
        }""")
    if broken:
        problems.append(f"images that did not load: {broken}")

    # Internal links: target page exists and the fragment names an element there.
    hrefs = page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    for href in sorted(set(hrefs)):
        parsed = urlparse(href)
        if parsed.scheme not in ("http", "https") or parsed.hostname != "127.0.0.1":
            continue
        target, fragment = urldefrag(href)
        target_path = unquote(urlparse(target).path).lstrip("/")
        if target_path == "" or target_path.endswith("/"):
            target_path += "index.html"
        file = SITE / target_path
        if not file.is_file():
            problems.append(f"broken link: {href} (no {target_path})")
            continue
        if fragment and file.suffix == ".html" and unquote(fragment) not in _ids_of(target_path):
            problems.append(f"broken anchor: {href} (no id {fragment!r} in {target_path})")

    context.close()
    if outside:
        problems.append(f"requests outside the local site (the book must work offline): {outside[:5]}")
    assert not problems, f"{relpath}:\n  " + "\n  ".join(problems)
