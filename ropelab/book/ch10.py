"""Chapter 10's plumbing (multi-axis RoPE): the table of a 2D relative score
along the query's row, its column and the diagonal."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

__all__ = ["axis_table"]


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
