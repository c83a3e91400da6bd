"""The GPU half of ``python -m ropelab.bench``: GPU time and host time, apart
(14_triton_kernel).

On a GPU a small call is bound by the host (Python, checks, the launch), not
by the device, so two times are reported for every candidate:

* **GPU time**: the device's own time per call, from a CUDA graph that holds
  :data:`GRAPH_CALLS` calls, replayed and timed with CUDA events (no host
  work in it);
* **host time**: the wall time per call of :data:`HOST_CALLS` back-to-back
  eager calls before the device is waited for: what one eager call costs the
  host (for a call whose GPU work is shorter, the time an eager loop takes).

Candidates, on q ``(1, 32, S, 128)`` alone and with k ``(1, 8, S, 128)``,
S = 256, 4,096, 16,384 and a decoding step (64 sequences, one token), in
float32 and bfloat16, both pair layouts: ``copy_`` into preallocated buffers
(the floor), ``ropelab.apply_rotary(..., out=)`` (one call per tensor),
``ropelab.kernels.triton.apply_rotary_qk`` (q and k in one launch),
``torch.compile`` of the transformers formula, and Liger-Kernel's RoPE
(half-split only) where installed. The goals are the ``gpu_goals`` of the
goals file; :func:`gpu_verdicts` holds each against the records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor

from .frequencies import inv_freq
from .kernels import torch_path
from .rotary import apply_rotary, cos_sin

__all__ = [
    "GpuRecord",
    "GpuVerdict",
    "format_gpu",
    "format_gpu_verdicts",
    "gpu_verdicts",
    "path_summary",
    "run_gpu",
]

GRAPH_CALLS = 20  # calls captured in one CUDA graph
HOST_CALLS = 300  # eager calls timed back to back for the host time
SEQS = (256, 4096, 16384, 1)  # S = 1: a decoding step of DECODE_BATCH sequences
DECODE_BATCH = 64
HEADS_Q, HEADS_K, DIM = 32, 8, 128

Measure = Callable[[Callable[[], object]], tuple[float, float]]


@dataclass
class GpuRecord:
    """One candidate on one configuration: GPU and host seconds per call."""

    dtype: str
    layout: str
    seq: int
    tensors: str  # "q" or "qk"
    method: str
    gpu_s: float | None
    host_s: float | None
    ratio: float | None = None  # gpu_s over copy_'s gpu_s on the same tensors
    note: str = ""


def measure_cuda(fn: Callable[[], object], *, reps: int = 20) -> tuple[float, float]:
    """(GPU seconds per call from CUDA-graph replay, host seconds per eager call)."""
    for _ in range(3):  # compile, plan, warm the caches outside the capture
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    host = (time.perf_counter() - t0) / HOST_CALLS
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # capture needs a side stream, warmed up
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
        enable_timing=True
    )
    best = float("inf")
    for _ in range(5):
        begin.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, begin.elapsed_time(end) / 1e3 / (reps * GRAPH_CALLS))
    return best, host


def _hf(rot: Callable[[Tensor], Tensor]) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    def formula(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        return x * cos + rot(x) * sin

    return formula


def _candidates(q, k, layout, peers: bool) -> dict[str, tuple[Callable | None, str]]:
    """name -> (callable on q alone, callable on q and k, or None; note)."""
    device, seq = q.device, q.shape[-2]
    cos, sin = cos_sin(
        torch.arange(seq, device=device) + (7 if seq == 1 else 0),
        inv_freq(DIM).to(device),
        layout=layout,
        dtype=q.dtype,
    )
    oq, ok = torch.empty_like(q), torch.empty_like(k)
    found: dict[str, tuple[Callable | None, Callable | None, str]] = {
        "copy_": (lambda: oq.copy_(q), lambda: (oq.copy_(q), ok.copy_(k)), "the floor"),
        "ropelab": (
            lambda: apply_rotary(q, cos, sin, layout=layout, out=oq),
            lambda: (
                apply_rotary(q, cos, sin, layout=layout, out=oq),
                apply_rotary(k, cos, sin, layout=layout, out=ok),
            ),
            "apply_rotary(out=), one call a tensor",
        ),
    }
    try:
        from .kernels import triton as kt
    except ImportError:
        found["ropelab_qk"] = (None, None, "skipped: Triton does not import")
    else:
        found["ropelab_qk"] = (
            None,
            lambda: kt.apply_rotary_qk(q, k, cos, sin, layout=layout),
            "q and k in one launch",
        )
    if not peers:
        return found
    turn = lambda x: torch_path.turn(x, layout)
    config = torch._dynamo.config  # one compile per shape: more than the default limit
    for name in (
        "recompile_limit",
        "cache_size_limit",
        "accumulated_recompile_limit",
        "accumulated_cache_size_limit",
    ):
        if isinstance(getattr(config, name, None), int):
            setattr(config, name, max(getattr(config, name), 256))
    compiled = torch.compile(_hf(turn), dynamic=False)
    found["hf_compiled"] = (
        lambda: compiled(q, cos, sin),
        lambda: (compiled(q, cos, sin), compiled(k, cos, sin)),
        "torch.compile of x*cos + rot(x)*sin",
    )
    try:
        from liger_kernel.ops.rope import LigerRopeFunction
    except ImportError:
        found["liger"] = (None, None, "skipped: liger-kernel is not installed")
    else:
        if layout == "half_split":

            def liger():  # Liger >= 0.8 returns more than (q, k): keep the first two
                return LigerRopeFunction.apply(q, k, cos[None], sin[None])[:2]

            found["liger"] = (None, liger, "Liger-Kernel, q and k in one launch")
        else:
            found["liger"] = (None, None, "skipped: Liger takes half-split pairs only")
    return found


def run_gpu(
    device: str | torch.device = "cuda",
    dtypes: Sequence[str] = ("float32", "bfloat16"),
    *,
    seqs: Sequence[int] = SEQS,
    peers: bool = True,
    measure: Measure | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[GpuRecord]:
    """Time every candidate on every configuration: GPU and host seconds per call.

    ``measure`` (default :func:`measure_cuda`) turns a zero-argument callable
    into (GPU seconds, host seconds); tests pass a stand-in to run the rest on
    a CPU.
    """
    device = torch.device(device)
    measure = measure or measure_cuda
    records: list[GpuRecord] = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for layout in ("half_split", "interleaved"):
            for seq in seqs:
                batch = DECODE_BATCH if seq == 1 else 1
                g = torch.Generator().manual_seed(0)
                q = torch.randn(batch, HEADS_Q, seq, DIM, generator=g).to(device, dtype)
                k = torch.randn(batch, HEADS_K, seq, DIM, generator=g).to(device, dtype)
                if progress:
                    progress(f"gpu: {dtype_name} {layout} S={seq}")
                found = _candidates(q, k, layout, peers)
                for tensors, index in (("q", 0), ("qk", 1)):
                    floor = None
                    for method, (*fns, note) in found.items():
                        fn = fns[index]
                        if fn is None:
                            if note.startswith("skipped"):
                                records.append(
                                    GpuRecord(
                                        dtype_name,
                                        layout,
                                        seq,
                                        tensors,
                                        method,
                                        None,
                                        None,
                                        None,
                                        note,
                                    )
                                )
                            continue
                        gpu_s, host_s = measure(fn)
                        if method == "copy_":
                            floor = gpu_s
                        ratio = None if not floor else gpu_s / floor
                        records.append(
                            GpuRecord(
                                dtype_name,
                                layout,
                                seq,
                                tensors,
                                method,
                                gpu_s,
                                host_s,
                                ratio,
                                note,
                            )
                        )
                del q, k, found
    return records


@dataclass
class GpuVerdict:
    """One GPU goal on one record."""

    goal: str
    record: GpuRecord
    value: float
    limit: float
    holds: bool = field(init=False)

    def __post_init__(self) -> None:
        self.holds = self.value <= self.limit


def gpu_verdicts(
    goals: Sequence[dict], records: Sequence[GpuRecord]
) -> list[GpuVerdict]:
    """Each GPU goal against the records it covers.

    A goal names ``methods``, ``seqs`` and a ``measure``: ``"ratio"`` (GPU time
    over ``copy_``'s), ``"host_us"`` (host microseconds per call), or
    ``"vs_peers"`` (GPU time over the fastest peer's on the same
    configuration: at most 1 means ahead of every peer).
    """
    found = []
    for goal in goals:
        for r in records:
            if r.method not in goal["methods"] or r.seq not in goal["seqs"]:
                continue
            if r.gpu_s is None or r.dtype not in goal.get("dtypes", [r.dtype]):
                continue
            if r.tensors not in goal.get("tensors", ["q", "qk"]):
                continue
            if goal["measure"] == "ratio" and r.ratio is not None:
                value = r.ratio
            elif goal["measure"] == "host_us" and r.host_s is not None:
                value = r.host_s * 1e6
            elif goal["measure"] == "vs_peers":
                peers = [
                    p.gpu_s
                    for p in records
                    if (p.dtype, p.layout, p.seq, p.tensors)
                    == (r.dtype, r.layout, r.seq, r.tensors)
                    and p.method in goal["peers"]
                    and p.gpu_s is not None
                ]
                if not peers:
                    continue
                value = r.gpu_s / min(peers)
            else:
                continue
            found.append(GpuVerdict(goal["name"], r, value, float(goal["limit"])))
    return found


def format_gpu(records: Sequence[GpuRecord]) -> str:
    """One line per record: GPU µs, ratio to copy_, host µs."""
    lines = [
        f"{'dtype':<9} {'layout':<12} {'S':>6} {'on':<3} {'method':<12} "
        f"{'GPU us':>9} {'x copy_':>8} {'host us':>8}  note"
    ]
    for r in records:
        gpu = "-" if r.gpu_s is None else f"{r.gpu_s * 1e6:9.1f}"
        ratio = "-" if r.ratio is None else f"{r.ratio:8.2f}"
        host = "-" if r.host_s is None else f"{r.host_s * 1e6:8.1f}"
        lines.append(
            f"{r.dtype:<9} {r.layout:<12} {r.seq:>6} {r.tensors:<3} "
            f"{r.method:<12} {gpu:>9} {ratio:>8} {host:>8}  {r.note}"
        )
    return "\n".join(lines)


def format_gpu_verdicts(found: Sequence[GpuVerdict]) -> str:
    """One line per GPU goal and record; and the count."""
    lines = []
    for v in found:
        r = v.record
        lines.append(
            f"{v.goal:<22} {r.dtype:<9} {r.layout:<12} S={r.seq:<6} {r.tensors:<3}"
            f" {r.method:<11} {v.value:7.2f} (<= {v.limit:.2f}): "
            f"{'holds' if v.holds else 'DOES NOT HOLD'}"
        )
    lines.append(f"{sum(v.holds for v in found)} of {len(found)} GPU goals hold")
    return "\n".join(lines)


def path_summary(device: torch.device) -> str:
    """Which backend apply_rotary takes on ``device``: it runs one tiny call."""
    from . import kernels

    x = torch.zeros(1, 2, 4, device=device)
    c = torch.ones(2, 4, device=device)
    name = kernels.rotate_into(
        torch.empty_like(x), x, c, torch.zeros_like(c), "half_split"
    )
    if name == "triton":
        from .kernels import triton as kt

        status = kernels.triton_status()["reason"]
        direct = "direct launch" if kt._DIRECT else "Triton's own launch"
        return f"apply_rotary takes the Triton kernel ({status}, {direct})"
    if name == "torch" and device.type == "cuda":
        return (
            f"apply_rotary takes its torch path ({kernels.triton_status()['reason']})"
        )
    return f"apply_rotary takes the {name} backend"
