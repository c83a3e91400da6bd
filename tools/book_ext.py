"""The book's own Sphinx extension (listed in _config.yml).

* The download button of every page offers the whole book as one PDF
  (``the-rope-book.pdf`` at the root of the HTML build, made by `make pdf`),
  beside the page's own .ipynb/.md and "print this page".
* The single-page build that `make pdf` prints (``singlehtml``) renders the
  collapsed ``hide-input`` cells (myst-nb registers its node for the ``html``
  builder only). Sphinx leaves MathJax out of that page; tools/pdf.py loads it.
"""

from __future__ import annotations

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


def setup(app):
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput, visit_HideCellInput

    app.add_node(HideCodeCellNode, override=True, singlehtml=(visit_HideCellInput, depart_HideCellInput))
    # after sphinx-book-theme has made the buttons (its priority is 501)
    app.connect("html-page-context", _add_book_pdf, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
