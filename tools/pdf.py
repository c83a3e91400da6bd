"""Print the single-page HTML book to one PDF that reads like a book (`make pdf`).

Jupyter Book's `singlehtml` builder writes the whole book as one page
(_build/single/_build/singlehtml with `make pdf`). This script serves it on
127.0.0.1, loads it in headless Chromium (driven by Playwright; nothing is
downloaded, nothing outside the local server is fetched), waits until MathJax
has typeset every equation and every image has loaded, rearranges the page
into a book and prints it, A4, with page numbers in the footer:

* a title page (title and author from _config.yml, the date of the last
  commit, or today's date outside a git checkout);
* a contents list with page numbers: each entry links to its chapter, so
  Chromium writes a named destination for it, which gives its page; the
  numbers are then printed alone (a second, two-page print with everything
  else hidden) and stamped onto the blank places left for them;
* PDF bookmarks, one per entry of the contents, each with its sections
  nested under it (written with pypdf, which also stamps the page numbers
  into the contents);
* each chapter on a new page; a code frame or output kept whole when it fits
  on a page, so no page ends in an empty frame;
* tables and outputs wider than the text column scaled down to fit;
* folded cells printed open, without the "Show code cell source" toggles;
* every exercise's solution moved to an appendix at the end, "Solutions to
  the exercises", grouped by chapter, each linked to its exercise.

Why Chromium rather than Sphinx's LaTeX builder: the equations, the figures,
the CJK terms (the book's own Noto Sans SC subset) and the pages' layout are
those of the web book, typeset by the same MathJax and fonts, with no TeX
installation; tests/book/test_render.py reads the PDF for each point above
(a frame left empty at a page's foot excepted: the PDF's text cannot show one).

    python tools/pdf.py _build/single/_build/singlehtml OUT.pdf
"""

from __future__ import annotations

import datetime
import functools
import html
import http.server
import io
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATHJAX_CONFIG = """window.MathJax = {
  tex: {packages: {'[-]': ['noundefined']}},
  options: {processHtmlClass: 'tex2jax_process|mathjax_process|math|output_area'}
}"""
# The root document (_toc.yml). Its links to _static/ and _images/ are written
# relative to the build's root, so it is printed from a copy at the root.
ROOT_PAGE = "book/intro.html"
PRINTED = "book.html"
SOLUTIONS_TITLE = "Solutions to the exercises"
PAGE_PLACEHOLDER = "000"
PRINT_CSS = """
@page { size: A4; }
html, body { font-size: 10.5pt; }
/* the theme's flex and grid boxes would swallow forced page breaks */
.bd-container, .bd-container__inner, .bd-main, .bd-content, .bd-article-container,
.bd-article, .bd-page-width { display: block !important; max-width: none !important;
  padding: 0 !important; margin: 0 !important; width: auto !important; }
#jb-print-docs-body, .bd-header-article, .prev-next-area, .bd-footer-content,
.bd-footer-article, .bd-sidebar-primary, .bd-sidebar-secondary, .headerlink,
#searchbox, .bd-header, .bd-footer, .skip-link { display: none !important; }
/* the theme's print style hides the first h1 (the page's title), which here
   is the introduction's heading and the title page's */
.bd-main .bd-content .bd-article h1:first-of-type { display: block !important; }
/* the title page and the contents */
.rl-titlepage { height: 240mm; display: flex; flex-direction: column;
  justify-content: center; text-align: center; break-after: page; }
.rl-titlepage h1 { font-size: 34pt; margin: 0 0 8mm; border: none; }
.rl-titlepage .rl-subtitle { font-size: 15pt; margin-bottom: 30mm; }
.rl-titlepage .rl-author { font-size: 14pt; }
.rl-titlepage .rl-date { font-size: 12pt; color: #555; }
.rl-contents { break-after: page; }
.rl-contents h2 { font-size: 20pt; }
.rl-contents .rl-part { font-weight: bold; margin: 4mm 0 1mm; }
.rl-contents ol { list-style: none; padding: 0; margin: 0; }
.rl-contents li { display: flex; align-items: baseline; margin: 1.2mm 0; }
.rl-contents li a { color: inherit; text-decoration: none; }
.rl-contents li .rl-dots { flex: 1; border-bottom: 1px dotted #999; margin: 0 2mm; }
.rl-contents li .rl-page { font-variant-numeric: tabular-nums; visibility: hidden; }
/* each chapter, appendix page and the solutions start a new page */
.rl-chapter { break-before: page; }
h1, h2, h3, h4, .admonition-title, .caption { break-after: avoid; }
/* a code frame or output that fits on a page is kept whole; longer ones
   still split, but never on their first or last lines */
div.cell_input, div.cell_output, div.highlight, .admonition, table,
mjx-container[display="true"] { break-inside: avoid; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere;
  orphans: 4; widows: 3; }
mjx-container[display="true"] { overflow: visible !important; }
img { max-width: 100% !important; }
figure { break-inside: avoid; }
/* folded cells, hints and solutions print open; the toggles' labels do not */
details > *, .toggle-hidden { display: revert !important; }
details > summary, button.toggle-button, .toggle-button { display: none !important; }
.dropdown.admonition > *:not(.admonition-title) { display: revert !important; }
/* tables: words stay whole; a table wider than the column is scaled (PREPARE) */
article table { display: table !important; overflow: visible !important;
  max-width: none !important; }
article td, article th { overflow-wrap: normal !important; word-break: normal !important;
  hyphens: manual; }
"""
# The second, short print: only the contents' page numbers, on blank pages.
NUMBERS_ONLY_CSS = """
article > *:not(.rl-front), .bd-sidebar-primary, footer { display: none !important; }
body * { visibility: hidden !important; background: none !important; }
.rl-contents li .rl-page { visibility: visible !important; }
"""
# Runs in the loaded page before printing: title page, contents (page numbers
# filled in by the second print), chapters marked, solutions moved to the end,
# wide tables scaled. Returns the contents' entries (id, title, sections), where
# sections are the entry's own sections, (id, title) each, for the bookmarks: every
# section heading gets an id of its own (rl-s-N; section ids such as "exercises"
# repeat from chapter to chapter) and a link to it, so that Chromium writes a
# named destination for it (a link's target gets one even when the link is not
# printed).
PREPARE = """({title, subtitle, author, date, solutionsTitle, placeholder}) => {
  const article = document.querySelector('article.bd-article');
  const text = el => { const c = el.cloneNode(true);
    c.querySelectorAll('.headerlink').forEach(a => a.remove());
    // typeset math: its text is in MathJax's assistive MathML, if anywhere
    c.querySelectorAll('mjx-container').forEach(m => {
      const mml = m.querySelector('mjx-assistive-mml');
      m.replaceWith(mml ? mml.textContent : ''); });
    return c.textContent.replace(/\\s+/g, ' ').trim(); };
  // the documents, in the order of the theme's own printed contents
  const docs = [];
  const toc = document.querySelector('#jb-print-toc nav');
  let part = null;
  for (const el of toc ? toc.children : []) {
    if (el.classList.contains('caption')) part = el.textContent.trim();
    for (const a of el.querySelectorAll(':scope > li > a')) {
      const span = document.getElementById(decodeURIComponent(a.hash.slice(1)));
      const section = span && span.nextElementSibling;
      if (!section || section.tagName !== 'SECTION') continue;
      section.classList.add('rl-chapter');
      const heading = section.querySelector('h1, h2');
      docs.push({part, id: section.id, title: text(heading), section});
    }
  }
  // every solution to an appendix at the end, grouped by chapter
  const appendix = document.createElement('section');
  appendix.id = 'rl-solutions';
  appendix.className = 'rl-chapter';
  appendix.innerHTML = '<h2></h2>';
  appendix.firstChild.textContent = solutionsTitle;
  for (const doc of docs) {
    const solutions = [...doc.section.querySelectorAll('div.solution')];
    if (!solutions.length) continue;
    const h = document.createElement('h3');
    h.textContent = doc.title;
    appendix.append(h);
    for (const s of solutions) { s.classList.remove('dropdown'); appendix.append(s); }
  }
  article.append(appendix);
  const intro = article.querySelector('section');
  const introHeading = intro.querySelector('h1');
  if (introHeading) introHeading.textContent = 'Introduction';
  const entries = [{part: null, id: intro.id, title: 'Introduction'}]
    .concat(docs.map(({part, id, title}) => ({part, id, title})))
    .concat([{part: docs.length ? docs[docs.length - 1].part : null,
              id: appendix.id, title: solutionsTitle}]);
  // the title page and the contents
  const front = document.createElement('div');
  front.className = 'rl-front';
  const entities = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'};
  const esc = s => s.replace(/[&<>"]/g, c => entities[c]);
  let list = '', current = null;
  for (const e of entries) {
    if (e.part !== current && e.part) list += `</ol><p class="rl-part">${esc(e.part)}</p><ol>`;
    current = e.part;
    list += `<li><a href="#${esc(e.id)}">${esc(e.title)}</a><span class="rl-dots"></span>` +
            `<span class="rl-page" data-target="${esc(e.id)}">${placeholder}</span></li>`;
  }
  front.innerHTML = `<div class="rl-titlepage"><h1>${esc(title)}</h1>` +
    `<p class="rl-subtitle">${esc(subtitle)}</p><p class="rl-author">${esc(author)}</p>` +
    `<p class="rl-date">${esc(date)}</p></div>` +
    `<nav class="rl-contents"><h2>Contents</h2><ol>${list}</ol></nav>`;
  article.prepend(front);
  // words stay whole in tables: one wider than the column is scaled to fit
  const column = article.clientWidth;
  for (const t of article.querySelectorAll('table, div.output.text_html')) {
    const w = t.scrollWidth;
    if (w > column + 1) t.style.zoom = (column / w).toFixed(3);
  }
  const targets = document.createElement('nav');
  targets.hidden = true;
  let n = 0;
  const sections = id => {
    const top = document.getElementById(id);
    if (!top) return [];
    const found = [];
    for (const s of top.querySelectorAll(':scope > section')) {
      const h = s.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
      if (!h || s.classList.contains('rl-chapter')) continue;
      h.id = h.id || `rl-s-${++n}`;
      const a = document.createElement('a');
      a.href = `#${h.id}`;
      targets.append(a);
      found.push([h.id, text(h)]);
    }
    return found;
  };
  const result = entries.map(e => [e.id, e.title, e.id === appendix.id ? [] : sections(e.id)]);
  front.append(targets);
  return result;
}"""
FOOTER = (
    '<div style="font-size:8pt;width:100%;text-align:center;color:#666">'
    '{title} · <span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)
MARGIN = {"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"}


def chromium() -> str:
    for candidate in (os.environ.get("ROPELAB_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("no Chromium: apt-get install chromium (or set ROPELAB_CHROMIUM)")


def book_metadata() -> dict[str, str]:
    """Title and author from _config.yml; the date of the last commit (or today)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    try:
        date = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%cs"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        date = ""
    day = datetime.date.fromisoformat(date) if date else datetime.date.today()
    return {
        "title": config.get("title", "The RoPE Book"),
        "subtitle": "Rotary Position Embedding, derived, computed and checked",
        "author": config.get("author", ""),
        "date": f"{day:%B} {day.day}, {day.year}",
    }


def destination_pages(pdf: bytes) -> dict[str, int]:
    """The 1-based page of each named destination (an anchor a link points to)."""
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(pdf))
    return {
        str(name).lstrip("/"): reader.get_destination_page_number(dest) + 1
        for name, dest in reader.named_destinations.items()
    }


def assemble(
    book: bytes, numbers: bytes, entries: list, pages: dict[str, int], meta: dict[str, str]
) -> bytes:
    """The book with the contents' page numbers stamped in, and a bookmark per entry."""
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(book)))
    for i, stamp in enumerate(pypdf.PdfReader(io.BytesIO(numbers)).pages):
        writer.pages[i].merge_page(stamp)
    writer.add_outline_item("Contents", 1)
    for ident, title, sections in entries:
        parent = writer.add_outline_item(title, pages[ident] - 1)
        for section, heading in sections:
            writer.add_outline_item(heading, pages[section] - 1, parent=parent)
    writer.page_mode = "/UseOutlines"
    writer.add_metadata({"/Title": meta["title"], "/Author": meta["author"]})
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(site: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    if not (site / ROOT_PAGE).is_file():
        sys.exit(f"no {site}/{ROOT_PAGE}: build the single-page book first")
    shutil.copy2(site / ROOT_PAGE, site / PRINTED)
    meta = book_metadata()
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
            # the viewport of the printed column (A4 less the margins), so that
            # tables are measured against the width they will have on paper
            page = browser.new_page(viewport={"width": 674, "height": 1000})
            page.route(
                "**/*",
                lambda r: r.continue_() if r.request.url.startswith(base) else r.abort(),
            )
            page.goto(f"{base}/{PRINTED}", wait_until="load", timeout=60_000)
            if not page.evaluate("!!window.MathJax"):
                # Sphinx's singlehtml leaves MathJax out: load the book's copy,
                # configured as Sphinx configures it for the HTML pages.
                page.evaluate(MATHJAX_CONFIG)
                page.add_script_tag(url=f"{base}/_static/mathjax/tex-chtml.js")
            page.wait_for_function(
                "!!(window.MathJax && MathJax.startup && MathJax.startup.promise)", timeout=60_000
            )
            page.evaluate("MathJax.startup.promise")
            page.evaluate(
                """async () => { for (const img of document.images) {
                    img.loading = 'eager'; try { await img.decode(); } catch (e) {} } }"""
            )
            page.evaluate("document.fonts.ready")
            page.emulate_media(media="print")
            page.add_style_tag(content=PRINT_CSS)
            entries = page.evaluate(
                PREPARE,
                {**meta, "solutionsTitle": SOLUTIONS_TITLE, "placeholder": PAGE_PLACEHOLDER},
            )
            options = dict(
                format="A4",
                print_background=True,
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=FOOTER.format(title=html.escape(meta["title"])),
                margin=MARGIN,
            )
            # the book, with the contents' page numbers left blank
            book = page.pdf(**options)
            pages = destination_pages(book)
            missing = [title for ident, title, _ in entries if ident not in pages]
            missing += [head for *_, s in entries for ident, head in s if ident not in pages]
            if missing:
                sys.exit(f"no page found for the contents entries {missing}")
            # the page numbers alone, printed where the blanks are: the front
            # matter on its own, everything else hidden, laid out as before
            page.evaluate(
                """numbers => document.querySelectorAll('.rl-page').forEach(
                    s => { s.textContent = numbers[s.dataset.target]; })""",
                {ident: str(pages[ident]) for ident, *_ in entries},
            )
            page.add_style_tag(content=NUMBERS_ONLY_CSS)
            numbers = page.pdf(**{**options, "display_header_footer": False,
                                  "print_background": False})
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(assemble(book, numbers, entries, pages, meta))
            browser.close()
    finally:
        httpd.shutdown()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(entries)} contents entries)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
