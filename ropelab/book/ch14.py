"""Chapter 14's plumbing (Triton kernel): source listings of the kernel, and the GPU run
of 2026-12-04 on an NVIDIA H200, read from the files it wrote."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from dataclasses import dataclass
from importlib import resources
from types import ModuleType
from typing import Any

__all__ = [
    "GPU_RUN",
    "GpuRun",
    "layout_table",
    "listing",
    "load_gpu_run",
    "peers_table",
    "read_table",
]

GPU_RUN = "data/gpu_h200"  # the H200 run's files, as that run wrote them


def listing(first: str, last: str, module: ModuleType | None = None) -> str:
    """The source of ``module`` (default: ropelab.kernels.triton) from the first line
    holding ``first`` to the next line holding ``last``, dedented.

    Raises:
        ValueError: ``first`` or ``last`` is not found (the listing names a line the
            kernel no longer has).
    """
    if module is None:
        from ropelab.kernels import triton as module
    lines = inspect.getsource(module).splitlines()
    start = next((i for i, line in enumerate(lines) if first in line), None)
    if start is None:
        raise ValueError(f"first: no line holds {first!r}")
    stop = next((i for i in range(start, len(lines)) if last in lines[i]), None)
    if stop is None:
        raise ValueError(f"last: no line from {first!r} on holds {last!r}")
    return textwrap.dedent("\n".join(lines[start : stop + 1]))


def read_table(text: str) -> list[dict[str, Any]]:
    """Rows of a whitespace-separated table with a header line (``|`` ignored):
    numbers as floats, other cells as strings. A column named ``x`` (a ratio) takes
    the prefix of the name before it (``liger_g``, ``x`` -> ``liger_x``)."""
    lines = [line.replace("|", " ").split() for line in text.strip().splitlines()]
    names: list[str] = []
    for name in lines[0]:
        if name == "x" and names:
            name = f"{names[-1].split('_')[0]}_{name}"
        names.append(name)
    rows = []
    for cells in lines[1:]:
        row: dict[str, Any] = {}
        for name, cell in zip(names, cells, strict=True):
            try:
                row[name] = float(cell)
            except ValueError:
                row[name] = cell
        rows.append(row)
    return rows


@dataclass
class GpuRun:
    """One GPU run: where it ran, and its two tables of timings (microseconds)."""

    machine: dict[str, str]
    peers: list[dict[str, Any]]  # q and k, half-split: copy_, Liger, ropelab, compile
    split: list[dict[str, Any]]  # one tensor, both layouts: GPU time and host time


def load_gpu_run(folder: str = GPU_RUN) -> GpuRun:
    """The H200 run of 2026-12-04 (chapter 14), from the files it wrote.

    ``machine`` holds the GPU and torch from the benchmark's JSON, and the versions
    of Triton, transformers and Liger-Kernel from the run's README.
    """
    root = resources.files("ropelab.book").joinpath(folder)
    readme = root.joinpath("README.txt").read_text()
    machine = json.loads(root.joinpath("bench_grid.json").read_text())["machine"]
    found = {"gpu": machine["gpu"], "torch": machine["torch"]}
    for name, pattern in (("triton", r"triton ([\d.]+)"),
                          ("transformers", r"transformers ([\d.]+)"),
                          ("liger", r"Liger-Kernel ([\d.]+)"),
                          ("date", r"\((\d{4}-\d\d-\d\d)\)")):
        match = re.search(pattern, readme)
        found[name] = match.group(1) if match else "?"
    return GpuRun(
        machine=found,
        peers=read_table(root.joinpath("peers_qk.txt").read_text()),
        split=read_table(root.joinpath("triton_split.txt").read_text()),
    )


def peers_table(run: GpuRun) -> str:
    """q (1, 32, S, 128) and k (1, 8, S, 128), half-split: GPU time over copy_'s, and
    the time of one eager call, for ropelab's kernel, Liger's and torch.compile's.

    float32's torch.compile column fell back to eager in that run (recompile limit):
    shown as ``-``.
    """
    head = (f"{'':<14} {'GPU time / copy_':^24}   {'eager call (µs)':^24}\n"
            f"{'dtype':<8} {'S':>6} {'ours':>6} {'Liger':>6} {'compile':>8}   "
            f"{'ours':>6} {'Liger':>6} {'compile':>8}")
    lines = [line.rstrip() for line in head.splitlines()]
    for r in run.peers:
        bad = r["dtype"] == "float32"  # compile fell back to eager there
        comp = ("-", "-") if bad else (f"{r['hfc_x']:.2f}", f"{r['hfc_e']:.0f}")
        lines.append(
            f"{r['dtype']:<8} {r['S']:>6,.0f} {r['ours_x']:>6.2f} {r['liger_x']:>6.2f} "
            f"{comp[0]:>8}   {r['ours_e']:>6.0f} {r['liger_e']:>6.0f} {comp[1]:>8}")
    return "\n".join(lines)


def layout_table(run: GpuRun) -> str:
    """One tensor (1, 32, S, 128): the kernel's GPU time over copy_'s, by dtype, layout
    and S, and the range of the host time of one eager call (microseconds)."""
    seqs = list(dict.fromkeys(int(r["S"]) for r in run.split))
    head = "".join(f"{f'S = {s:,}':>11}" for s in seqs)
    lines = [f"{'dtype':<9}{'layout':<12}{head}"]
    keys = list(dict.fromkeys((r["dtype"], r["layout"]) for r in run.split))
    for dtype, layout in keys:
        ratio = {int(r["S"]): r["ratio"] for r in run.split
                 if (r["dtype"], r["layout"]) == (dtype, layout)}
        cells = "".join(f"{ratio[s]:>11.2f}" for s in seqs)
        lines.append(f"{dtype:<9}{layout:<12}{cells}")
    host = [r["host_us"] for r in run.split]
    gpu1 = [r["tri_graph_us"] for r in run.split if r["S"] == 1]
    lines.append(f"S = 1: GPU time {min(gpu1):.1f}-{max(gpu1):.1f} µs; host time of "
                 f"one eager call (any S): {min(host):.0f}-{max(host):.0f} µs")
    return "\n".join(lines)
