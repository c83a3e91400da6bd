"""What each way of applying RoPE costs in traffic and allocation (09_performance).

RoPE does 3d operations per d-vector and must move at least 2ds bytes (read
x, write the result; s bytes per element), so its cost is memory traffic.
:func:`cost_model` counts, per token-head, the bytes each formulation reads
and writes, the fresh memory it allocates, its operations and its passes
over x; :func:`trace_traffic` counts the same bytes independently, from the
operations torch actually dispatches. Traffic and allocation are kept apart:
``copy_`` into a preallocated buffer moves the floor and allocates nothing,
``clone`` moves the same bytes but also allocates (and, on a CPU, first
touches) a new tensor. The methods are those ``python -m ropelab.bench``
times (:mod:`ropelab.bench`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from ropelab.bench import DTYPES, METHODS

from . import DATA

__all__ = [
    "BENCH_CPU",
    "Cost",
    "DTYPES",
    "METHODS",
    "Traffic",
    "cost_model",
    "trace_traffic",
]

# The results chapter 09 reads, written by
#   python -m ropelab.bench --methods --grid --dtype float32 --dtype bfloat16 \
#       --json ropelab/book/data/bench_cpu.json
# and shipped inside the package so that the chapter also runs in a hosted notebook.
BENCH_CPU = DATA / "bench_cpu.json"


@dataclass(frozen=True)
class Cost:
    """What one method costs per token-head (one d-vector of q or k), as counted."""

    method: str
    dim: int
    dtype: str
    itemsize: int
    bytes_read: int  # x-sized data read from memory: x and every full-size temporary
    bytes_written: int  # x-sized data written: the result and every full-size temporary
    bytes_allocated: (
        int  # fresh memory allocated: the result (unless out=) and every temporary
    )
    flops: int  # multiplications and additions (a sign flip or a cast costs none)
    passes: int  # operations that read or write x-sized data (kernels, in eager mode)
    table_elems: int  # table entries (cos, sin, phasors or R) read per token-head

    @property
    def bytes_moved(self) -> int:
        """bytes_read + bytes_written."""
        return self.bytes_read + self.bytes_written

    @property
    def ratio_floor(self) -> float:
        """bytes_moved over the floor 2·d·itemsize: how many copies of traffic."""
        return self.bytes_moved / (2 * self.dim * self.itemsize)

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
    """Bytes read, written, allocated, flops and passes per token-head (09_performance).

    ``method`` is one of ``ropelab.bench.METHODS``. With s = itemsize and d = ``dim``:

    * ``copy_`` (``out.copy_(x)``): read x, write the result, 1 pass, no
      allocation: the memory floor.
    * ``clone``: the same traffic, plus a fresh ds-byte result.
    * ``hf``: ``x*cos + rotate_half(x)*sin`` in eager torch, five operations
      each reading its inputs from memory and writing a fresh result: x·cos
      (d read, d written), −x₂ (d/2, d/2), cat (d, d), ·sin (d, d), the sum
      (2d, d): 10ds bytes moved, 4.5ds allocated (eq. ``perf-hf``).
    * ``complex`` (Meta's ``apply_rotary_emb``): float32 x is one complex
      multiplication, 2ds moved; other dtypes add an upcast (sd read, 4d
      written) and a cast back (4d, sd) around it (eq. ``perf-complex``).
    * ``dense_R``: ``R_m @ x_m``: 2ds moved, d(2d − 1) flops, d² table entries.
    * ``ropelab_*``: the fused kernel, 2ds in one pass in every layout and
      dtype; ds allocated for the result unless ``out=`` (eq. ``perf-fused``).
      This is the CPU with a C compiler; elsewhere the ``torch_*`` rows apply.
    * ``torch_half_split_out`` and ``torch_interleaved_out``: ``out = x·cos``,
      then ``out_a −= x_b·sin_a`` and ``out_b += x_a·sin_b`` in place for the
      pairs (a, b) of the layout (halves, or even and odd channels): 5ds
      touched in 3 passes (eq. ``perf-torch``), every table entry read where
      the plain formula reads it.

    Assumptions: nothing x-sized stays in cache between two operations; the
    tables, broadcast over batch and heads, are read from cache
    (``table_elems`` reports them, the bytes leave them out); allocation
    moves no data (its cost is measured apart, as ``clone`` − ``copy_``).

    Args:
        dim: head dimension d (positive, even).
        dtype: the dtype of x (a name in ``DTYPES`` or a torch.dtype).
        method: one of ``METHODS``.

    Returns:
        A ``Cost`` (integers per token-head, in bytes of x's dtype).
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even int, got {dim!r}")
    name = _dtype_name(dtype)
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    d, s = dim, DTYPES[name].itemsize
    wide = name in ("float32", "float64")
    new = (
        0 if method.endswith("_out") or method == "copy_" else d * s
    )  # the result, unless out=
    if method in ("copy_", "clone"):
        read, written, alloc, flops, passes, table = d * s, d * s, new, 0, 1, 0
    elif method == "hf":  # x*cos, -x2, cat(-x2, x1), rotate_half(x)*sin, the sum
        read = (d + d // 2 + d + d + 2 * d) * s
        written = alloc = (d + d // 2 + d + d + d) * s
        flops, passes, table = 3 * d, 5, 2 * d
    elif method == "complex":
        flops, table = 3 * d, d  # 6 flops per complex product; d/2 complex phasors
        if name == "float32":
            read, written, alloc, passes = 4 * d, 4 * d, 4 * d, 1
        else:  # upcast, multiply in complex64, cast back
            read, written, passes = s * d + 4 * d + 4 * d, 4 * d + 4 * d + s * d, 3
            alloc = written
    elif method == "dense_R":
        read, written, alloc, flops, passes, table = (
            d * s,
            d * s,
            new,
            d * (2 * d - 1),
            1,
            d * d,
        )
    elif method.startswith("ropelab_"):
        read, written, alloc, flops, passes, table = d * s, d * s, new, 3 * d, 1, 2 * d
    else:  # torch_*_out: out = x*cos; out_a -= x_b*sin_a; out_b += x_a*sin_b
        read = (d + d // 2 + d // 2 + d // 2 + d // 2) * s
        written = (d + d // 2 + d // 2) * s
        alloc, flops, passes, table = 0, 3 * d, 3, 2 * d
    return Cost(method, d, name, s, read, written, alloc, flops, passes, table)


_NO_DATA = frozenset(
    {"empty_like", "empty", "empty_strided", "new_empty", "new_empty_strided"}
)


@dataclass(frozen=True)
class Traffic:
    """Memory traffic and allocation of a traced call, totals over its inputs."""

    bytes_read: int
    bytes_written: int
    bytes_allocated: int
    ops: tuple[str, ...]  # the operations that touched x-sized data, in order

    @property
    def passes(self) -> int:
        """How many operations read or wrote x-sized data."""
        return len(self.ops)


def trace_traffic(fn: Callable[[], object], *inputs: Tensor) -> Traffic:
    """Run ``fn()``; add up the bytes its torch operations read, write and allocate.

    An independent check of :func:`cost_model`: instead of counting,
    it watches every operation torch dispatches (``TorchDispatchMode``).
    Data derived from ``inputs`` (q and k, their views, every temporary
    computed from them, every buffer written from them) is tracked by
    storage; for each operation that reads tracked data it counts the bytes
    of its tracked inputs as read and of its results as written, and a fresh
    result as allocated. Views move nothing; operations on the tables alone
    are not counted, as in the cost model. An in-place operation reads and
    writes its target; ``copy_`` and ``out=`` only write; ``empty_like(x)``
    allocates without moving data. A foreign kernel (ropelab's C kernel) is
    invisible to the trace, so ``apply_rotary`` takes its torch path while
    one runs.

    Args:
        fn: a zero-argument callable, e.g. ``lambda: apply_rotary(q, cos, sin)``.
        inputs: the x-sized tensors ``fn`` reads.

    Returns:
        A ``Traffic`` with the totals (divide by the number of
        token-heads for per-token-head bytes).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    def storage(t: Tensor) -> int:
        return t.untyped_storage().data_ptr()

    def nbytes(ts: list[Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in ts)

    tracked = {storage(t) for t in inputs}
    alive: list[
        Tensor
    ] = []  # keep every written tensor alive, so no later tensor reuses its address
    counts = {"read": 0, "written": 0, "allocated": 0}
    ops: list[str] = []

    class Tracer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            schema = func._schema
            name = func.overloadpacket.__name__
            flat = [
                v
                for a in (*args, *kwargs.values())
                for v in (a if isinstance(a, (list, tuple)) else [a])
            ]
            if name in _NO_DATA:  # allocation: no data moves
                if any(isinstance(v, Tensor) and storage(v) in tracked for v in flat):
                    counts["allocated"] += nbytes([result])
                    tracked.add(storage(result))
                    alive.append(result)
                return result
            if schema.returns and all(
                r.alias_info is not None and not r.alias_info.is_write
                for r in schema.returns
            ):
                return result  # a view: no data moves
            read: list[Tensor] = []
            written: list[Tensor] = []
            for i, arg in enumerate(schema.arguments):
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                tensors = [
                    v
                    for v in (value if isinstance(value, (list, tuple)) else [value])
                    if isinstance(v, Tensor)
                ]
                is_write = arg.alias_info is not None and arg.alias_info.is_write
                if is_write:
                    written.extend(tensors)
                if not (is_write and (arg.kwarg_only or name == "copy_")):
                    read.extend(tensors)
            fresh: list[Tensor] = []
            if not any(r.alias_info is not None for r in schema.returns):
                outs = result if isinstance(result, (list, tuple)) else [result]
                fresh = [t for t in outs if isinstance(t, Tensor)]
                written.extend(fresh)
            read_tracked = [t for t in read if storage(t) in tracked]
            if not read_tracked:
                return result  # tables, allocations
            counts["read"] += nbytes(read_tracked)
            counts["written"] += nbytes(written)
            counts["allocated"] += nbytes(fresh)
            tracked.update(storage(t) for t in written)
            alive.extend(written)
            ops.append(name)
            return result

    with Tracer():
        fn()
    return Traffic(counts["read"], counts["written"], counts["allocated"], tuple(ops))
