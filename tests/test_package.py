"""The package as others depend on it: two rooms, one version, a licence, a clean wheel.

* the library (``ropelab`` and ``ropelab.kernels``, everything outside
  ``ropelab/book``) imports nothing from ``ropelab.book``: read from every
  module's source, and seen in a fresh interpreter that imports all of it and
  runs ``apply_rotary`` with matplotlib absent;
* one version string, the LICENSE that pyproject.toml names, ``py.typed``;
* the wheel, built offline from a copy of the sources, holds every module of
  the package and its data, and nothing of the book's sources.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

import ropelab


def _dependencies() -> list[str]:
    """The library's requirements as pyproject.toml states them ([project] dependencies)."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "pyproject.toml has no dependencies list"
    return re.findall(r'"([^"]+)"', block.group(1))

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ropelab"
BOOK = PACKAGE / "book"


def library_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if BOOK not in p.parents)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, source: str, *, is_package: bool = False) -> set[str]:
    """Every module the import statements of ``source`` (module ``module``) name,
    relative imports resolved; ``from x import y`` names both x and x.y."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
    return names


def _book(names: set[str]) -> list[str]:
    return sorted(n for n in names if n == "ropelab.book" or n.startswith("ropelab.book."))


def test_the_scan_sees_every_form_of_importing_the_book():
    for module, source in [
        ("ropelab.rotary", "from ropelab.book import figures"),
        ("ropelab.rotary", "import ropelab.book.checks as c"),
        ("ropelab.rotary", "from .book import cost"),
        ("ropelab.rotary", "from . import book"),
        ("ropelab.kernels.cpu", "from ..book.toy import train"),
        ("ropelab.kernels.cpu", "def f():\n    from .. import book"),
    ]:
        assert _book(imported(module, source)), source
    assert not _book(imported("ropelab.kernels.cpu", "from . import torch_path"))
    assert not _book(imported("ropelab.kernels", "from .cpu import x", is_package=True))


@pytest.mark.parametrize("path", library_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_library_module_imports_the_book(path):
    source = path.read_text(encoding="utf-8")
    book = _book(imported(_module_name(path), source, is_package=path.name == "__init__.py"))
    assert not book, f"{path.relative_to(ROOT)} imports {book}: the library never imports ropelab.book"


MAX_MODULE_LINES = 800


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_every_module_is_short_and_says_what_it_is_for(path):
    source = path.read_text(encoding="utf-8")
    lines = source.count("\n")
    assert lines <= MAX_MODULE_LINES, f"{lines} lines: split it (at most {MAX_MODULE_LINES})"
    doc = ast.get_docstring(ast.parse(source))
    assert source.startswith('"""') and doc, "the first line opens a module docstring"
    first = doc.splitlines()[0]
    assert len(first.split()) >= 4, f"the docstring's first line says too little: {first!r}"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


# Every library module (Triton's needs the optional extra), then one rotation.
LIBRARY_IMPORTS = f"""
    import importlib
    import torch
    import ropelab
    for name in {[_module_name(p) for p in library_modules() if p.stem != "triton"]!r}:
        importlib.import_module(name)
    x = torch.randn(2, 3, 5, 8)
    cos, sin = ropelab.cos_sin(torch.arange(5), ropelab.inv_freq(8))
    y = ropelab.apply_rotary(x, cos, sin)
    assert y.shape == x.shape and torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
"""


def test_the_library_loads_no_book_and_works_with_matplotlib_absent():
    # sys.modules["matplotlib"] = None makes every import of it raise ImportError
    run = _run(
        'import sys\nsys.modules["matplotlib"] = None\n'
        + textwrap.dedent(LIBRARY_IMPORTS)
        + textwrap.dedent(
            """
            assert sys.modules["matplotlib"] is None
            print(sorted(m for m in sys.modules if m.startswith(("ropelab.book", "matplotlib."))))
            """
        )
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout


def test_one_version_string():
    assert importlib.metadata.version("ropelab") == ropelab.__version__


def test_license_file_matches_pyproject():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = "MIT"' in pyproject and 'license-files = ["LICENSE"]' in pyproject
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the ropelab authors" in text
    assert importlib.metadata.metadata("ropelab").get("License-Expression") == "MIT"


def test_py_typed_is_shipped():
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()


# --- the wheel and the sdist ---------------------------------------------------------

IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "_build", "build", "dist", "*.egg-info", "__pycache__", "*.so",
    "node_modules", ".pytest_cache", ".hypothesis", "mathjax", "fonts",
)  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A wheel and an sdist, built offline by setuptools' PEP 517 hooks in a copy of
    the sources (the checkout is left alone)."""
    src = tmp_path_factory.mktemp("src") / "ropelab"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    out = src.parent / "dist"
    names = src.parent / "built.txt"
    code = (
        "from setuptools import build_meta as b; import pathlib; "
        f"s = b.build_sdist({str(out)!r}); w = b.build_wheel({str(out)!r}); "
        f"pathlib.Path({str(names)!r}).write_text(s + ' ' + w)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    sdist, wheel = names.read_text().split()
    return out / wheel, out / sdist


def _package_files() -> set[str]:
    """What the package holds in the checkout: modules and package data."""
    files = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in ("py.typed", "kernels/cpu.c", "data/*.json", "book/data/*",
                    "book/data/gpu_h200/*"):
        files |= {p.relative_to(ROOT).as_posix() for p in PACKAGE.glob(pattern) if p.is_file()}
    return files


def test_the_wheel_holds_the_package_and_nothing_of_the_book_sources(built):
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {n for n in names if n.startswith("ropelab/")}
    assert package == _package_files()
    assert {"ropelab/py.typed", "ropelab/kernels/cpu.c", "ropelab/data/bench_goals.json"} <= package
    others = names - package
    assert all(n.startswith("ropelab-") and ".dist-info/" in n for n in others), sorted(others)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in others)
    assert not [n for n in names if n.endswith((".ipynb", ".md", ".yml", ".cfg"))]
    metadata = zipfile.ZipFile(wheel).read(next(n for n in others if n.endswith("METADATA"))).decode()
    assert f"Version: {ropelab.__version__}" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    wanted = _dependencies()  # torch and numpy, nothing of the book
    assert sorted(r.split()[1] for r in core) == sorted(wanted), core
    assert {w.split(">")[0] for w in wanted} == {"torch", "numpy"}
    assert any("matplotlib" in r and 'extra == "book"' in r for r in requires)


def test_the_sdist_holds_the_library_and_no_notebook(built):
    _, sdist = built
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert "pyproject.toml" in names and "LICENSE" in names and "README.md" in names
    assert set(_package_files()) <= set(names)
    assert not [n for n in names if n.endswith(".ipynb") or n.startswith(("book/", "tests/", "tools/"))]
    assert "_config.yml" not in names and "requirements.txt" not in names
