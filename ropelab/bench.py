"""``python -m ropelab.bench``: what each way of applying RoPE costs, against the memory floor (09_performance).

RoPE moves memory and does almost no arithmetic, so every method is timed
next to the copy that reads and writes the same bytes: ``q.clone(); k.clone()``
for methods that return new tensors, ``out.copy_(x)`` for methods that write
into preallocated ones. The table reports medians and each method's ratio to
its floor and to the plain transformers formula ``x*cos + rotate_half(x)*sin``.
Absolute times depend on the machine and its load; the ratios are what
reproduces. The header says whether the fused kernel is in use and, when
this run compiled it, how long the compile took (it is cached per machine).

Methods (all rotate q and k, with cos/sin tables built once beforehand):

* ``copy``, ``copy_out``: the floors.
* ``hf``: ``q*cos + rotate_half(q)*sin`` written out in plain torch.
* ``ropelab_half_split``, ``ropelab_interleaved``: :func:`ropelab.apply_rotary`
  (on the CPU its fused C kernel, see :mod:`ropelab.kernels.cpu`).
* ``ropelab_half_split_out``, ``ropelab_interleaved_out``: the same with ``out=``.
* ``torch_half_split_out``, ``torch_interleaved_out``: ropelab's torch path
  with ``out=``, the one a GPU, a machine without a C compiler or a traced
  call gets.
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
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import Tensor

from .frequencies import inv_freq
from .matrix import rotation_matrix
from .kernels import kernel_status, rotate_into as _rotate_into
from .rotary import apply_rotary, cos_sin

__all__ = [
    "Cost",
    "DEFAULT_SHAPES",
    "METHODS",
    "Result",
    "Target",
    "Traffic",
    "cost_model",
    "format_table",
    "kernel_summary",
    "load",
    "machine_info",
    "main",
    "run",
    "targets",
    "trace_traffic",
]

DEFAULT_SHAPES: tuple[tuple[int, int, int, int], ...] = ((1, 32, 4096, 128), (8, 32, 512, 128), (64, 32, 1, 128))
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
DENSE_R_LIMIT_BYTES = 64 * 2**20  # skip dense R when its (seq, d, d) table exceeds this
METHODS: tuple[str, ...] = (
    "copy", "copy_out", "hf", "ropelab_half_split", "ropelab_interleaved",
    "ropelab_half_split_out", "ropelab_interleaved_out", "torch_half_split_out", "torch_interleaved_out",
    "complex", "dense_R",
)


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


# The cost model (09_performance) ----------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """What one method costs per token-head (one d-vector of q or k), as :func:`cost_model` counts it."""

    method: str
    dim: int
    dtype: str
    itemsize: int
    bytes_read: int  # x-sized data read from memory: x and every full-size temporary
    bytes_written: int  # x-sized data written: the result and every full-size temporary
    flops: int  # multiplications and additions (a fused multiply-add counts 2, a sign flip 0)
    passes: int  # operations that read or write x-sized data (kernels, in eager mode)
    table_elems: int  # table entries (cos, sin, phasors or R) read, from cache (see cost_model)

    @property
    def bytes_moved(self) -> int:
        """bytes_read + bytes_written."""
        return self.bytes_read + self.bytes_written

    @property
    def floor_bytes(self) -> int:
        """The memory floor 2·d·itemsize: read x once, write the result once (eq. ``perf-floor``)."""
        return 2 * self.dim * self.itemsize

    @property
    def ratio_floor(self) -> float:
        """bytes_moved / floor_bytes: how many copies' worth of memory traffic."""
        return self.bytes_moved / self.floor_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, flops per byte moved (eq. ``perf-intensity``)."""
        return self.flops / self.bytes_moved


def _dtype_name(dtype: str | torch.dtype) -> str:
    if isinstance(dtype, torch.dtype):
        names = {v: k for k, v in DTYPES.items()}
        if dtype not in names:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype}")
        return names[dtype]
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    return dtype


def cost_model(dim: int, dtype: str | torch.dtype = "float32", *, method: str) -> Cost:
    """Bytes moved, flops and passes over x per token-head for one way of applying RoPE (09_performance).

    ``method`` is one of :data:`METHODS`, the names :func:`run` times. With
    s = itemsize of ``dtype`` and d = ``dim``, per token-head:

    * ``copy``, ``copy_out``: read x, write the result: 2ds bytes, the floor
      (eq. ``perf-floor``), 1 pass, 0 flops.
    * ``hf``: ``x*cos + rotate_half(x)*sin`` in eager torch: five operations,
      each reading its inputs from memory and writing its result there:
      x·cos (d read, d written), −x₂ (d/2, d/2), cat (d, d), ·sin (d, d),
      the sum (2d, d): 5.5ds read + 4.5ds written = 10ds, five times the
      floor (eq. ``perf-hf``).
    * ``complex`` (Meta's ``apply_rotary_emb``): upcast to float32, view the
      pairs as complex, multiply by the phasor table, view as real, cast
      back. For float32 the casts are no-ops: one pass, 2·4d bytes. Otherwise
      three passes: upcast (sd read, 4d written), multiply (4d, 4d), cast back
      (4d, sd): (16 + 2s)d bytes (eq. ``perf-complex``).
    * ``ropelab_*`` (both layouts, with or without ``out=``): ropelab's
      fused kernel reads each row of x once and writes each output once:
      2ds bytes, 1 pass, the floor, in every dtype (eq. ``perf-fused``).
      This is the CPU with a C compiler; elsewhere ``apply_rotary`` takes
      its torch path, whose costs are the ``torch_*`` rows.
    * ``torch_interleaved_out`` in float32/float64: one complex
      multiplication straight into the result, 2ds bytes, 1 pass (the
      floor). In bfloat16/float16 (no complex type): upcast (sd read, 4d
      written), an in-place complex multiplication (4d, 4d) and one rounding
      back (4d, sd): (16 + 2s)d bytes, 3 passes, like ``complex``.
    * ``torch_half_split_out``: ``out = x·cos`` (d read, d written), then
      two in-place fused multiply-adds on the halves, ``out₁ −= x₂·sin₁``
      and ``out₂ += x₁·sin₂`` (each d/2 of out and d/2 of x read, d/2
      written): 3ds read + 2ds written = 5ds, 3 passes (eq. ``perf-torch``).
      On the CPU the torch path runs the three passes block by block over
      cache-sized blocks of rows, so of those 5ds only about the floor's 2ds
      cross the memory bus; the model counts what the operations touch.
    * ``dense_R``: ``R_m @ x_m``: reads x, writes the result (2ds), but
      d(2d − 1) flops (04_rotation_matrix, eq. ``rmat-flops``) and d² table
      entries.

    Assumptions: nothing x-sized stays in cache between two operations (true
    when q and k are much larger than the cache; small decode batches break
    it, and then per-call overhead dominates). Bytes count the elements an
    operation touches; a strided half (the interleaved even/odd channels in
    the 3-pass path) touches every cache line of x, so hardware that moves
    whole lines moves up to twice those bytes. The tables (cos and sin
    ``(seq, d)``, the phasors ``(seq, d/2)``, R ``(seq, d, d)``) broadcast
    over batch and heads: a table row is read from memory once per token and
    from cache for every other head, so ``table_elems`` (entries read per
    token-head) is reported but not counted in the bytes; building the
    phasor table (ropelab's interleaved path, once per call and token) is
    not counted either. Allocation (``empty_like``) moves no data. Flops
    count multiplications and additions; a complex multiplication is 4 + 2,
    sign flips and dtype casts are free.

    Args:
        dim: head dimension d (positive, even).
        dtype: the dtype of x (a name in :data:`DTYPES` or a torch.dtype).
        method: one of :data:`METHODS`.

    Returns:
        A :class:`Cost` (integers per token-head, bytes in x's itemsize).
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even int, got {dim!r}")
    name = _dtype_name(dtype)
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    d, s = dim, DTYPES[name].itemsize
    wide = name in ("float32", "float64")
    if method in ("copy", "copy_out"):
        read, written, flops, passes, table = d * s, d * s, 0, 1, 0
    elif method == "hf":
        # x*cos, -x2, cat(-x2, x1), rotate_half(x)*sin, the sum
        read = (d + d // 2 + d + d + 2 * d) * s
        written = (d + d // 2 + d + d + d) * s
        flops, passes, table = 3 * d, 5, 2 * d
    elif method == "complex":
        flops, table = 3 * d, d  # 6 flops per complex product; d/2 complex phasors
        if name == "float32":
            read, written, passes = 4 * d, 4 * d, 1
        else:  # upcast, multiply in complex64, cast back
            read, written, passes = s * d + 4 * d + 4 * d, 4 * d + 4 * d + s * d, 3
    elif method == "dense_R":
        read, written, flops, passes, table = d * s, d * s, d * (2 * d - 1), 1, d * d
    elif method.startswith("ropelab_"):  # the fused kernel: one pass, whole cos and sin rows
        read, written, flops, passes, table = d * s, d * s, 3 * d, 1, 2 * d
    elif method.startswith("torch_interleaved") and wide:
        read, written, flops, passes, table = d * s, d * s, 3 * d, 1, d
    elif method.startswith("torch_interleaved"):  # upcast, complex multiply in place, round back
        read, written, flops, passes, table = s * d + 4 * d + 4 * d, 4 * d + 4 * d + s * d, 3 * d, 3, d
    else:  # out = x*cos; out_1 -= x_2*sin_1; out_2 += x_1*sin_2
        read = (d + d // 2 + d // 2 + d // 2 + d // 2) * s
        written = (d + d // 2 + d // 2) * s
        flops, passes, table = 3 * d, 3, 2 * d
    return Cost(method, d, name, s, read, written, flops, passes, table)


_NO_DATA = frozenset({"empty_like", "empty", "empty_strided", "new_empty", "new_empty_strided"})


@dataclass(frozen=True)
class Traffic:
    """Memory traffic of a traced call: totals over all its inputs (see :func:`trace_traffic`)."""

    bytes_read: int
    bytes_written: int
    ops: tuple[str, ...]  # the operations that touched x-sized data, in order

    @property
    def passes(self) -> int:
        """How many operations read or wrote x-sized data."""
        return len(self.ops)


def trace_traffic(fn: Callable[[], object], *inputs: Tensor) -> Traffic:
    """Run ``fn()`` and add up the bytes each torch operation reads and writes of data derived from ``inputs``.

    An independent check of :func:`cost_model`: instead of counting by hand,
    it watches every operation torch dispatches (``TorchDispatchMode``).
    Data derived from ``inputs`` (q and k, their views, every temporary
    computed from them, every buffer written from them) is tracked by
    storage; for each operation that reads tracked data it counts the bytes
    of its tracked inputs as read and of its results as written. Views move
    nothing; operations on the tables alone (casting cos, building phasors)
    and allocations are not counted, as in the cost model. An in-place
    operation reads and writes its target; ``copy_`` and ``out=`` only write.

    Args:
        fn: a zero-argument callable, e.g. ``lambda: apply_rotary(q, cos, sin)``.
        inputs: the x-sized tensors ``fn`` reads.

    Returns:
        A :class:`Traffic` with the totals (divide by the number of
        token-heads for per-token-head bytes).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    def storage(t: Tensor) -> int:
        return t.untyped_storage().data_ptr()

    tracked = {storage(t) for t in inputs}
    alive: list[Tensor] = []  # keep every written tensor alive, so no later tensor reuses its address
    counts = {"read": 0, "written": 0}
    ops: list[str] = []

    class Tracer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            schema = func._schema
            name = func.overloadpacket.__name__
            if name in _NO_DATA:
                return result  # allocations read no data
            if all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns) and schema.returns:
                return result  # a view: no data moves
            read: list[Tensor] = []
            written: list[Tensor] = []
            for i, arg in enumerate(schema.arguments):
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                tensors = [v for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, Tensor)]
                is_write = arg.alias_info is not None and arg.alias_info.is_write
                write_only = is_write and (arg.kwarg_only or name == "copy_")
                if is_write:
                    written.extend(tensors)
                if not write_only:
                    read.extend(tensors)
            if not any(r.alias_info is not None for r in schema.returns):  # fresh results
                outs = result if isinstance(result, (list, tuple)) else [result]
                written.extend(t for t in outs if isinstance(t, Tensor))
            read_tracked = [t for t in read if storage(t) in tracked]
            if not read_tracked:
                return result  # tables, allocations
            counts["read"] += sum(t.numel() * t.element_size() for t in read_tracked)
            counts["written"] += sum(t.numel() * t.element_size() for t in written)
            tracked.update(storage(t) for t in written)
            alive.extend(written)
            ops.append(name)
            return result

    with Tracer():
        fn()
    return Traffic(counts["read"], counts["written"], tuple(ops))


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
        info["kernel"] = "not used on cuda: apply_rotary takes its torch path"
    else:
        info["kernel"] = kernel_summary()
    return info


def kernel_summary() -> str:
    """One line on ropelab's fused CPU kernel: compiled now (and how long it took), cached, or why not."""
    st = kernel_status()
    if not st["available"]:
        return f"unavailable ({st['reason']}): apply_rotary takes its torch path"
    threads = "OpenMP threads" if st["openmp"] else "one thread"
    how = f"compiled in {st['compile_s']:.2f} s" if st["compile_s"] is not None else "loaded from cache"
    return f"fused C kernel, {how}, {threads}, {', '.join(st['dtypes'])}"


SAMPLE_SECONDS = 2e-3  # one timed sample runs the method often enough to last about this long


def _timer(device: torch.device, fn: Callable[[], object], *, min_runs: int, min_time: float) -> tuple[float, int]:
    """Median seconds per call of ``fn`` after warm-up: CUDA events on a GPU, perf_counter on the CPU.

    Each sample times ``number`` back-to-back calls, with ``number`` chosen
    so that a sample lasts about :data:`SAMPLE_SECONDS` (1 for anything
    slower), as ``timeit`` does: a decoding step of a fraction of a
    millisecond is otherwise dominated by timer and scheduling jitter.
    Returns the median over samples and the number of calls timed.
    """

    def sample(number: int) -> float:
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            begin.record()
            for _ in range(number):
                fn()
            end.record()
            torch.cuda.synchronize(device)
            return begin.elapsed_time(end) / 1e3 / number
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number

    first = min(sample(1) for _ in range(3))  # warm-up, and a first estimate
    number = max(1, int(SAMPLE_SECONDS / max(first, 1e-7)))
    times: list[float] = []
    start_all = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start_all < min_time and len(times) < 1000):
        times.append(sample(number))
    return statistics.median(times), len(times) * number


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
        "torch_half_split_out": (
            "copy_out",
            lambda: (_rotate_into(out_q, q, cos_h, sin_h, "half_split", native=False),
                     _rotate_into(out_k, k, cos_h, sin_h, "half_split", native=False)),
            "torch path (GPU, no compiler)",
        ),
        "torch_interleaved_out": (
            "copy_out",
            lambda: (_rotate_into(out_q, q, cos_i, sin_i, "interleaved", native=False),
                     _rotate_into(out_k, k, cos_i, sin_i, "interleaved", native=False)),
            "torch path (GPU, no compiler)",
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


# The results chapter 09 reads, written by
# `python -m ropelab.bench --dtype float32 --dtype bfloat16 --json ropelab/data/bench_cpu.json`;
# shipped inside the package so that the chapter also runs in a hosted notebook.
REFERENCE_RESULTS = Path(__file__).parent / "data" / "bench_cpu.json"


def load(path: str | os.PathLike) -> tuple[dict[str, object], list[Result]]:
    """Read a results file written by ``--json``: ``(machine, results)``, shapes as tuples."""
    with open(path) as f:
        data = json.load(f)
    results = [Result(**{**r, "shape": tuple(r["shape"])}) for r in data["results"]]
    return data["machine"], results


PREFILL_SHAPES = DEFAULT_SHAPES[:2]  # many tokens: q and k far larger than any cache
DECODE_SHAPES = DEFAULT_SHAPES[2:]  # one token for each of 64 sequences


@dataclass(frozen=True)
class Target:
    """One performance target: ``method``'s time over ``against``'s must be at most ``limit``."""

    shape: tuple[int, ...]
    dtype: str
    method: str
    against: str  # "floor" (copy or copy_out, the method's own floor) or "hf"
    limit: float
    ratio: float | None  # None when the method was not timed

    @property
    def holds(self) -> bool | None:
        """ratio <= limit, or None when there is no ratio."""
        return None if self.ratio is None else self.ratio <= self.limit


def targets(results: Sequence[Result]) -> list[Target]:
    """The targets ropelab's fast path is built for, evaluated on measured ``results`` (09_performance).

    * float32, prefill shapes: ``ropelab_half_split`` and ``ropelab_interleaved``
      at most 1.5× the copy floor and at most 0.3× the HF formula; their
      ``_out`` variants at most 1.5× ``copy_out``.
    * bfloat16 (every shape) and the decode shape (every dtype): every
      ropelab method no slower than the HF formula (at most 1.0×).

    These are measurements, not guarantees: the book prints whether each holds.
    """
    plain = ("ropelab_half_split", "ropelab_interleaved")
    out = ("ropelab_half_split_out", "ropelab_interleaved_out")
    found: list[Target] = []
    for r in results:
        if r.dtype == "float32" and r.shape in PREFILL_SHAPES:
            if r.method in plain:
                found.append(Target(r.shape, r.dtype, r.method, "floor", 1.5, r.ratio_floor))
                found.append(Target(r.shape, r.dtype, r.method, "hf", 0.3, r.ratio_hf))
            elif r.method in out:
                found.append(Target(r.shape, r.dtype, r.method, "floor", 1.5, r.ratio_floor))
        if r.method in plain + out and (r.dtype == "bfloat16" or r.shape in DECODE_SHAPES):
            found.append(Target(r.shape, r.dtype, r.method, "hf", 1.0, r.ratio_hf))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="repeatable; default float32")
    parser.add_argument("--shape", action="append", help="comma-separated, e.g. 1,32,4096,128; repeatable")
    parser.add_argument("--json", metavar="PATH", help="also write the machine and results as JSON")
    parser.add_argument("--min-runs", type=int, default=10, help="timed samples per method at least (default 10)")
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
