"""The book's own Sphinx extension (listed in _config.yml).

* The download button of every page offers the whole book as one PDF
  (``the-rope-book.pdf`` at the root of the HTML build, made by `make pdf`),
  beside the page's own .ipynb/.md and "print this page".
* The single-page build that `make pdf` prints (``singlehtml``) renders the
  collapsed ``hide-input`` cells (myst-nb registers its node for the ``html``
  builder only). Sphinx leaves MathJax out of that page; tools/pdf.py loads it.
* Figures, equations, tables and exercises are numbered per chapter, as in a
  printed book: Fig. 3.2, eq. (3.4), Exercise 3.1 in chapter 3 (its file is
  ``book/03_*``), on the web and in the PDF. The appendix pages take letters
  (Fig. A.1); the landing page keeps plain numbers. Sphinx numbers them
  across the whole book unless the toctree numbers every section, which
  would renumber the headings too; we renumber Sphinx's own table instead,
  so every reference and caption reads the new numbers. A chapter title that
  does not start with its number gets it ("5. The cos/sin cache ...").
"""

from __future__ import annotations

import re

from docutils import nodes

PDF_NAME = "the-rope-book.pdf"


def _add_book_pdf(app, pagename, templatename, context, doctree):
    if app.builder.name != "html":
        return
    for button in context.get("header_buttons", []):
        if button.get("label") == "download-buttons":
            button["buttons"].insert(0, {
                "type": "link",
                "url": context["pathto"](PDF_NAME, 1),
                "text": "book .pdf",
                "tooltip": "Download the whole book as one PDF",
                "icon": "fas fa-book",
                "label": "download-book-pdf-button",
            })


_CHAPTER = re.compile(r"book/(\d\d)_")
APPENDIX = "Appendix"  # the _toc.yml part whose pages take letters


def chapter_label(app, docname: str) -> str | None:
    """The prefix of a page's numbers: "3" for book/03_*, "A".. in the appendix, else None."""
    toc = getattr(app.env, "external_site_map", None)
    if toc is not None:
        for part in toc.root.subtrees:
            if part.caption == APPENDIX:
                names = list(part.files())
                if docname in names:
                    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[names.index(docname)]
    match = _CHAPTER.match(docname)
    if match and int(match.group(1)) > 0:
        return str(int(match.group(1)))
    return None


def _number_per_chapter(app, env):
    """Rewrite Sphinx's book-wide numbers (n,) into per-chapter ones (label, k)."""
    for docname, by_type in env.toc_fignumbers.items():
        label = chapter_label(app, docname)
        for figtype, numbers in by_type.items():
            ordered = sorted(numbers, key=lambda ident: numbers[ident])
            for k, ident in enumerate(ordered, start=1):
                numbers[ident] = (label, k) if label else (k,)
    return []


def _number_the_title(app, doctree):
    label = chapter_label(app, app.env.docname)
    if not label or not label.isdigit():
        return
    for title in doctree.findall(nodes.title):
        if isinstance(title.parent, nodes.section):
            if not title.astext().startswith(f"{label}. "):
                title.insert(0, nodes.Text(f"{label}. "))
            return


def setup(app):
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput, visit_HideCellInput

    app.add_node(HideCodeCellNode, override=True, singlehtml=(visit_HideCellInput, depart_HideCellInput))
    # after sphinx-book-theme has made the buttons (its priority is 501)
    app.connect("html-page-context", _add_book_pdf, priority=600)
    # after Sphinx's own TocTreeCollector has numbered everything (priority 500)
    app.connect("env-get-updated", _number_per_chapter, priority=900)
    # before the TitleCollector (500), so that the sidebar and <title> show the number
    app.connect("doctree-read", _number_the_title, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
