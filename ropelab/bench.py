"""``python -m ropelab.bench``: apply_rotary timed against the memory floor, ``copy_``
into a preallocated buffer.

RoPE moves memory and does almost no arithmetic (chapter 09), so
every time is reported as a ratio to the copy that reads and writes the same
bytes into memory that is already allocated: ``out.copy_(x)``. Candidates
are timed in interleaved rounds (floor, method, floor, method, ...), each
sample long enough (about 2 ms of back-to-back calls) to swamp timer jitter,
and each candidate's fastest sample is kept: on a shared machine a slower
sample measures the neighbours, not the code. Ratios reproduce across
machines far better than times.

Two measurements:

* the **grid** (the default): ``apply_rotary(..., out=)`` over ``copy_`` for
  each dtype, pair layout, axis order ((batch, heads, seq, dim) or
  (batch, seq, heads, dim) with tables that broadcast over the heads) and
  sequence length of the goals file, and a decoding step against the
  transformers formula; each goal is printed with whether it holds.
* the **methods** (``--methods``): every formulation chapter 09 counts
  (:data:`METHODS`) on a few shapes, each over ``copy_`` and
  over the transformers formula, ``clone`` beside ``copy_`` to show what
  allocation costs.

The goals live in a JSON file (``--goals``, default the one shipped in
``ropelab/data``), not in code. ``--json PATH`` writes the machine, the
results and the goals' verdicts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import Tensor

from .frequencies import inv_freq
from .bench_machine import isa_summary, kernel_summary, machine_info
from .kernels import rotate_into
from .matrix import rotation_matrix
from .rotary import apply_rotary, cos_sin

__all__ = [
    "DEFAULT_GOALS",
    "DEFAULT_SHAPES",
    "GridResult",
    "Result",
    "Verdict",
    "format_grid",
    "format_table",
    "format_verdicts",
    "kernel_summary",
    "load",
    "isa_summary",
    "load_goals",
    "load_gpu_goals",
    "machine_info",
    "main",
    "run",
    "run_grid",
    "verdicts",
]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
# The formulations --methods times (chapter 09 counts their bytes:
# ropelab.book.cost.cost_model).
METHODS: tuple[str, ...] = (
    "copy_",
    "clone",
    "hf",
    "complex",
    "dense_R",
    "ropelab_half_split",
    "ropelab_interleaved",
    "ropelab_half_split_out",
    "ropelab_interleaved_out",
    "torch_half_split_out",
    "torch_interleaved_out",
)
DEFAULT_SHAPES: tuple[tuple[int, int, int, int], ...] = (
    (1, 32, 4096, 128),
    (8, 32, 512, 128),
    (64, 32, 1, 128),
)
DENSE_R_LIMIT_BYTES = 64 * 2**20  # skip dense R when its (seq, d, d) table exceeds this
SAMPLE_SECONDS = (
    2e-3  # one timed sample runs a candidate often enough to last about this long
)
DATA = Path(__file__).parent / "data"
DEFAULT_GOALS = DATA / "bench_goals.json"


# Timing -------------------------------------------------------------------------------


def _sample(device: torch.device, fn: Callable[[], object], number: int) -> float:
    if device.type == "cuda":
        begin, end = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        fn()  # untimed, as on the CPU
        torch.cuda.synchronize(device)
        begin.record()
        for _ in range(number):
            fn()
        end.record()
        torch.cuda.synchronize(device)
        return begin.elapsed_time(end) / 1e3 / number
    fn()  # untimed: the caches hold what this candidate left, not what the last one did
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_interleaved(
    device: torch.device,
    fns: dict[str, Callable[[], object]],
    *,
    rounds: int = 10,
    min_time: float = 0.5,
) -> dict[str, tuple[float, float, int]]:
    """Time several candidates in interleaved rounds: name -> (fastest, median seconds
    per call, calls).

    Each round samples every candidate once, in turn, so that a change of
    load hits them alike. A sample calls the candidate once untimed, so that
    it starts from the caches its own calls leave rather than from those of
    the candidate before it (on a 32 MiB tensor that made a ratio 1.23x in one
    order and 1.54x in the other), then times ``number`` back-to-back calls
    (``number`` chosen so a sample lasts about :data:`SAMPLE_SECONDS`, as
    ``timeit`` does); rounds continue until ``rounds`` are done and
    ``min_time`` seconds have passed (at most 200 rounds).
    """
    numbers = {}
    for name, fn in fns.items():  # warm-up, and a first estimate
        first = min(_sample(device, fn, 1) for _ in range(3))
        numbers[name] = max(1, int(SAMPLE_SECONDS / max(first, 1e-7)))
    times: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    while len(times[next(iter(fns))]) < rounds or (
        time.perf_counter() - start < min_time and len(times[next(iter(fns))]) < 200
    ):
        for name, fn in fns.items():
            times[name].append(_sample(device, fn, numbers[name]))
    return {
        name: (min(t), statistics.median(t), len(t) * numbers[name])
        for name, t in times.items()
    }


# The methods --------------------------------------------------------------------------


@dataclass
class Result:
    """One method on one (shape, dtype): its fastest and median seconds per call on q
    and k, and ratios."""

    shape: tuple[int, ...]
    dtype: str
    method: str
    best_s: float | None
    median_s: float | None
    runs: int
    ratio_floor: float | None = None  # best_s over copy_'s best_s
    ratio_hf: float | None = None  # best_s over the transformers formula's
    note: str = ""


def _hf_rotate_half(x: Tensor) -> Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _hf(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """transformers' formula as its LLaMA code writes it."""
    return x * cos + _hf_rotate_half(x) * sin


def _methods(
    q: Tensor, k: Tensor, device: torch.device
) -> dict[str, tuple[Callable[[], object] | None, str]]:
    """name -> (zero-argument callable rotating q and k, or None when skipped; note)."""
    seq, dim = q.shape[-2], q.shape[-1]
    theta = inv_freq(dim).to(device)
    pos = torch.arange(seq, device=device)
    cos_h, sin_h = cos_sin(pos, theta, dtype=q.dtype)
    cos_i, sin_i = cos_sin(pos, theta, layout="interleaved", dtype=q.dtype)
    freqs_cis = torch.polar(
        torch.ones(seq, dim // 2, device=device), pos.float()[:, None] * theta
    )
    out_q, out_k = torch.empty_like(q), torch.empty_like(k)

    def meta_complex(x: Tensor) -> Tensor:
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x)

    def ropelab(layout: str, out: bool) -> Callable[[], object]:
        c, s = (cos_h, sin_h) if layout == "half_split" else (cos_i, sin_i)
        if out:
            return lambda: (
                apply_rotary(q, c, s, layout=layout, out=out_q),
                apply_rotary(k, c, s, layout=layout, out=out_k),
            )
        return lambda: (
            apply_rotary(q, c, s, layout=layout),
            apply_rotary(k, c, s, layout=layout),
        )

    def torch_path(layout: str) -> Callable[[], object]:
        c, s = (cos_h, sin_h) if layout == "half_split" else (cos_i, sin_i)
        return lambda: (
            rotate_into(out_q, q, c, s, layout, native=False),
            rotate_into(out_k, k, c, s, layout, native=False),
        )

    methods: dict[str, tuple[Callable[[], object] | None, str]] = {
        "copy_": (
            lambda: (out_q.copy_(q), out_k.copy_(k)),
            "the floor: into preallocated buffers",
        ),
        "clone": (lambda: (q.clone(), k.clone()), "the same bytes into fresh tensors"),
        "hf": (
            lambda: (_hf(q, cos_h, sin_h), _hf(k, cos_h, sin_h)),
            "x*cos + rotate_half(x)*sin",
        ),
        "complex": (
            lambda: (meta_complex(q), meta_complex(k)),
            "Meta's view_as_complex, in float32",
        ),
    }
    r_bytes = seq * dim * dim * q.element_size()
    if r_bytes <= DENSE_R_LIMIT_BYTES:
        r = torch.stack(
            [rotation_matrix(m, theta, layout="interleaved") for m in range(seq)]
        ).to(q.dtype)  # (seq, d, d)
        dense = lambda: (
            torch.einsum("sij,...sj->...si", r, q),
            torch.einsum("sij,...sj->...si", r, k),
        )  # noqa: E731
        methods["dense_R"] = (dense, "R_m @ x_m, interleaved")
    else:
        methods["dense_R"] = (
            None,
            f"skipped: the (seq, d, d) table would take {r_bytes / 2**20:.0f} MiB",
        )
    for layout in ("half_split", "interleaved"):
        methods[f"ropelab_{layout}"] = (ropelab(layout, False), "")
    for layout in ("half_split", "interleaved"):
        methods[f"ropelab_{layout}_out"] = (ropelab(layout, True), "")
    for layout in ("half_split", "interleaved"):
        methods[f"torch_{layout}_out"] = (
            torch_path(layout),
            "torch path (GPU, no compiler)",
        )
    return {name: methods[name] for name in METHODS}


def run(
    shapes: Sequence[Sequence[int]] = DEFAULT_SHAPES,
    dtypes: Sequence[str] = ("float32",),
    device: str | torch.device = "cpu",
    *,
    min_runs: int = 10,
    min_time: float = 0.5,
    progress: Callable[[str], None] | None = None,
) -> list[Result]:
    """Time every method of :data:`METHODS` for every shape and dtype,
    rotating q and k.

    On a CUDA device these are timed with CUDA events over back-to-back
    calls (host included); the GPU's own goals, with GPU and host time apart
    and the GPU's other kernels, are :mod:`ropelab.bench_gpu`'s.
    """
    device = torch.device(device)
    results: list[Result] = []
    total = len(shapes) * len(dtypes)
    for i, (shape, dtype_name) in enumerate(
        ((s, d) for s in shapes for d in dtypes), start=1
    ):
        if len(shape) < 2 or shape[-1] % 2:
            raise ValueError(
                f"--shape must be (..., seq, dim) with an even dim, got {tuple(shape)}"
            )
        dtype = DTYPES[dtype_name]
        g = torch.Generator(device="cpu").manual_seed(0)
        q = torch.randn(*shape, generator=g).to(device=device, dtype=dtype)
        k = torch.randn(*shape, generator=g).to(device=device, dtype=dtype)
        methods = _methods(q, k, device)
        if progress:
            progress(
                f"[{i}/{total}] {tuple(shape)} {dtype_name}: {len(methods)} methods, "
                "interleaved"
            )
        # the dense product runs on a BLAS whose threads keep spinning for a while
        # after each call, which would slow whatever runs next: it is timed on its
        # own, after the others
        timed = time_interleaved(
            device,
            {
                n: fn
                for n, (fn, _) in methods.items()
                if fn is not None and n != "dense_R"
            },
            rounds=min_runs,
            min_time=min_time,
        )
        if methods["dense_R"][0] is not None:
            timed.update(
                time_interleaved(
                    device,
                    {"dense_R": methods["dense_R"][0]},
                    rounds=min_runs,
                    min_time=min_time,
                )
            )
        floor, hf = timed["copy_"][0], timed["hf"][0]
        for name, (fn, note) in methods.items():
            best, median, runs = timed.get(name, (None, None, 0))
            results.append(
                Result(
                    tuple(shape),
                    dtype_name,
                    name,
                    best,
                    median,
                    runs,
                    None if best is None else best / floor,
                    None if best is None else best / hf,
                    note,
                )
            )
        del q, k, methods
    return results


def format_table(results: Sequence[Result]) -> str:
    """A plain-text table of the methods: fastest time, ratio to copy_ and to the
    transformers formula."""
    lines = [
        (
            f"{'shape':<20} {'dtype':<9} {'method':<24} {'time':>10} {'x copy_':>8} "
            f"{'x hf':>7}  note"
        )
    ]
    for r in results:
        t = "-" if r.best_s is None else f"{r.best_s * 1e3:8.3f}ms"
        ratio_f = "-" if r.ratio_floor is None else f"{r.ratio_floor:.2f}"
        ratio_h = "-" if r.ratio_hf is None else f"{r.ratio_hf:.2f}"
        lines.append(
            f"{str(r.shape):<20} {r.dtype:<9} {r.method:<24} {t:>10} {ratio_f:>8} "
            f"{ratio_h:>7}  {r.note}"
        )
    return "\n".join(lines)


# The grid and its goals ---------------------------------------------------------------

ORDERS = {"heads": "(batch, heads, seq, dim)", "positions": "(batch, seq, heads, dim)"}


@dataclass
class GridResult:
    """``apply_rotary`` on one configuration over its baseline: ``copy_`` (prefill) or
    the transformers formula."""

    dtype: str
    layout: str
    order: str  # "heads" (heads before positions) or "positions"
    shape: tuple[int, ...]
    call: str  # "out" (apply_rotary(..., out=)) or "new" (apply_rotary(...))
    against: str  # "copy_" or "hf"
    seconds: float
    baseline_s: float
    ratio: float


def load_goals(path: str | os.PathLike = DEFAULT_GOALS) -> list[dict]:
    """The goals file: a list of goals, each naming dtypes, layouts, orders, shapes,
    calls, a baseline and a limit."""
    with open(path) as f:
        goals = json.load(f)["goals"]
    for g in goals:
        missing = {
            "name",
            "dtypes",
            "layouts",
            "orders",
            "shapes",
            "calls",
            "against",
            "limit",
        } - set(g)
        if missing:
            raise ValueError(
                f"goal {g.get('name', g)!r} in {path} lacks {sorted(missing)}"
            )
    return goals


def load_gpu_goals(path: str | os.PathLike = DEFAULT_GOALS) -> list[dict]:
    """The goals file's ``gpu_goals``: each names methods, seqs, a measure and a limit
    (see :func:`ropelab.bench_gpu.gpu_verdicts`)."""
    with open(path) as f:
        goals = json.load(f).get("gpu_goals", [])
    for g in goals:
        missing = {"name", "methods", "seqs", "measure", "limit"} - set(g)
        if missing:
            raise ValueError(
                f"GPU goal {g.get('name', g)!r} in {path} lacks {sorted(missing)}")
    return goals


def _grid_tensors(
    shape: Sequence[int],
    order: str,
    layout: str,
    dtype: torch.dtype,
    device: torch.device,
):
    """x of ``shape`` = (batch, heads, seq, dim) laid out in ``order``, and tables that
    broadcast against it."""
    return (
        _grid_x(shape, order, dtype, device),
        *_grid_tables(shape, order, layout, dtype, device),
    )


def _grid_x(
    shape: Sequence[int], order: str, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """Random x of ``shape`` = (batch, heads, seq, dim), stored in ``order``."""
    b, h, s, d = shape
    g = torch.Generator(device="cpu").manual_seed(0)
    sizes = (b, h, s, d) if order == "heads" else (b, s, h, d)
    return torch.randn(sizes, generator=g).to(device, dtype)


def _grid_tables(
    shape: Sequence[int],
    order: str,
    layout: str,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    """cos and sin for :func:`_grid_tensors`' x: ``(seq, dim)``, or ``(seq, 1, dim)``
    when the positions come before the heads."""
    s, d = shape[2], shape[3]
    positions = torch.arange(s, device=device)
    cos, sin = cos_sin(positions, inv_freq(d).to(device), layout=layout, dtype=dtype)
    return (cos, sin) if order == "heads" else (cos[:, None], sin[:, None])


def run_grid(
    goals: Sequence[dict],
    dtypes: Sequence[str] | None = None,
    device: str | torch.device = "cpu",
    *,
    min_runs: int = 10,
    min_time: float = 0.3,
    progress: Callable[[str], None] | None = None,
) -> list[GridResult]:
    """Measure every configuration the goals name (restricted to ``dtypes`` if
    given)."""
    device = torch.device(device)
    results: list[GridResult] = []
    configs = []
    for g in goals:
        for dtype in g["dtypes"]:
            if dtypes and dtype not in dtypes:
                continue
            for order in g["orders"]:
                for shape in g["shapes"]:
                    key = (
                        dtype,
                        order,
                        tuple(shape),
                        g["against"],
                        tuple(g["calls"]),
                        tuple(g["layouts"]),
                    )
                    if key not in configs:
                        configs.append(key)
    for i, (dtype_name, order, shape, against, calls, layouts) in enumerate(
        configs, start=1
    ):
        if progress:
            progress(f"[{i}/{len(configs)}] {dtype_name} {order} {shape}")
        dtype = DTYPES[dtype_name]
        fns: dict[str, Callable[[], object]] = {}
        # one x and one out for every candidate and for the floor, which is only the
        # floor of the buffers it copies: in one run copy_ of the same bytes took 2.6
        # ms for one shape, 1.4 ms for another
        x = _grid_x(shape, order, dtype, device)
        out = torch.empty_like(x)
        for layout in layouts:
            cos, sin = _grid_tables(shape, order, layout, dtype, device)
            for call in calls:
                if call == "out":
                    fns[f"{layout}/out"] = lambda x=x, c=cos, s=sin, o=out, l=layout: (
                        apply_rotary(x, c, s, layout=l, out=o)
                    )
                else:
                    fns[f"{layout}/new"] = lambda x=x, c=cos, s=sin, l=layout: (
                        apply_rotary(x, c, s, layout=l)
                    )
        if against == "copy_":
            fns["base"] = lambda x=x, o=out: o.copy_(x)
        else:
            # the transformers formula on the heads-first layout, its half-split tables
            xb, cb, sb = _grid_tensors(shape, "heads", "half_split", dtype, device)
            fns["base"] = lambda: _hf(xb, cb, sb)
        timed = time_interleaved(device, fns, rounds=min_runs, min_time=min_time)
        base = timed.pop("base")[0]
        for name, (best, _, _) in timed.items():
            layout, call = name.split("/")
            results.append(
                GridResult(
                    dtype_name,
                    layout,
                    order,
                    tuple(shape),
                    call,
                    against,
                    best,
                    base,
                    best / base,
                )
            )
        del fns, x, out
    return results


@dataclass
class Verdict:
    """One goal on one measured configuration."""

    goal: str
    result: GridResult
    limit: float
    holds: bool = field(init=False)

    def __post_init__(self) -> None:
        self.holds = self.result.ratio <= self.limit


def verdicts(goals: Sequence[dict], results: Sequence[GridResult]) -> list[Verdict]:
    """Each goal against the measured configurations it covers."""
    found = []
    for g in goals:
        for r in results:
            if (
                r.dtype in g["dtypes"]
                and r.layout in g["layouts"]
                and r.order in g["orders"]
                and list(r.shape) in [list(s) for s in g["shapes"]]
                and r.call in g["calls"]
                and r.against == g["against"]
            ):
                found.append(Verdict(g["name"], r, float(g["limit"])))
    return found


def format_grid(results: Sequence[GridResult]) -> str:
    """The grid as the issue of record states it: one row per (dtype, layout, order),
    one column per length."""
    lines = []
    prefill = [r for r in results if r.against == "copy_"]
    seqs = sorted({r.shape[2] for r in prefill})
    if prefill:
        b, h, _, d = prefill[0].shape
        lines.append(
            f"apply_rotary(..., out=) / out.copy_(x): batch {b}, {h} heads of {d}, S "
            "positions"
        )
        lines.append(
            f"{'dtype':<9} {'layout':<12} {'x':<26}"
            + "".join(f"{'S = ' + format(s, ','):>13}" for s in seqs)
        )
        rows = dict.fromkeys((r.dtype, r.layout, r.order) for r in prefill)
        for dtype, layout, order in rows:
            cells = {
                r.shape[2]: r.ratio
                for r in prefill
                if (r.dtype, r.layout, r.order) == (dtype, layout, order)
            }
            lines.append(
                f"{dtype:<9} {layout:<12} {ORDERS[order]:<26}"
                + "".join(
                    f"{cells[s]:12.2f}x" if s in cells else f"{'-':>13}" for s in seqs
                )
            )
    for r in results:
        if r.against == "hf":
            call = "apply_rotary(..., out=)" if r.call == "out" else "apply_rotary(...)"
            lines.append(
                f"decode {r.shape} {r.dtype} {r.layout:<12} {call:<24} / transformers "
                f"formula: {r.ratio:.2f}x"
            )
    return "\n".join(lines)


def format_verdicts(found: Sequence[Verdict]) -> str:
    """One line per goal and configuration: ratio, limit, holds or not; and the
    count."""
    lines = []
    for v in found:
        r = v.result
        lines.append(
            f"{v.goal:<22} {r.dtype:<9} {r.layout:<12} {r.order:<10} S={r.shape[2]:<6} "
            f"{r.call:<4} {r.ratio:5.2f}x {r.against:<6} (<= {v.limit:.2f}x): "
            f"{'holds' if v.holds else 'DOES NOT HOLD'}"
        )
    lines.append(f"{sum(v.holds for v in found)} of {len(found)} hold")
    return "\n".join(lines)


# The results file ---------------------------------------------------------------------


def load(
    path: str | os.PathLike,
) -> tuple[dict, list[Result], list[GridResult], list[dict]]:
    """Read a file written by ``--json``:
    ``(machine, method results, grid results, goals)``."""
    with open(path) as f:
        data = json.load(f)
    results = [
        Result(**{**r, "shape": tuple(r["shape"])}) for r in data.get("results", [])
    ]
    grid = [
        GridResult(**{**r, "shape": tuple(r["shape"])}) for r in data.get("grid", [])
    ]
    return data["machine"], results, grid, data.get("goals", [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ropelab.bench", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--grid", action="store_true",
        help="measure the goals' grid (the default on a CPU)")
    add("--methods", action="store_true", help="time every formulation on --shape")
    add("--goals", default=str(DEFAULT_GOALS), help="goals file (JSON)")
    add("--device", default="cpu",
        help="cpu (default), cuda, cuda:N (on CUDA: GPU and host time, GPU goals)")
    add("--dtype", action="append", choices=sorted(DTYPES),
        help="repeatable; default: the goals' dtypes (grid), float32 (methods)")
    add("--shape", action="append", help="for --methods: e.g. 1,32,4096,128")
    add("--threads", type=int, help="torch threads (default: torch's)")
    add("--json", metavar="PATH", help="also write machine, results, verdicts")
    add("--min-runs", type=int, default=10, help="interleaved rounds at least")
    add("--min-time", type=float, default=0.5, help="seconds a configuration at least")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            f"ropelab.bench: --device {args.device} asked for CUDA, but this torch "
            f"({torch.__version__}) sees no CUDA device; run with --device cpu",
            file=sys.stderr,
        )
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    grid_wanted = args.grid or (not args.methods and device.type != "cuda")
    info = machine_info(device)
    print(
        "ropelab.bench on " + ", ".join(f"{k}={v}" for k, v in info.items()), flush=True
    )

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    data: dict[str, object] = {"machine": info}
    if device.type == "cuda":
        from . import bench_gpu

        records = bench_gpu.run_gpu(device, args.dtype or ["float32", "bfloat16"],
                                    progress=progress)
        gpu_goals = load_gpu_goals(args.goals)
        print(bench_gpu.format_gpu(records))
        print(bench_gpu.format_gpu_verdicts(bench_gpu.gpu_verdicts(gpu_goals, records)))
        data["gpu"] = [asdict(r) for r in records]
        data["gpu_goals"] = gpu_goals
    if args.methods:
        shapes = (
            [tuple(int(v) for v in s.split(",")) for s in args.shape]
            if args.shape
            else list(DEFAULT_SHAPES)
        )
        results = run(
            shapes,
            args.dtype or ["float32"],
            device,
            min_runs=args.min_runs,
            min_time=args.min_time,
            progress=progress,
        )
        print(format_table(results))
        data["results"] = [asdict(r) for r in results]
    if grid_wanted:
        goals = load_goals(args.goals)
        grid = run_grid(
            goals,
            args.dtype,
            device,
            min_runs=args.min_runs,
            min_time=args.min_time,
            progress=progress,
        )
        found = verdicts(goals, grid)
        print(format_grid(grid))
        print(format_verdicts(found))
        data["grid"] = [asdict(r) for r in grid]
        data["goals"] = goals
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
