"""Chapter 09's plumbing (performance): the tables it prints from traces, from the cost
model and from the benchmark's results file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ropelab import bench
from ropelab.book.cost import METHODS, cost_model

__all__ = ["EARLIER_PATH", "goal_lines", "intensity_table", "machine_lines",
           "methods_table", "prefill_lines", "shown", "traffic_table"]


def traffic_table(traces: Mapping[tuple[Any, str], Any], token_heads: int) -> str:
    """Bytes read, written and allocated per token-head, one line per traced operation.

    Args:
        traces: ``{(dtype, operation name): Traffic}`` from
            :func:`ropelab.book.cost.trace_traffic`.
        token_heads: token-heads in the traced tensor (its numel over d).
    """
    lines = [f"{'dtype':<9} {'operation':<10} {'read':>5} {'written':>8} "
             f"{'allocated':>10}  (bytes per token-head)"]
    for (dtype, name), t in traces.items():
        r, w, a = (b // token_heads for b in (t.bytes_read, t.bytes_written,
                                                t.bytes_allocated))
        name_of_dtype = str(dtype).removeprefix("torch.")
        lines.append(f"{name_of_dtype:<9} {name:<10} {r:5d} {w:8d} {a:10d}")
    return "\n".join(lines)


def intensity_table(
    dim: int, dtype: str, balance: float, methods: Sequence[str]
) -> str:
    """Each method's arithmetic intensity (flops per byte moved, from
    :func:`ropelab.book.cost.cost_model` at head width ``dim`` and ``dtype``) and the
    machine ``balance`` (flop/byte) over it: above 1, the method waits for memory
    (eq. ``perf-intensity``). A header line, then one line per method."""
    head = f"{'intensity (flop/byte)':>22} {'balance / intensity':>20}"
    lines = [f"{'method':<22} {head}"]
    for method in methods:
        intensity = cost_model(dim, dtype, method=method).intensity
        ratio = balance / intensity  # below 1, two decimals: 0.04, not 0.0
        shown = f"{ratio:.1f}" if ratio >= 1 else f"{ratio:.2f}"
        lines.append(f"{method:<22} {intensity:22.3f} {shown:>20}")
    return "\n".join(lines)


def machine_lines(machine: Mapping[str, Any]) -> str:
    """Which machine wrote a results file, and the path ``apply_rotary`` took there."""
    kernel = machine["kernel"].split(", compiled")[0].split(", loaded")[0]
    return (f"measured on: {machine['cpu']} ({machine['device']}), "
            f"{machine['threads']} threads, torch {machine['torch']}\n"
            f"apply_rotary: {kernel}")


EARLIER_PATH = ("torch_interleaved_out",)
"""Methods whose rows in the CPU results file (``BENCH_CPU``) were measured with an
earlier torch path, which rotated interleaved pairs as complex numbers, not with the
mul and two ``addcmul_`` that the cost model counts (eq. ``perf-torch``): not shown
until the file is measured again."""


def shown(results: Sequence[bench.Result]) -> list[bench.Result]:
    """``results`` without the rows of :data:`EARLIER_PATH`."""
    return [r for r in results if r.method not in EARLIER_PATH]


def methods_table(results: Sequence[bench.Result]) -> str:
    """Per dtype: each method's time over copy_'s (and over the transformers formula's)
    at every shape, and the cost model's traffic over the floor. The methods of
    :data:`EARLIER_PATH` are left out.

    Raises:
        ValueError: ``results`` does not hold exactly the methods of ``METHODS``.
    """
    if {r.method for r in results} != set(METHODS):
        raise ValueError(f"results: methods {sorted({r.method for r in results})}, "
                         f"expected {sorted(METHODS)}")
    shapes = list(dict.fromkeys(r.shape for r in results))
    by_key = {(r.shape, r.dtype, r.method): r for r in results}
    lines: list[str] = []
    for dtype in dict.fromkeys(r.dtype for r in results):
        lines.append(f"\n{dtype}: time / copy_ (time / transformers formula)")
        header = "".join(f"{str(s):>21}" for s in shapes)
        lines.append(f"{'method':<24}{header}{'traffic':>9}")
        for method in (m for m in METHODS if m not in EARLIER_PATH):
            cells = []
            for shape in shapes:
                r = by_key[(shape, dtype, method)]
                ok = r.best_s is not None
                ratios = f"{r.ratio_floor:.2f} ({r.ratio_hf:.2f})" if ok else "skipped"
                cells.append(ratios)
            model = cost_model(shapes[0][-1], dtype, method=method).ratio_floor
            lines.append(f"{method:<24}" + "".join(f"{c:>21}" for c in cells)
                         + f"{model:9.2f}")
    return "\n".join(lines)


def _span(values: Sequence[float]) -> str:
    if f"{min(values):.2f}" == f"{max(values):.2f}":
        return f"{values[0]:.2f}x"
    return f"{min(values):.2f}-{max(values):.2f}x"


def prefill_lines(results: Sequence[bench.Result]) -> str:
    """Per dtype, over the prefill shapes (seq > 1): the range of time over copy_ of
    clone, the transformers formula, Meta's complex form and apply_rotary."""
    prefill = [s for s in dict.fromkeys(r.shape for r in results) if s[2] > 1]
    by_key = {(r.shape, r.dtype, r.method): r for r in results}

    def span(method: str, dtype: str) -> str:
        return _span([by_key[(s, dtype, method)].ratio_floor for s in prefill])

    lines = []
    for dtype in dict.fromkeys(r.dtype for r in results):
        lines += [
            f"{dtype}, prefill shapes, time over copy_:",
            f"  clone (same traffic, plus allocation):     {span('clone', dtype)}",
            f"  transformers formula (5 floors, 5 allocs): {span('hf', dtype)}",
            f"  Meta's complex form:                       {span('complex', dtype)}",
            f"  apply_rotary, new result:                  "
            f"{span('ropelab_half_split', dtype)} (half-split)",
            f"  apply_rotary, out=:                        "
            f"{span('ropelab_half_split_out', dtype)} (half-split), "
            f"{span('ropelab_interleaved_out', dtype)} (interleaved)",
        ]
    return "\n".join(lines)


def goal_lines(
    goals: Sequence[Mapping[str, Any]], grid: Sequence[bench.GridResult]
) -> str:
    """Each goal the grid covers: how many configurations hold it, and the slowest."""
    lines = []
    for g in goals:
        covered = list(bench.verdicts([g], grid))
        if not covered:
            continue
        within = [v for v in covered if v.holds]
        r = max(covered, key=lambda v: v.result.ratio).result
        against = "copy_" if g["against"] == "copy_" else "the transformers formula"
        where = "" if r.shape[2] == 1 else f" at S = {r.shape[2]:,}"
        lines.append(f"{g['name']} (at most {g['limit']}x {against}): {len(within)} of "
                     f"{len(covered)} within")
        lines.append(f"  slowest: {r.dtype} {r.layout} {bench.ORDERS[r.order]}{where} "
                     f"({r.call}), {r.ratio:.2f}x")
    return "\n".join(lines)
