"""tools/gpu_check.py, the GPU check's driver: what can be tested without a GPU."""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import gpu_check  # noqa: E402


def test_junit_summary_counts_and_names_failures(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite tests="4" failures="1" errors="1" skipped="1">'
        '<testcase classname="tests.test_a" name="test_ok"/>'
        '<testcase classname="tests.test_a" name="test_bad"><failure message="boom">'
        'trace</failure></testcase>'
        '<testcase classname="book.ch" name="Cell 3"><error message="cuda">x</error>'
        '</testcase><testcase classname="t" name="s"><skipped/></testcase>'
        '</testsuite></testsuites>')
    got = gpu_check.junit_summary(report)
    assert (got["tests"], got["passed"], got["failures"], got["errors"], got["skipped"]) == \
        (4, 1, 1, 1, 1)
    assert [f["test"] for f in got["failed"]] == ["tests.test_a::test_bad", "book.ch::Cell 3"]
    assert got["failed"][0]["message"].startswith("boom")
    assert gpu_check.junit_summary(tmp_path / "none.xml") == {"report": "missing"}


def test_without_cuda_it_says_so_and_writes_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--out", str(out)]) == 2
    data = json.loads(out.read_text())
    assert data["device"] == {"cuda": False}
    assert data["versions"]["torch"] in (torch.__version__, torch.__version__.split("+")[0])
    assert "sees no CUDA device" in capsys.readouterr().err


def test_steps_of_separate_calls_land_in_one_file(tmp_path, monkeypatch):
    # two calls with different --steps on the same device: one file with both steps
    monkeypatch.setattr(gpu_check, "device", lambda: {"cuda": True, "name": "Fake"})
    monkeypatch.setattr(gpu_check, "run_step", lambda name, cmd, env, timeout: {
        "step": name, "returncode": 0, "seconds": 0.0, "output_tail": ""})
    monkeypatch.setattr(gpu_check, "junit_summary", lambda path: {"tests": 0})
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--out", str(out), "--steps", "tests"]) == 0
    assert gpu_check.main(["--out", str(out), "--steps", "bench"]) == 0
    assert set(json.loads(out.read_text())["steps"]) == {"tests", "bench"}
    assert gpu_check.main(["--out", str(out), "--steps", "bench", "--fresh"]) == 0
    assert set(json.loads(out.read_text())["steps"]) == {"bench"}


def test_every_path_the_gpu_check_names_exists():
    # an --ignore of a moved file ignores nothing: the browser checks were collected
    import re

    source = (Path(gpu_check.__file__)).read_text()
    root = Path(gpu_check.__file__).resolve().parent.parent
    named = re.findall(r'"--ignore=([^"]+)"', source)
    assert named, "the GPU check leaves the browser checks out by --ignore"
    missing = [p for p in named if not (root / p).exists()]
    assert not missing, missing
