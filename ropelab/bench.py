"""``python -m ropelab.bench``: what each way of applying RoPE costs, against the memory floor (09_performance).

RoPE moves memory and does almost no arithmetic, so every method is timed
next to the copy that reads and writes the same bytes: ``q.clone(); k.clone()``
for methods that return new tensors, ``out.copy_(x)`` for methods that write
into preallocated ones. The table reports medians and each method's ratio to
its floor and to the plain transformers formula ``x*cos + rotate_half(x)*sin``.
Absolute times depend on the machine and its load; the ratios are what
reproduces.

Methods (all rotate q and k, with cos/sin tables built once beforehand):

* ``copy``, ``copy_out``: the floors.
* ``hf``: ``q*cos + rotate_half(q)*sin`` written out in plain torch.
* ``ropelab_half_split``, ``ropelab_interleaved``: :func:`ropelab.apply_rotary`.
* ``ropelab_half_split_out``, ``ropelab_interleaved_out``: the same with ``out=``.
* ``complex``: Meta's ``view_as_complex(x) * freqs_cis`` (computed in float32).
* ``dense_R``: ``R_m @ x_m`` with a precomputed ``(seq, d, d)`` table; only
  where that table is small (it says when it skips).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch
from torch import Tensor

from .frequencies import inv_freq
from .matrix import rotation_matrix
from .rotary import apply_rotary, cos_sin

__all__ = ["Result", "run", "machine_info", "main", "DEFAULT_SHAPES"]

DEFAULT_SHAPES: tuple[tuple[int, int, int, int], ...] = ((1, 32, 4096, 128), (8, 32, 512, 128), (64, 32, 1, 128))
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
DENSE_R_LIMIT_BYTES = 64 * 2**20  # skip dense R when its (seq, d, d) table exceeds this


@dataclass
class Result:
    """One timed method: median seconds per call on q and k together, and its ratios."""

    shape: tuple[int, ...]
    dtype: str
    method: str
    median_s: float | None
    runs: int
    floor: str
    ratio_floor: float | None = None
    ratio_hf: float | None = None
    note: str = ""


def machine_info(device: torch.device) -> dict[str, object]:
    """Where the numbers come from: CPU or GPU name, torch version, threads."""
    info: dict[str, object] = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            info["cpu"] = names[0]
    except OSError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def _timer(device: torch.device, fn: Callable[[], object], *, min_runs: int, min_time: float) -> tuple[float, int]:
    """Median seconds of ``fn`` after warm-up: CUDA events on a GPU, perf_counter on the CPU."""
    for _ in range(3):
        fn()
    times: list[float] = []
    start_all = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start_all < min_time and len(times) < 1000):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            begin.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(begin.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


def _hf_rotate_half(x: Tensor) -> Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _methods(q: Tensor, k: Tensor, device: torch.device) -> dict[str, tuple[str, Callable[[], object] | None, str]]:
    """name -> (floor name, zero-argument callable or None when skipped, note)."""
    seq, dim = q.shape[-2], q.shape[-1]
    theta = inv_freq(dim).to(device)
    pos = torch.arange(seq, device=device)
    cos_h, sin_h = cos_sin(pos, theta, dtype=q.dtype)
    cos_i, sin_i = cos_sin(pos, theta, layout="interleaved", dtype=q.dtype)
    freqs_cis = torch.polar(torch.ones(seq, dim // 2, device=device), pos.float()[:, None] * theta)
    out_q, out_k = torch.empty_like(q), torch.empty_like(k)

    def meta_complex(x: Tensor) -> Tensor:
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)

    methods: dict[str, tuple[str, Callable[[], object] | None, str]] = {
        "copy": ("copy", lambda: (q.clone(), k.clone()), "floor for new tensors"),
        "copy_out": ("copy_out", lambda: (out_q.copy_(q), out_k.copy_(k)), "floor for out="),
        "hf": ("copy", lambda: (q * cos_h + _hf_rotate_half(q) * sin_h, k * cos_h + _hf_rotate_half(k) * sin_h), ""),
        "ropelab_half_split": ("copy", lambda: (apply_rotary(q, cos_h, sin_h), apply_rotary(k, cos_h, sin_h)), ""),
        "ropelab_interleaved": (
            "copy",
            lambda: (apply_rotary(q, cos_i, sin_i, layout="interleaved"),
                     apply_rotary(k, cos_i, sin_i, layout="interleaved")),
            "",
        ),
        "ropelab_half_split_out": (
            "copy_out",
            lambda: (apply_rotary(q, cos_h, sin_h, out=out_q), apply_rotary(k, cos_h, sin_h, out=out_k)),
            "",
        ),
        "ropelab_interleaved_out": (
            "copy_out",
            lambda: (apply_rotary(q, cos_i, sin_i, layout="interleaved", out=out_q),
                     apply_rotary(k, cos_i, sin_i, layout="interleaved", out=out_k)),
            "",
        ),
        "complex": ("copy", lambda: (meta_complex(q), meta_complex(k)), "Meta's view_as_complex path, in float32"),
    }
    r_bytes = seq * dim * dim * q.element_size()
    if r_bytes <= DENSE_R_LIMIT_BYTES:
        r = torch.stack([rotation_matrix(m, theta) for m in range(seq)]).to(q.dtype)  # (seq, d, d)
        dense = lambda: (torch.einsum("sij,...sj->...si", r, q), torch.einsum("sij,...sj->...si", r, k))  # noqa: E731
        methods["dense_R"] = ("copy", dense, "R_m @ x_m, interleaved")
    else:
        methods["dense_R"] = ("copy", None, f"skipped: the (seq, d, d) table would take {r_bytes / 2**20:.0f} MiB")
    return methods


def run(
    shapes: Sequence[Sequence[int]] = DEFAULT_SHAPES,
    dtypes: Sequence[str] = ("float32",),
    device: str | torch.device = "cpu",
    *,
    min_runs: int = 10,
    min_time: float = 0.5,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Time every method for every shape and dtype; returns one :class:`Result` per (shape, dtype, method)."""
    device = torch.device(device)
    results: list[Result] = []
    total = len(shapes) * len(dtypes)
    for i, (shape, dtype_name) in enumerate(((s, d) for s in shapes for d in dtypes), start=1):
        if len(shape) < 2 or shape[-1] % 2:
            raise ValueError(f"--shape must be (..., seq, dim) with an even dim, got {tuple(shape)}")
        dtype = DTYPES[dtype_name]
        g = torch.Generator(device="cpu").manual_seed(0)
        q = torch.randn(*shape, generator=g).to(device=device, dtype=dtype)
        k = torch.randn(*shape, generator=g).to(device=device, dtype=dtype)
        timed: dict[str, Result] = {}
        methods = _methods(q, k, device)
        for j, (name, (floor, fn, note)) in enumerate(methods.items(), start=1):
            if progress:
                progress(f"[{i}/{total}] {tuple(shape)} {dtype_name}: {name} ({j}/{len(methods)})")
            median, runs = _timer(device, fn, min_runs=min_runs, min_time=min_time) if fn else (None, 0)
            timed[name] = Result(tuple(shape), dtype_name, name, median, runs, floor, note=note)
        for res in timed.values():
            if res.median_s is not None:
                res.ratio_floor = res.median_s / timed[res.floor].median_s
                res.ratio_hf = res.median_s / timed["hf"].median_s
        results.extend(timed.values())
        del q, k, methods
    return results


def format_table(results: Sequence[Result]) -> str:
    """A plain-text table of medians and ratios, one block per (shape, dtype)."""
    lines = [f"{'shape':<20} {'dtype':<9} {'method':<24} {'median':>10} {'x floor':>8} {'x hf':>7}  note"]
    for r in results:
        median = "-" if r.median_s is None else f"{r.median_s * 1e3:8.3f}ms"
        ratio_f = "-" if r.ratio_floor is None else f"{r.ratio_floor:.2f}"
        ratio_h = "-" if r.ratio_hf is None else f"{r.ratio_hf:.2f}"
        lines.append(f"{str(r.shape):<20} {r.dtype:<9} {r.method:<24} {median:>10} {ratio_f:>8} {ratio_h:>7}  {r.note}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="repeatable; default float32")
    parser.add_argument("--shape", action="append", help="comma-separated, e.g. 1,32,4096,128; repeatable")
    parser.add_argument("--json", metavar="PATH", help="also write the machine and results as JSON")
    parser.add_argument("--min-runs", type=int, default=10, help="timed runs per method at least (default 10)")
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per method at least (default 0.5)")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"ropelab.bench: --device {args.device} asked for CUDA, but this torch ({torch.__version__}) "
              "sees no CUDA device; run with --device cpu", file=sys.stderr)
        return 2
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    dtypes = args.dtype or ["float32"]
    info = machine_info(device)
    print("ropelab.bench on " + ", ".join(f"{k}={v}" for k, v in info.items()), flush=True)

    def progress(line: str) -> None:
        print(f"\r\033[K{line}" if sys.stderr.isatty() else line, end="" if sys.stderr.isatty() else "\n",
              file=sys.stderr, flush=True)

    results = run(shapes, dtypes, device, min_runs=args.min_runs, min_time=args.min_time, progress=progress)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "results": [asdict(r) for r in results]}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
