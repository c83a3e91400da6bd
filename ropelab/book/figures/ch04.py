"""Chapter 04's figures (rotation matrix): the sparse R and what multiplying costs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ropelab.frequencies import inv_freq
from ropelab.matrix import (
    elementwise_flops,
    floats_per_position,
    matmul_flops,
    rotation_matrix,
)

from ._style import finish, new_figure

__all__ = ["rotation_matrix_sparsity", "rotation_cost"]


def rotation_matrix_sparsity(
    dim: int = 16, position: int = 100, base: float = 10000.0
) -> Figure:
    """R_{Θ,m} in the interleaved and half-split layouts side by side
    (04_rotation_matrix, eqs. ``rmatrix``, ``rmat-conjugate``).

    Non-zero entries are coloured by value (one shared colour bar); the
    entries that are zero whatever the position (structural zeros) are white.

    Args:
        dim: head dimension d.
        position: the position m (take m ≥ 1: R_{Θ,0} is the identity).
        base: frequency base b.

    Returns:
        A Figure with two image axes and a colour-bar axis.
    """
    theta = inv_freq(dim, base, dtype=torch.float64)
    cmap = plt.get_cmap("viridis").with_extremes(bad="white")
    fig, axes = new_figure(1, 2, width=9.6, height=5.0)
    titles = {
        "interleaved": "interleaved:\nblock diagonal",
        "half_split": "half-split:\nP R Pᵀ",
    }
    image = None
    for ax, layout in zip(axes, ("interleaved", "half_split")):
        r = rotation_matrix(position, theta, layout=layout).cpu().numpy()
        image = ax.imshow(
            np.ma.masked_where(r == 0, r),
            cmap=cmap,
            vmin=-1.0,
            vmax=1.0,
            interpolation="nearest",
        )
        ax.set_title(
            f"{titles[layout]}, {int((r != 0).sum())} of {dim * dim} non-zero",
            fontsize="medium",
        )
        ax.set_xlabel("input channel")
        ax.set_ylabel("output channel")
        ticks = list(range(0, dim, max(1, dim // 8)))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xticks(np.arange(-0.5, dim, 1.0), minor=True)
        ax.set_yticks(np.arange(-0.5, dim, 1.0), minor=True)
        ax.grid(which="minor", color="0.85", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
    bar = fig.colorbar(image, ax=list(axes), shrink=0.8)
    bar.set_label(r"entry value ($\cos m\theta_j$ or $\pm\sin m\theta_j$)")
    axes[0].legend(
        handles=[Patch(facecolor="white", edgecolor="0.5", label="structural zero")],
        loc="upper right",
        fontsize="small",
        framealpha=0.9,
    )
    return finish(
        fig, f"Sparsity of the rotation matrix R for d = {dim}, m = {position}"
    )


def rotation_cost(
    dims: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024),
) -> Figure:
    """What one position's rotation costs as a dense R versus the elementwise form
    (04_rotation_matrix, eqs. ``rmat-flops``, ``rmat-memory``).

    Left: floating-point operations per vector, d(2d − 1) for R @ x and 3d for
    x ⊙ cos + rot(x) ⊙ sin. Right: floats stored per position, d² for R, 2d
    for the cos/sin tables, d/2 for the angles. Both on log-log axes.

    Returns:
        A Figure with two axes (two lines, then three).
    """
    d = list(dims)
    fig, (left, right) = new_figure(1, 2, width=9.6, height=4.0)
    left.loglog(
        d, [matmul_flops(n) for n in d], "o-", base=2, label="dense R @ x: d(2d − 1)"
    )
    left.loglog(
        d,
        [elementwise_flops(n) for n in d],
        "s-",
        base=2,
        label="x ⊙ cos + rot(x) ⊙ sin: 3d",
    )
    left.set_title("compute per vector", fontsize="medium")
    left.set_ylabel("operations (flops)")
    right.loglog(
        d,
        [floats_per_position(n, "dense") for n in d],
        "o-",
        base=2,
        label="dense R: d²",
    )
    right.loglog(
        d,
        [floats_per_position(n, "cos_sin") for n in d],
        "s-",
        base=2,
        label="cos and sin tables: 2d",
    )
    right.loglog(
        d,
        [floats_per_position(n, "angles") for n in d],
        "^-",
        base=2,
        label="angles mθ_j: d/2",
    )
    right.set_title("storage per position", fontsize="medium")
    right.set_ylabel("floats stored")
    for ax in (left, right):
        ax.set_xlabel("head dimension d (channels)")
        ax.grid(True, which="major", alpha=0.3)
        # under the panel: every corner inside holds a line
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.34))
    return finish(fig, "The dense R grows as d², the elementwise form as d")
