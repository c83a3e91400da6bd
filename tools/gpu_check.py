"""``make gpu-check``: the GPU check, on a machine with a CUDA torch, into one results file.

Runs, with the Python and torch already installed there (nothing installed,
nothing fetched):

1. the package tests (``pytest tests``, without the browser checks and the
   tests marked slow), with ``ROPELAB_DEVICE=cuda``;
2. every chapter notebook under strict nbval with ``ROPELAB_DEVICE=cuda``;
3. ``python -m ropelab.bench --device cuda --json``;

and writes one JSON file (default ``_build/gpu-check.json``): versions, the
device, each step's pytest summary and failures (from its JUnit report), the
benchmark's results, and the seconds each step took. The file is rewritten
after every step, so a run stopped early still leaves what it measured; a
later call with other ``--steps`` on the same device adds to it (``--fresh``
starts anew), so the steps can run in separate calls of a time-limited
machine. Exit status 0 only when every step this call ran passed.

    python tools/gpu_check.py [--out PATH] [--steps tests,notebooks,bench] [--jobs N]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBVAL = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with",
    "tests/nbval_sanitize.cfg",
]


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in (
        "torch",
        "triton",
        "transformers",
        "nbval",
        "ipykernel",
        "pytest",
        "liger-kernel",
        "numpy",
    ):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def device() -> dict[str, object]:
    import torch

    if not torch.cuda.is_available():
        return {"cuda": False}
    props = torch.cuda.get_device_properties(0)
    return {
        "cuda": True,
        "name": props.name,
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "capability": list(torch.cuda.get_device_capability(0)),
        "cuda_runtime": torch.version.cuda,
    }


def junit_summary(path: Path) -> dict[str, object]:
    """Counts and failures (name and the first 600 characters of the message) of a
    JUnit XML report."""
    if not path.exists():
        return {"report": "missing"}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {
        k: sum(int(s.get(k, 0)) for s in suites)
        for k in ("tests", "failures", "errors", "skipped")
    }
    failed = []
    for case in root.iter("testcase"):
        for kind in ("failure", "error"):
            node = case.find(kind)
            if node is not None:
                text = (node.get("message") or "") + "\n" + (node.text or "")
                failed.append(
                    {
                        "test": f"{case.get('classname')}::{case.get('name')}",
                        "kind": kind,
                        "message": text.strip()[:600],
                    }
                )
    counts["passed"] = (
        counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    )
    return {**counts, "failed": failed}


def run_step(name: str, cmd: list[str], env: dict[str, str], timeout: int) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        tail = (
            (exc.stdout or b"").decode(errors="replace")
            if isinstance(exc.stdout, bytes)
            else (exc.stdout or "")
        )[-3000:]
    return {
        "step": name,
        "command": " ".join(cmd),
        "returncode": rc,
        "seconds": round(time.perf_counter() - t0, 1),
        "output_tail": tail,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="_build/gpu-check.json")
    parser.add_argument("--steps", default="tests,notebooks,bench")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per step")
    parser.add_argument("--fresh", action="store_true",
                        help="drop the steps an earlier call wrote into --out")
    args = parser.parse_args(argv)
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {
        "versions": versions(),
        "device": device(),
        "steps": {},
    }
    if out.exists() and not args.fresh:  # steps run in an earlier call stay (one file)
        try:
            earlier = json.loads(out.read_text())
        except ValueError:
            earlier = {}
        if earlier.get("device") == report["device"]:
            report["steps"] = earlier.get("steps", {})
    if not report["device"]["cuda"]:  # type: ignore[index]
        print("gpu-check: this torch sees no CUDA device", file=sys.stderr)
        out.write_text(json.dumps(report, indent=1))
        return 2
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["ROPELAB_DEVICE"] = "cuda"
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    env.setdefault("MPLBACKEND", "Agg")
    py = sys.executable
    xdist = ["-n", str(args.jobs), "--dist", "loadfile"] if args.jobs > 1 else []
    build = ROOT / "_build"
    steps = {
        "tests": [
            py,
            "-m",
            "pytest",
            "tests",
            "--ignore=tests/book/test_render.py",
            "--ignore=tests/book/test_explorables.py",
            "-m",
            "not slow",
            "-q",
            "-p",
            "no:cacheprovider",
            *xdist,
            f"--junitxml={build / 'gpu-tests.xml'}",
        ],
        "notebooks": [
            py,
            "-m",
            "pytest",
            "book",
            *NBVAL,
            "-q",
            "-p",
            "no:cacheprovider",
            *xdist,
            f"--junitxml={build / 'gpu-notebooks.xml'}",
        ],
        "bench": [
            py,
            "-m",
            "ropelab.bench",
            "--device",
            "cuda",
            "--json",
            str(build / "gpu-bench.json"),
        ],
    }
    ok = True
    for name in args.steps.split(","):
        result = run_step(name, steps[name], env, args.timeout)
        result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        if name in ("tests", "notebooks"):
            result["summary"] = junit_summary(build / f"gpu-{name}.xml")
        elif (build / "gpu-bench.json").exists():
            result["results"] = json.loads((build / "gpu-bench.json").read_text())
        ok = ok and result["returncode"] == 0
        report["steps"][name] = result  # type: ignore[index]
        out.write_text(json.dumps(report, indent=1))
        print(
            f"gpu-check: {name}: returncode {result['returncode']}, "
            f"{result['seconds']} s",
            flush=True,
        )
    print(f"gpu-check: wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
