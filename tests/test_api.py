"""Tests for the package surface: ropelab.__all__, the API page, ``python -m ropelab``."""

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import ropelab

API_PAGE = Path(__file__).resolve().parents[1] / "book" / "api.md"


def documented():
    return re.findall(r"^\.\. auto(?:function|class):: (\S+)", API_PAGE.read_text(), re.M)


def test_every_public_name_is_documented_and_every_documented_name_exists():
    names = documented()
    top = {n for n in names if "." not in n}
    assert top == set(ropelab.__all__)
    for dotted in names:
        # the longest importable module prefix, then attributes (a class's method)
        parts = dotted.removeprefix("ropelab.").split(".")
        for cut in range(len(parts) - 1, -1, -1):
            module = ".".join(["ropelab", *parts[:cut]])
            try:
                obj = importlib.import_module(module)
                break
            except ModuleNotFoundError as missing:
                # a ropelab module that exists but needs Triton, which is optional (make test
                # installs it): its names are checked where Triton is installed
                if missing.name == "triton" and importlib.util.find_spec(module):
                    obj = None
                    break
                continue
        if obj is None:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)  # AttributeError names what the page documents in vain


def test_python_dash_m_ropelab_prints_help_and_runs_nothing(capsys):
    run = subprocess.run([sys.executable, "-m", "ropelab"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "python -m ropelab.bench" in run.stdout
    assert "apply_rotary" in run.stdout
    from ropelab.__main__ import main

    assert main(["--size", "3"]) == 2  # an unknown argument is an error, after the help
    assert capsys.readouterr().out == run.stdout
