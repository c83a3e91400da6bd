"""The built book, rendered in a real browser: every page, one test each.

For each HTML page under ``_build/html`` (built by ``make test`` before pytest
runs), headless Chromium loads it from a local server on 127.0.0.1 and we
check what a reader would see:

* math is typeset: every ``.math`` element holds an ``mjx-container`` and
  MathJax reported no ``mjx-merror``;
* every ``<img>`` loaded (``naturalWidth > 0``);
* nothing is fetched from outside 127.0.0.1 (external requests are aborted and
  recorded), and no script, stylesheet, preload or image points outside;
* no request failed or answered an HTTP error, no console error, no page error;
* every link inside the book resolves: for each ``<a href>`` that points into
  the build, the target file exists and its ``#fragment``, if any, is the id
  of an element of the target page (external http(s) links and mailto: are
  not followed).

The browser is the system's Chromium (Debian: ``apt-get install chromium``),
driven by Playwright with ``executable_path``; Playwright never downloads one.
Without Chromium the tests are skipped, unless ``ROPELAB_REQUIRE_BROWSER=1``
(set by CI and ``.ci/run``), in which case they fail.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
REQUIRE_BROWSER = os.environ.get("ROPELAB_REQUIRE_BROWSER") == "1"
INSTALL_HINT = "no Chromium found: `apt-get install chromium` (or set ROPELAB_CHROMIUM to a Chromium binary)"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--metrics-recording-only",
]
# Elements that make the browser fetch something, and the attribute naming it.
FETCHING_ELEMENTS = """
[...document.querySelectorAll(
    'script[src], img[src], iframe[src], source[src], video[src], audio[src], embed[src], ' +
    'link[rel~="stylesheet"], link[rel~="preload"], link[rel~="modulepreload"], link[rel~="prefetch"], ' +
    'link[rel~="icon"], link[rel~="manifest"], link[rel~="preconnect"], link[rel~="dns-prefetch"]'
)].map(e => e.src || e.href)
"""
UNTYPESET_MATH = """
[...document.querySelectorAll('.math')]
    .filter(e => !e.querySelector('mjx-container'))
    .map(e => e.textContent.trim().slice(0, 60))
"""
BROKEN_IMAGES = """
async () => {
    const broken = [];
    for (const img of document.images) {
        img.loading = 'eager';
        try { await img.decode(); } catch (e) {}
        if (!(img.complete && img.naturalWidth > 0)) broken.push(img.currentSrc || img.src);
    }
    return broken;
}
"""
LINKS = "[...document.querySelectorAll('a[href]')].map(a => a.href)"
REDIRECT = re.compile(r'<meta\s+http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.IGNORECASE)


def _pages() -> list[str]:
    """Every built HTML page, relative to _build/html (theme fragments under _static excluded)."""
    if not HTML.is_dir():
        return []
    return sorted(
        p.relative_to(HTML).as_posix()
        for p in HTML.rglob("*.html")
        if p.relative_to(HTML).parts[0] not in ("_static", "_sources", "_images")
    )


def _chromium() -> str | None:
    """$ROPELAB_CHROMIUM if set (and nothing else then), else Debian's /usr/bin/chromium or one on PATH."""
    chosen = os.environ.get("ROPELAB_CHROMIUM")
    candidates = [chosen] if chosen else ["/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


PAGES = _pages()


class _IdCollector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


@functools.lru_cache(maxsize=None)
def _ids(path: Path) -> frozenset[str]:
    """The element ids of a built HTML file, as the browser would find them (read once per run)."""
    collector = _IdCollector()
    collector.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(collector.ids)


def _broken_links(hrefs: list[str], server: str, page_path: str, page_ids: set[str]) -> list[str]:
    """The hrefs (already absolute) that point into the build but miss a file or an anchor.

    ``page_ids`` are the ids of the page as loaded, for links to its own anchors.
    External links (another host, mailto:, javascript:, data:) are skipped.
    """
    broken = []
    for href in dict.fromkeys(hrefs):
        if not href.startswith(server + "/"):
            continue  # http(s) elsewhere, mailto:, javascript:, ...
        parts = urlsplit(href)
        rel = unquote(parts.path).lstrip("/")
        target = HTML / rel
        if rel == "" or rel.endswith("/") or target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(f"link to a missing file: {href}")
            continue
        fragment = unquote(parts.fragment)
        if not fragment:
            continue
        same_page = target.resolve() == (HTML / page_path).resolve()
        ids = page_ids if same_page else _ids(target.resolve())
        if target.suffix == ".html" and fragment not in ids:
            broken.append(f"link to a missing anchor #{fragment}: {href}")
    return broken


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def server():
    """Serve _build/html on 127.0.0.1 at a free port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser_context():
    """One headless system Chromium for the module, with a throwaway profile."""
    executable = _chromium()
    if executable is None:
        if REQUIRE_BROWSER:
            pytest.fail(f"ROPELAB_REQUIRE_BROWSER=1 but {INSTALL_HINT}", pytrace=False)
        pytest.skip(INSTALL_HINT)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - playwright is in requirements.txt
        if REQUIRE_BROWSER:
            pytest.fail("ROPELAB_REQUIRE_BROWSER=1 but playwright is not installed (pip install playwright)", pytrace=False)
        pytest.skip("playwright is not installed: pip install playwright")
    with tempfile.TemporaryDirectory(prefix="ropelab-chromium-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
            service_workers="block",
        )
        context.set_default_timeout(20_000)
        try:
            yield context
        finally:
            context.close()


@pytest.mark.parametrize("page_path", PAGES or ["<no build>"])
def test_page_renders(page_path: str, server: str, browser_context) -> None:
    if not PAGES:
        pytest.fail(f"no built book in {HTML}: run `make test` (it builds the book first) or `make book`", pytrace=False)

    problems: list[str] = []
    outside: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith(server + "/") or url.startswith(("data:", "blob:", "about:")):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    page = browser_context.new_page()
    page.route("**/*", route)
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text} ({m.location.get('url', '')})"))
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "requestfailed",
        lambda r: r.url not in outside and problems.append(f"request failed: {r.url} ({r.failure})"),
    )
    page.on("response", lambda r: r.status >= 400 and problems.append(f"HTTP {r.status}: {r.url}"))
    try:
        url = f"{server}/{page_path}"
        redirect = REDIRECT.search((HTML / page_path).read_text(encoding="utf-8", errors="replace")[:2000])
        if redirect:
            # A redirect stub (index.html -> the root page): check it lands, then check the target.
            target = redirect.group(1)
            assert (HTML / Path(page_path).parent / target).is_file(), f"{page_path} redirects to a missing page {target}"
            with page.expect_navigation(url=re.compile(re.escape(target) + "$")):
                page.goto(url, wait_until="commit")
        else:
            page.goto(url, wait_until="load")

        has_math = page.evaluate("document.querySelectorAll('.math').length") > 0
        if has_math:
            # MathJax 3 resolves startup.promise once the first typesetting pass is done.
            assert page.evaluate("typeof window.MathJax === 'object' && !!window.MathJax.startup"), (
                f"{page_path} has math but MathJax did not load (is book/_static/mathjax there? run `make`)"
            )
            page.evaluate("window.MathJax.startup.promise")
        page.wait_for_load_state("networkidle")

        if not redirect:
            page_ids = set(page.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)"))
            problems += _broken_links(page.evaluate(LINKS), server, page_path, page_ids)

        fetching = page.evaluate(FETCHING_ELEMENTS)
        problems += [f"points outside the book: {u}" for u in fetching if not u.startswith((server + "/", "data:", "blob:"))]
        problems += [f"image did not load: {u}" for u in page.evaluate(BROKEN_IMAGES)]
        if has_math:
            assert page.locator("mjx-container").count() > 0
            problems += [f"math not typeset: {t!r}" for t in page.evaluate(UNTYPESET_MATH)]
            problems += [f"MathJax error: {t!r}" for t in page.locator("mjx-merror").all_text_contents()]
    finally:
        page.close()

    problems += [f"request to outside 127.0.0.1 (blocked): {u}" for u in outside]
    assert not problems, f"{page_path}:\n  " + "\n  ".join(dict.fromkeys(problems))


def test_pages_found() -> None:
    """The build holds the root page and at least one chapter (guards against an empty glob)."""
    if not PAGES:
        pytest.fail(f"no built book in {HTML}: run `make test` (it builds the book first) or `make book`", pytrace=False)
    assert "book/intro.html" in PAGES
    assert len([p for p in PAGES if p.startswith("book/")]) >= 2, PAGES


NOTEBOOKS = sorted(p.stem for p in (ROOT / "book").glob("*.ipynb"))


@pytest.mark.parametrize("name", NOTEBOOKS or ["<no notebooks>"])
def test_notebook_page_offers_download_and_launch(name: str) -> None:
    """A chapter page links its own .ipynb (download button) and opens it in Colab and Binder (launch buttons).

    The downloaded file is the notebook itself, stored outputs included; the
    launch links name the notebook's path in the repository of _config.yml.
    """
    page = HTML / "book" / f"{name}.html"
    if not page.is_file():
        pytest.fail(f"no built page for book/{name}.ipynb in {HTML}: build the book first (`make book`)", pytrace=False)
    text = page.read_text(encoding="utf-8")
    hrefs = re.findall(r'href="([^"]+)"', text)
    download = f"../_sources/book/{name}.ipynb"
    assert download in hrefs, f"book/{name}.html has no download link {download}"
    assert (page.parent / download).resolve().read_bytes() == (ROOT / "book" / f"{name}.ipynb").read_bytes()
    colab = [h for h in hrefs if h.startswith("https://colab.research.google.com/github/")]
    binder = [h for h in hrefs if h.startswith("https://mybinder.org/v2/gh/")]
    assert colab and colab[0].endswith(f"/blob/main/book/{name}.ipynb"), colab
    assert binder and binder[0].endswith(f"/main?urlpath=lab/tree/book/{name}.ipynb"), binder
