"""Chapter 10's figure (multi-axis): 2D RoPE score maps over image patches."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ropelab.multi_axis import grid_positions, rope_scores_2d

from ._style import finish, new_figure

__all__ = ["patch_score_maps"]


def patch_score_maps(
    q,
    k,
    theta_xys: dict,
    *,
    rows: int = 16,
    cols: int = 16,
    query_xy: tuple[int, int] = (8, 8),
    layout: str = "half_split",
) -> Figure:
    """Scores of one query patch against every key patch of a grid, one heatmap per 2D
    RoPE variant (10_multi_axis).

    The same q sits at ``query_xy`` and the same k at every patch of a
    ``rows`` × ``cols`` grid; each panel shows ⟨R_p q, R_p' k⟩ over the key
    patches p' for one set of frequencies (eq. ``multi-relative``): axial
    frequencies give a pattern f(Δx) + g(Δy) (eq. ``multi-separable``), mixed
    ones can run along any direction (eq. ``multi-mixed``).

    Args:
        q, k: ``(dim,)`` real vectors (any device; computed in their dtype).
        theta_xys: panel title -> ``(dim//2, 2)`` frequencies, e.g.
            ``{"axial": axial_theta_xy(64, 100.0)}``.
        rows, cols: grid size in patches.
        query_xy: the query patch (column, row).
        layout: the pairing of q's and k's channels.
    """
    if not theta_xys:
        raise ValueError("theta_xys must name at least one set of frequencies")
    qx, qy = query_xy
    if not (0 <= qx < cols and 0 <= qy < rows):
        raise ValueError(
            f"query_xy must lie on the {rows} x {cols} grid, got {query_xy}"
        )
    keys = grid_positions(rows, cols, device=q.device)
    query = torch.tensor([[qx, qy]], device=q.device)
    fig, axes = new_figure(
        1, len(theta_xys), width=4.6 * len(theta_xys) + 0.6, height=4.4, squeeze=False
    )
    for ax, (name, theta_xy) in zip(axes[0], theta_xys.items()):
        s = rope_scores_2d(
            q[None],
            k.expand(rows * cols, -1),
            query,
            keys,
            theta_xy.to(q.device),
            layout=layout,
        )
        grid = s.detach().to("cpu", torch.float64).reshape(rows, cols)
        vmax = float(grid.abs().max())
        image = ax.imshow(grid.numpy(), cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        ax.plot(
            [qx],
            [qy],
            marker="x",
            color="k",
            ms=8,
            mew=2,
            linestyle="none",
            label="query patch",  # named in the caption: a legend would sit on data
        )
        fig.colorbar(image, ax=ax, shrink=0.8, label="score ⟨R_p q, R_p' k⟩")
        ax.set_xlabel("key column x' (patches)")
        ax.set_ylabel("key row y' (patches)")
        ax.set_title(name, fontsize="medium")
    return finish(
        fig,
        f"One query patch, {rows} × {cols} key patches (d = {q.shape[-1]})",
    )
