"""Print the single-page HTML book to one PDF with the system Chromium (`make pdf`).

Jupyter Book's `singlehtml` builder writes the whole book as one page
(_build/single/_build/singlehtml/index.html with `make pdf`). This script serves it on 127.0.0.1, loads it
in headless Chromium (driven by Playwright; nothing is downloaded, nothing
outside the local server is fetched), waits until MathJax has typeset every
equation and every image has loaded, and prints it to PDF with the print
stylesheet (no sidebars or buttons), A4, page numbers in the footer.

    python tools/pdf.py _build/single/_build/singlehtml OUT.pdf
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import sys
import threading
from pathlib import Path

MATHJAX_CONFIG = """window.MathJax = {
  tex: {packages: {'[-]': ['noundefined']}},
  options: {processHtmlClass: 'tex2jax_process|mathjax_process|math|output_area'}
}"""
# The root document (_toc.yml). Its links to _static/ and _images/ are written
# relative to the build's root, so it is printed from a copy at the root.
ROOT_PAGE = "book/intro.html"
PRINTED = "book.html"
PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 20mm 16mm; }
html, body { font-size: 11pt; }
/* chapters start on a new page */
section > h1 { break-before: page; }
.bd-article > section:first-child > h1 { break-before: avoid; }
mjx-container[display="true"] { overflow: visible !important; }
pre { white-space: pre-wrap !important; word-break: break-all; }
img { max-width: 100% !important; break-inside: avoid; }
figure { break-inside: avoid; }
/* collapsed cells and solutions print open */
.toggle-hidden, details > * { display: revert !important; }
.bd-header-article, .prev-next-area, .bd-footer-content, .bd-sidebar-primary,
.bd-sidebar-secondary, .headerlink { display: none !important; }
"""


def chromium() -> str:
    for candidate in (os.environ.get("ROPELAB_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("no Chromium: apt-get install chromium (or set ROPELAB_CHROMIUM)")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(site: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    if not (site / ROOT_PAGE).is_file():
        sys.exit(f"no {site}/{ROOT_PAGE}: build the single-page book first")
    shutil.copy2(site / ROOT_PAGE, site / PRINTED)
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 900, "height": 1200})
            page.route(
                "**/*",
                lambda r: r.continue_() if r.request.url.startswith(base) else r.abort(),
            )
            page.goto(f"{base}/{PRINTED}", wait_until="load", timeout=60_000)
            if not page.evaluate("!!window.MathJax"):
                # Sphinx's singlehtml leaves MathJax out: load the book's copy,
                # configured as Sphinx configures it for the HTML pages.
                page.evaluate(MATHJAX_CONFIG)
                page.add_script_tag(url=f"{base}/_static/mathjax/tex-chtml.js")  # noqa: E501
            page.wait_for_function(
                "!!(window.MathJax && MathJax.startup && MathJax.startup.promise)", timeout=60_000
            )
            page.evaluate("MathJax.startup.promise")
            page.evaluate(
                """async () => { for (const img of document.images) {
                    img.loading = 'eager'; try { await img.decode(); } catch (e) {} } }"""
            )
            page.evaluate("document.fonts.ready")
            page.add_style_tag(content=PRINT_CSS)
            page.emulate_media(media="print")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(
                path=str(out),
                format="A4",
                print_background=True,
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=(
                    '<div style="font-size:8pt;width:100%;text-align:center;color:#666">'
                    'The RoPE Book · <span class="pageNumber"></span>'
                    ' / <span class="totalPages"></span></div>'
                ),
                margin={"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"},
            )
            browser.close()
    finally:
        httpd.shutdown()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
