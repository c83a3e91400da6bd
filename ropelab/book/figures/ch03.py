"""Chapter 03's figures (pairing): which channels pair up, and mixed-up scores."""

from __future__ import annotations

import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ropelab.pairing import half_split_permutation

from ._style import BOOK_STYLE, MAX_WIDTH, finish, new_figure, wrap_title

__all__ = ["pairing_diagram", "score_comparison"]


def pairing_diagram(dim: int = 8) -> Figure:
    """Which channels form a pair in the interleaved and the half-split layouts, and how
    P moves them (03_pairing).

    Top row: the interleaved layout, channel k holds x_k and pairs (2i, 2i+1).
    Bottom row: the half-split layout after ``to_half_split``, channel p holds
    x_{perm[p]} and pairs (i, i + d/2). One colour per pair i (frequency θ_i);
    an arrow from channel k to P(k) for every channel (eq. ``permutation``).

    Args:
        dim: head dimension d (even, small: 4 to 16 reads well).
    """
    perm_t = half_split_permutation(dim)
    perm, dest = (
        perm_t.tolist(),
        perm_t.argsort().tolist(),
    )  # dest[k] = P(k), where channel k lands
    half = dim // 2
    cmap = plt.get_cmap("tab10" if half <= 10 else "viridis")
    colours = [cmap(i if half <= 10 else i / max(half - 1, 1)) for i in range(half)]
    fig, ax = new_figure(width=max(6.4, 0.9 * dim), height=4.2)
    rows = {"interleaved": 1.0, "half_split": 0.0}
    w, h = 0.8, 0.34
    for k in range(dim):  # interleaved row: channel k holds x_k, pair k // 2
        ax.add_patch(
            mpatches.FancyBboxPatch(
                (k - w / 2, rows["interleaved"] - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02",
                color=colours[k // 2],
                alpha=0.85,
            )
        )
        ax.text(
            k,
            rows["interleaved"],
            f"$x_{{{k}}}$",
            ha="center",
            va="center",
            fontsize=12,
        )
    for p in range(dim):  # half-split row: channel p holds x_perm[p], pair p mod d/2
        ax.add_patch(
            mpatches.FancyBboxPatch(
                (p - w / 2, rows["half_split"] - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02",
                color=colours[p % half],
                alpha=0.85,
            )
        )
        ax.text(
            p,
            rows["half_split"],
            f"$x_{{{perm[p]}}}$",
            ha="center",
            va="center",
            fontsize=12,
        )
    for k in range(dim):
        ax.annotate(
            "",
            xy=(dest[k], rows["half_split"] + h / 2 + 0.02),
            xytext=(k, rows["interleaved"] - h / 2 - 0.02),
            arrowprops=dict(
                arrowstyle="->", color=colours[k // 2], lw=1.4, shrinkA=0, shrinkB=0
            ),
        )
    ax.set_xlim(-0.7, dim - 0.3)
    ax.set_ylim(-0.45, 1.45)
    ax.set_xticks(np.arange(dim))
    ax.set_yticks(
        [rows["half_split"], rows["interleaved"]],
        ["half-split\npairs (i, i + d/2)", "interleaved\npairs (2i, 2i + 1)"],
    )
    ax.set_xlabel("channel index within the head (position along the last axis)")
    ax.set_ylabel("layout")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [
        mpatches.Patch(color=colours[i], alpha=0.85, label=f"pair {i} (θ$_{{{i}}}$)")
        for i in range(half)
    ]
    fig.legend(  # below the axis label, in room the layout reserves for it
        handles=handles, loc="outside lower center", ncol=min(half, 4), frameon=False
    )
    return finish(
        fig,
        f"Channel pairs for d = {dim}: arrows are the permutation P "
        "(2i → i, 2i+1 → i + d/2)",
    )


def score_comparison(
    reference, other, *, labels: tuple[str, str] = ("reference", "other")
) -> Figure:
    """Two attention-score matrices side by side and their difference
    (03_pairing, eq. ``weightperm``).

    Args:
        reference, other: score matrices ``(seq_q, seq_k)`` (tensors or arrays,
            e.g. one head of q·kᵀ/√d).
        labels: panel titles for ``reference`` and ``other``.

    Returns:
        A Figure with three heatmaps (reference, other, other - reference)
        and two colour bars.
    """
    a = (
        reference.detach().double().cpu().numpy()
        if isinstance(reference, torch.Tensor)
        else np.asarray(reference, float)
    )
    b = (
        other.detach().double().cpu().numpy()
        if isinstance(other, torch.Tensor)
        else np.asarray(other, float)
    )
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            "reference and other must be 2-D score matrices of one shape, got "
            f"{a.shape} and {b.shape}"
        )
    # three narrow panels: one y label, one x label and two-line titles, so no
    # label runs into its neighbour
    fig, axes = new_figure(1, 3, width=MAX_WIDTH, height=3.0, sharey=True)
    vmax = float(max(np.abs(a).max(), np.abs(b).max())) or 1.0
    diff = b - a
    dmax = float(np.abs(diff).max()) or 1.0
    titles = [wrap_title(t, 18) for t in labels] + ["difference:\nmiddle − left"]
    for ax, data, title in zip(axes[:2], (a, b), titles):
        im = ax.imshow(data, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        ax.set_title(title)
    fig.colorbar(
        im, ax=axes[:2].tolist(), label="score q·k/√d (dimensionless)", shrink=0.85
    )
    im_d = axes[2].imshow(diff, cmap="PuOr_r", vmin=-dmax, vmax=dmax)
    axes[2].set_title(titles[2])
    fig.colorbar(im_d, ax=axes[2], label="Δ score (dimensionless)", shrink=0.85)
    axes[0].set_ylabel("query position m (tokens)")
    for ax in axes:  # positions are integers
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.supxlabel("key position n (tokens)", fontsize=BOOK_STYLE["axes.labelsize"])
    return finish(fig, "Attention scores of one head")
