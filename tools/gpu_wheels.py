"""Prepare the wheels ``make gpu-check`` needs on an offline GPU machine (Python 3.12,
x86-64 Linux) whose image has torch, Triton, pytest and numpy but not the notebook
stack.

Takes the packages the check needs beyond that image (nbval, ipykernel and the
Jupyter stack, ipywidgets, transformers and Liger-Kernel for the peers), closes
them over their dependencies as this environment has them installed, at the
versions installed here (the versions the book's outputs were made with), leaves
out what the GPU image already has, and downloads each as a wheel, one version
per package, with ``pip download --no-deps`` for CPython 3.12 on manylinux.

    .venv/bin/python tools/gpu_wheels.py [DEST]     # default DEST: .whl

Then, on the GPU machine, in the repository's root (``.whl`` carried along)::

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site make gpu-check
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOTS = ["nbval", "ipykernel", "ipywidgets", "transformers"]
PINNED = {
    "transformers": "5.24.0",
    "liger-kernel": "0.8.5",
}  # the book's pins; Liger: peer
EXTRA = ["liger-kernel"]  # not installed here: downloaded at its pin
# On the GPU image already (its package list, 2026-11-17): left out. Matching versions
# are not needed for these: each is a dependency that any recent version satisfies.
ON_IMAGE = {
    "torch",
    "triton",
    "numpy",
    "pytest",
    "pytest-xdist",
    "hypothesis",
    "execnet",
    "pluggy",
    "iniconfig",
    "packaging",
    "pyyaml",
    "tqdm",
    "requests",
    "urllib3",
    "idna",
    "certifi",
    "charset-normalizer",
    "filelock",
    "fsspec",
    "typing-extensions",
    "safetensors",
    "regex",
    "psutil",
    "pygments",
    "jinja2",
    "markupsafe",
    "attrs",
    "sortedcontainers",
    "matplotlib",
    "contourpy",
    "cycler",
    "fonttools",
    "kiwisolver",
    "pillow",
    "pyparsing",
    "python-dateutil",
    "six",
    "setuptools",
    "networkx",
    "sympy",
    "mpmath",
    "anyio",
    "h11",
    "httpcore",
    "httpx",
    "click",
    "rich",
    "typer",
    "shellingham",
    "markdown-it-py",
    "mdurl",
    "annotated-doc",
    "coverage",
    "wheel",
}
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_35_x86_64",
]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str]) -> dict[str, str]:
    """name -> installed version for the roots and everything they need (extras left
    out, markers evaluated for Python 3.12 on Linux)."""
    env = {
        "python_version": "3.12",
        "python_full_version": "3.12.3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
        "extra": "",
    }
    found: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = norm(todo.pop())
        if name in found or name in ON_IMAGE:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # not needed here either (an optional platform package)
        found[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return found


def main(argv: list[str]) -> int:
    dest = Path(argv[1] if len(argv) > 1 else ".whl")
    dest.mkdir(exist_ok=True)
    wanted = closure(ROOTS)
    wanted.update({norm(n): v for n, v in PINNED.items()})
    for name in EXTRA:
        wanted.setdefault(norm(name), PINNED[name])
    platform_args = [a for p in PLATFORMS for a in ("--platform", p)]
    for name, version in sorted(wanted.items()):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platform_args,
            "-q",
            "-d",
            str(dest),
            f"{name}=={version}",
        ]
        print(f"{name}=={version}", flush=True)
        subprocess.run(cmd, check=True)
    total = sum(p.stat().st_size for p in dest.glob("*.whl"))
    print(f"{len(wanted)} packages, {total / 2**20:.1f} MiB in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
