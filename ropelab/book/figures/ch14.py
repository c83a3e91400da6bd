"""Chapter 14's figures (Triton kernel): the program grid and the bytes moved."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ._style import finish, new_figure

__all__ = ["triton_programs", "kernel_traffic"]


def triton_programs(n_rows: int = 16, n_heads: int = 4, block_rows: int = 4) -> Figure:
    """Which program of the Triton kernel rotates which (token, head) row
    (14_triton_kernel).

    One program takes a block of ``block_rows`` tokens and loops over every
    head, so its cos/sin rows are loaded once and used ``n_heads`` times.
    Left: the grid of (token, head) rows coloured by program; right: how
    often each table row is loaded, per program and in total.

    Args:
        n_rows: tokens in the sequence.
        n_heads: heads that share the tables.
        block_rows: tokens per program (``BLOCK_R``).
    """
    fig, (ax, ax_t) = new_figure(
        1, 2, width=6.4, height=3.4, gridspec_kw={"width_ratios": [3, 1]}
    )
    n_prog = -(-n_rows // block_rows)
    grid = np.repeat(np.arange(n_rows) // block_rows, n_heads).reshape(n_rows, n_heads)
    cmap = plt.get_cmap("tab10", max(n_prog, 2))
    ax.imshow(grid, cmap=cmap, aspect="auto", vmin=-0.5, vmax=max(n_prog, 2) - 0.5)
    for p in range(n_prog):
        y = p * block_rows + (min(block_rows, n_rows - p * block_rows) - 1) / 2
        ax.text(
            n_heads - 0.5 + 0.05,
            y,
            f" program {p}",
            va="center",
            fontsize="small",
            clip_on=False,
        )
    ax.set_xticks(range(n_heads))
    ax.set_yticks(range(0, n_rows, block_rows))
    for r in range(1, n_rows):
        ax.axhline(r - 0.5, color="white", lw=0.6)
    for h in range(1, n_heads):
        ax.axvline(h - 0.5, color="white", lw=0.6)
    ax.set_xlabel("head h (the loop inside a program)")
    ax.set_ylabel("token (row of x)")
    ax.set_title("one program per block of tokens")
    loads = np.ones(n_rows)
    ax_t.barh(
        np.arange(n_rows), loads, color=[cmap(r // block_rows) for r in range(n_rows)]
    )
    ax_t.set_ylim(n_rows - 0.5, -0.5)
    ax_t.set_xlim(0, n_heads)
    ax_t.set_xlabel("loads of each\ncos/sin row")
    ax_t.set_yticks([])
    ax_t.set_title(f"once, not {n_heads}×")
    return finish(fig, "The kernel's grid: tables read once for all heads")


def kernel_traffic(rows: dict[str, dict[str, float]], *, floor: float) -> Figure:
    """Bytes per token-head that each implementation moves, by what they carry
    (14_triton_kernel).

    Args:
        rows: ``{implementation: {part: bytes per token-head}}``, e.g.
            ``{"Triton kernel": {"x": 256, "tables": 16, "out": 256}}``.
        floor: the memory floor ``2ds`` in bytes per token-head (a dashed line).
    """
    fig, ax = new_figure(1, 1, width=6.4, height=3.2)
    names = list(rows)
    parts = list(dict.fromkeys(p for r in rows.values() for p in r))
    left = [0.0] * len(names)
    for part in parts:
        widths = [rows[n].get(part, 0.0) for n in names]
        ax.barh(names, widths, left=left, label=part)
        left = [a + b for a, b in zip(left, widths)]
    ax.axvline(floor, color="0.3", ls="--", lw=1, label=f"floor 2ds = {floor:,.0f} B")
    ax.invert_yaxis()
    ax.set_xlabel("bytes per token-head")
    ax.legend(fontsize="small", loc="lower right")
    return finish(fig, "Bytes asked for, per token-head")
