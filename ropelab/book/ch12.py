"""Chapter 12's plumbing (positions in practice): the drift of keys that a
streaming cache moves step by step, in float32 and bfloat16."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ropelab import apply_rotary, cos_sin, rerotate_keys

__all__ = ["DRIFT_WAYS", "drift_table", "rerotation_drift"]

DRIFT_WAYS = ("step by step", "once by the total", "encoded afresh")


def rerotation_drift(
    raw: Tensor,
    inv_freq: Tensor,
    start: int,
    marks: Sequence[int],
    *,
    dtype: torch.dtype,
) -> tuple[dict[str, list[float]], float]:
    """Move keys encoded at ``start..start+n-1`` down one position at a time.

    The keys are held in ``dtype``: encoded with exact (float64) angles and
    rounded to ``dtype`` once, then moved by ``rerotate_keys(k, -1)`` after
    every eviction, as a cache of rotated keys does (eq. ``pos-rerotate``).
    After ``s`` moves, for each ``s`` in ``marks``, the largest error against
    the exact key at ``start - s`` (float64) is measured for three ways of
    holding it: moved step by step, moved once by ``-s`` from the first
    encoding, and encoded afresh from ``raw``.

    Args:
        raw: unrotated keys ``(..., n, dim)``, float64.
        inv_freq: ``(dim // 2,)`` float32 frequencies, as a model holds them.
        start: the position of the first key; ``max(marks)`` must not exceed it.
        marks: the numbers of moves at which to measure.
        dtype: the dtype the cache holds its keys in.

    Returns:
        ``(errors, norm_ratio)``: ``errors[way]`` lists max |key - exact key| at
        each mark (keys in ``DRIFT_WAYS`` order), and ``norm_ratio`` is the mean
        of |key moved step by step| / |raw key| after ``max(marks)`` moves.
    """
    if max(marks) > start:
        raise ValueError(f"marks reach {max(marks)}, past start = {start}")
    n = raw.shape[-2]
    positions = torch.arange(start, start + n)
    f64 = inv_freq.double()

    def encode(pos: Tensor) -> Tensor:  # exact angles, rounded to dtype once
        cos, sin = cos_sin(pos, f64, dtype=torch.float32)
        return apply_rotary(raw.float(), cos, sin).to(dtype)

    def exact(pos: Tensor) -> Tensor:
        return apply_rotary(raw, *cos_sin(pos, f64, dtype=torch.float64))

    errors: dict[str, list[float]] = {way: [] for way in DRIFT_WAYS}
    k0 = encode(positions)
    k = k0
    for s in range(1, max(marks) + 1):
        k = rerotate_keys(k, -1, inv_freq)
        if s in marks:
            ref = exact(positions - s)
            ways = (k, rerotate_keys(k0, -s, inv_freq), encode(positions - s))
            for way, val in zip(DRIFT_WAYS, ways):
                errors[way].append(float((val.double() - ref).abs().max()))
    norm_ratio = float((k.double().norm(dim=-1) / raw.norm(dim=-1)).mean())
    return errors, norm_ratio


def drift_table(
    marks: Sequence[int], drift: dict[str, dict[str, list[float]]], rows: Sequence[int]
) -> str:
    """The errors of :func:`rerotation_drift` for several dtypes, one row per move
    count in ``rows``: step by step and once by the total, for each dtype."""
    names = list(drift)
    head = f"{'moves s':>7} " + " ".join(
        f"{n + ', ' + w.split()[0]:>15}" for n in names for w in DRIFT_WAYS[:2]
    )
    lines = [head]
    for s in rows:
        i = list(marks).index(s)
        vals = [drift[n][w][i] for n in names for w in DRIFT_WAYS[:2]]
        lines.append(f"{s:>7} " + " ".join(f"{v:>15.1e}" for v in vals))
    return "\n".join(lines)
