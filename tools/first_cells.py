"""Write the install fallbacks of every notebook's first code cell from one place.

A chapter's first code cell imports ropelab and, where it is missing (a hosted
notebook: Colab, Binder), installs the book's package from the repository::

    try:
        import ropelab
    except ImportError:  # a hosted notebook (Colab, Binder): install the book's package
        %pip install --quiet "ropelab[book] @ git+<repository.url>@<repository.branch>"
        import ropelab

(and likewise ``transformers`` at the version the book was checked with,
where the chapter imports it). The repository's URL and the branch, tag or
commit to install live in ONE place, ``repository:`` in ``_config.yml`` (the
launch buttons read the same keys); the transformers version is the test
extra's pin in ``pyproject.toml``. After changing either, run

    python tools/first_cells.py

which rewrites only those ``%pip`` lines (and restores a fallback that a code
formatter turned into ``pass  # MAGIC...``), keeping every output, id and tag;
``tests/book/test_book.py`` fails while a first cell disagrees.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def repository() -> tuple[str, str]:
    """(url, ref) from _config.yml's ``repository:`` block (url, branch)."""
    text = (ROOT / "_config.yml").read_text(encoding="utf-8")
    block = re.search(r"^repository:\n((?:[ \t]+.*\n)+)", text, re.M)
    if block is None:
        raise SystemExit("_config.yml has no repository: block")
    keys = dict(re.findall(r"^\s+(\w+):\s*(\S*)", block.group(1), re.M))
    return keys["url"].strip("\"'").rstrip("/"), keys.get("branch", "").strip("\"'")


def transformers_pin() -> str:
    """The transformers requirement of pyproject.toml's test extra, e.g. 'transformers==5.24.0'."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'"(transformers==[^"]+)"', text).group(1)


def install_lines() -> dict[str, str]:
    """The %pip line (without indentation) each fallback must hold, by package."""
    url, ref = repository()
    spec = f"ropelab[book] @ git+{url}" + (f"@{ref}" if ref else "")
    return {
        "ropelab": f'%pip install --quiet "{spec}"',
        "transformers": f'%pip install --quiet "{transformers_pin()}"',
    }


FALLBACK = re.compile(
    r"(?P<head>try:\n    import (?P<package>\w+)\nexcept ImportError:[^\n]*\n)"
    r"    (?P<line>[^\n]*)\n(?P<tail>    import (?P=package)\b)"
)


def rewrite(source: str) -> str:
    """``source`` with each ropelab/transformers fallback's %pip line set."""
    lines = install_lines()

    def fix(m: re.Match) -> str:
        line = lines.get(m["package"], m["line"])
        return f"{m['head']}    {line}\n{m['tail']}"

    return FALLBACK.sub(fix, source)


def notebooks() -> list[Path]:
    return sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


def first_code_cell(nb: dict) -> dict:
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


def main() -> int:
    changed = []
    for path in notebooks():
        raw = path.read_text(encoding="utf-8")
        nb = json.loads(raw)
        cell = first_code_cell(nb)
        source = "".join(cell["source"])
        new = rewrite(source)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            changed.append(path.name)
    print("rewrote the first cell of " + (", ".join(changed) if changed else "no notebook"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
