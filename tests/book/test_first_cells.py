"""Every chapter's first code cell writes nothing, on a fresh machine, several kernels at once.

A fresh machine has no matplotlib font cache, no compiled CPU kernel and no
other cache: each group of GROUP chapters starts its kernels at the same time
on a new, empty ``MPLCONFIGDIR`` and ``XDG_CACHE_HOME`` (so the kernels race
to build the same caches), runs the first code cell of each, and every
stream, display, result or error the cell sends is a failure. (strict nbval
then compares the stored outputs: a first cell stores none.)
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
GROUP = 4  # kernels started at once on one set of empty caches

pytestmark = pytest.mark.slow


def first_code_cell(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


def _kernel_specs(tmp: Path) -> KernelSpecManager:
    """A kernelspec that runs this interpreter (the test's environment), whatever PATH says."""
    spec = tmp / "kernels" / "ropelab-test"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "t", "language": "python"}))
    return KernelSpecManager(kernel_dirs=[str(tmp / "kernels")])


def _run_first_cell(path: Path, env: dict, specs: KernelSpecManager) -> list[str]:
    """What the first cell of ``path`` sends to the notebook: (kind, text) lines."""
    km = KernelManager(kernel_name="ropelab-test", kernel_spec_manager=specs)
    km.start_kernel(cwd=str(ROOT / "book"), env=env)
    client = km.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=180)
        msg_id = client.execute(first_code_cell(path))
        written = []
        while True:
            msg = client.get_iopub_msg(timeout=300)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                return written
            if kind == "stream":
                written.append(f"{content['name']}: {content['text']}")
            elif kind in ("display_data", "execute_result"):
                written.append(f"{kind}: {content['data'].get('text/plain', content['data'])}")
            elif kind == "error":
                written.append(f"error: {content['ename']}: {content['evalue']}")
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def test_first_cells_write_nothing_on_a_fresh_machine(tmp_path):
    assert NOTEBOOKS, "no chapter notebooks"
    specs = _kernel_specs(tmp_path)
    offenders = {}
    for start in range(0, len(NOTEBOOKS), GROUP):
        fresh = tmp_path / f"machine{start}"
        env = {k: v for k, v in os.environ.items() if k != "ROPELAB_CACHE_DIR"}
        env.update(MPLCONFIGDIR=str(fresh / "mpl"), XDG_CACHE_HOME=str(fresh / "cache"))
        for d in ("mpl", "cache"):
            (fresh / d).mkdir(parents=True)
        group = NOTEBOOKS[start : start + GROUP]
        with ThreadPoolExecutor(len(group)) as pool:
            for path, written in zip(group, pool.map(lambda p: _run_first_cell(p, env, specs), group)):
                if written:
                    offenders[path.name] = written
    assert not offenders, "first cells that write on a fresh machine:\n" + "\n".join(
        f"{name}: {lines}" for name, lines in offenders.items()
    )
