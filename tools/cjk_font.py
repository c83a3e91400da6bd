"""Copy the CJK web font the book needs into book/_static/fonts (run by `make`).

The Chinese terms of the book (the glossary, a few chapters) must render on a
system without a CJK font, from the book's own files (no CDN). The font is
Noto Sans SC from the npm package @fontsource/noto-sans-sc, which ships it cut
into ~100 woff2 files, each with the unicode-range it covers. This script
keeps only the files that hold a character the book uses (about a dozen of
the 100, a few hundred kB) and writes their @font-face rules, renamed to
"RoPE Book CJK" and limited to the book's characters, to
book/_static/fonts/cjk.css. The browser fetches a file
only when a page shows one of its characters.

    python tools/cjk_font.py PACKAGE_DIR   # the unpacked npm package ("package/")
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "book" / "_static" / "fonts"
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
FAMILY = "RoPE Book CJK"


def used_characters() -> set[str]:
    chars: set[str] = set()
    for path in sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "book").glob("*.ipynb")):
        chars |= set(CJK.findall(path.read_text(encoding="utf-8")))
    return chars


def _ranges(spec: str) -> list[tuple[int, int]]:
    out = []
    for part in spec.split(","):
        part = part.strip().upper().removeprefix("U+")
        lo, _, hi = part.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


def main(package: Path) -> None:
    css = (package / "400.css").read_text(encoding="utf-8")
    chars = used_characters()
    rules, files = [], []
    for block in re.findall(r"@font-face\s*{[^}]*}", css):
        spec = re.search(r"unicode-range:\s*([^;]+);", block)
        woff2 = re.search(r"url\(\./files/([^)]+\.woff2)\)", block)
        if not (spec and woff2):
            continue
        ranges = _ranges(spec.group(1))
        mine = sorted(c for c in chars if any(lo <= ord(c) <= hi for lo, hi in ranges))
        if mine:
            # Only the book's own characters: the file also covers symbols
            # (°, arrows) that must keep the page's font.
            files.append(woff2.group(1))
            rules.append(
                "@font-face {\n"
                f'  font-family: "{FAMILY}";\n'
                "  font-style: normal;\n  font-weight: 400;\n  font-display: swap;\n"
                f'  src: url("{woff2.group(1)}") format("woff2");\n'
                f"  unicode-range: {','.join(f'U+{ord(c):X}' for c in mine)};\n"
                "}\n"
            )
    if chars and not files:
        sys.exit(f"no font file of {package} covers the book's {len(chars)} CJK characters")
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    for name in files:
        shutil.copy2(package / "files" / name, OUT / name)
    header = (
        f"/* Noto Sans SC (SIL Open Font License), from @fontsource/noto-sans-sc: the\n"
        f"   {len(files)} files that cover the book's {len(chars)} CJK characters.\n"
        f"   Written by tools/cjk_font.py; not in git. */\n"
    )
    (OUT / "cjk.css").write_text(header + "\n".join(rules), encoding="utf-8")
    license_file = next(iter(package.glob("LICENSE*")), None)
    if license_file:
        shutil.copy2(license_file, OUT / "LICENSE")
    size = sum((OUT / n).stat().st_size for n in files)
    print(f"cjk font: {len(files)} files, {size / 1024:.0f} kB, for {len(chars)} characters")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
