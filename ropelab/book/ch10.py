"""Chapter 10's plumbing (multi-axis RoPE): the table of a 2D relative score
along the query's row, its column and the diagonal; the directions of RoPE-Mixed's
initial frequency vectors."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["axis_table", "init_directions"]


def axis_table(scores: Tensor, ks: Sequence[int] = (1, 2, 4, 8)) -> str:
    """A 2D relative score ``S[Δx, Δy]`` along three lines through offset (0, 0).

    Args:
        scores: ``(2c + 1, 2c + 1)`` scores on the offsets ``-c..c`` of each
            axis, offset (0, 0) at the centre ``[c, c]``.
        ks: the steps ``k`` (each at most ``c``) at which to read ``S(k, 0)``
            (the row), ``S(0, k)`` (the column) and ``S(k, k)`` (the diagonal).

    Returns:
        A first line with ``S(0, 0)`` (``|q|²`` for ``q = k``) and the largest
        ``|S|``, then one line per ``k``.
    """
    n = scores.shape[0] if scores.ndim == 2 else 0
    if scores.ndim != 2 or scores.shape[1] != n or n % 2 == 0:
        raise ValueError(
            f"scores must be a square (2c + 1, 2c + 1) table, got {tuple(scores.shape)}"
        )
    c = scores.shape[0] // 2
    if max(ks) > c:
        raise ValueError(f"ks reach {max(ks)}, past the table's half-width {c}")
    lines = [
        f"S(0, 0) = |q|² = {scores[c, c].item():.2f}, "
        f"the largest |S|: {scores.abs().max().item():.2f}",
        f"{'k':>3} {'row (k, 0)':>11} {'column (0, k)':>14} {'diagonal (k, k)':>16}",
    ]
    for k in ks:
        row, col, diag = scores[c + k, c], scores[c, c + k], scores[c + k, c + k]
        lines.append(
            f"{k:>3} {row.item():>11.2f} {col.item():>14.2f} {diag.item():>16.2f}"
        )
    return "\n".join(lines)


def init_directions(theta: Tensor) -> str:
    """Where each head's frequency vectors point: one line per head with the
    direction atan2(θy, θx), in degrees, of the first pair of each half.

    Args:
        theta: ``(heads, d/2, 2)`` frequency vectors (θx_j, θy_j), e.g. from
            :func:`ropelab.multi_axis.mixed_theta_init`, whose halves point at a
            random turn φ and at φ + 90°.

    Returns:
        ``"head h: pairs 0-15 at φ°, 16-31 at φ'°"`` (for d/2 = 32), one line per head.
    """
    if theta.ndim != 3 or theta.shape[-1] != 2 or theta.shape[1] % 2:
        raise ValueError(
            f"theta must be (heads, d/2, 2) with d/2 even, got {tuple(theta.shape)}"
        )
    half = theta.shape[1] // 2
    phi = torch.rad2deg(torch.atan2(theta[..., 1], theta[..., 0])).cpu()
    return "\n".join(
        f"head {h}: pairs 0-{half - 1} at {float(phi[h, 0]):6.1f}°, "
        f"{half}-{2 * half - 1} at {float(phi[h, half]):6.1f}°"
        for h in range(theta.shape[0])
    )
