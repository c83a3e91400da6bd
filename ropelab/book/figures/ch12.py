"""Chapter 12's figures (positions in practice): packing, drift, stale caches."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ropelab.positions import packed_positions

from ._style import MAX_WIDTH, finish, new_figure

__all__ = ["packing_masks", "rerotation_drift", "dynamic_ntk_scores", "layout_scores"]


def packing_masks(cu_seqlens) -> Figure:
    """Which keys each query of a packed row may see (12_positions_in_practice).

    Two panels over the flat tokens of documents cut at ``cu_seqlens``: the
    causal mask alone, under which a query also reads the documents packed
    before its own (the cells that leak are marked), and the block-diagonal
    causal mask of varlen attention. Tick labels are the positions
    :func:`ropelab.packed_positions` gives each token.

    Args:
        cu_seqlens: cumulative document lengths, 0 first (e.g. ``[0, 3, 7, 10]``).
    """
    pos = packed_positions(cu_seqlens).cpu()
    cu = torch.as_tensor(cu_seqlens).cpu().long()
    n = len(pos)
    doc = torch.repeat_interleave(torch.arange(len(cu) - 1), cu.diff())
    causal = torch.ones(n, n).tril()
    same = (doc[:, None] == doc[None, :]).double()
    fig, axes = new_figure(1, 2, width=MAX_WIDTH, height=4.4)
    cmap = plt.matplotlib.colors.ListedColormap(["white", "#0072B2", "#D55E00"])
    panels = (
        # 2 marks a cell where a query reads another document
        ("causal only", causal + (causal * (1 - same))),
        ("causal, per document", causal * same),
    )
    for ax, (title, grid) in zip(axes, panels):
        ax.imshow(grid.numpy(), cmap=cmap, vmin=0, vmax=2)
        for c in cu[1:-1].tolist():
            ax.axhline(c - 0.5, color="0.2", lw=1)
            ax.axvline(c - 0.5, color="0.2", lw=1)
        ax.set_xticks(range(n), [str(p) for p in pos.tolist()])
        ax.set_yticks(range(n), [str(p) for p in pos.tolist()])
        ax.set_xlabel("key position (tokens)")
        ax.set_ylabel("query position (tokens)")
        ax.set_title(title, fontsize="medium")
    handles = [
        Patch(facecolor="#0072B2", label="same document"),
        Patch(facecolor="#D55E00", label="another document (leak)"),
        Patch(facecolor="white", edgecolor="0.5", label="masked"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    title = f"Masks over {len(cu) - 1} packed documents ({n} tokens)"
    return finish(fig, title)


def rerotation_drift(shifts, errors: dict) -> Figure:
    """Error of keys moved many times vs encoded once (12_positions_in_practice).

    Args:
        shifts: the numbers of moves at which the error was measured (x axis).
        errors: line label -> max |error| at each entry of ``shifts`` (e.g.
            re-rotated step by step, re-encoded from the raw key). A label that
            contains "bfloat16" is drawn dashed, so one colour per way of moving
            and one line style per dtype.
    """
    x = [int(s) for s in shifts]
    fig, ax = new_figure(width=6.4, height=4.6)
    markers = "osd^v"
    ways: dict[str, int] = {}
    for name, err in errors.items():
        y = [float(e) for e in err]
        if len(y) != len(x):
            raise ValueError(
                f"errors[{name!r}] has {len(y)} values for {len(x)} shifts"
            )
        way = name.split(", ")[-1]
        i = ways.setdefault(way, len(ways))
        ax.plot(
            x,
            [max(v, 1e-12) for v in y],
            marker=markers[i % len(markers)],
            ms=4,
            color=f"C{i}",
            linestyle="--" if "bfloat16" in name else "-",
            label=name,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of one-token shifts applied to the cache")
    ax.set_ylabel("max |key − exact key| (key entries ~ 1)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    return finish(fig, "Keys shifted step by step vs once")


def dynamic_ntk_scores(key_positions, scores: dict, *, original_max: int) -> Figure:
    """One query under dynamic NTK, keys held three ways (12_positions_in_practice).

    Top: the scores of each choice over the key positions; bottom: each
    choice's difference from the keys recomputed with the query's base. A
    dashed line marks the original context length, past which dynamic NTK
    grows the base token by token.

    Args:
        key_positions: ``(n,)`` key positions (tokens).
        scores: label -> ``(n,)`` scores; the first entry is the reference.
        original_max: the original context length L (tokens).
    """
    pos = torch.as_tensor(key_positions).cpu().double().numpy()
    items = [(k, torch.as_tensor(v).detach().cpu().double()) for k, v in scores.items()]
    if not items:
        raise ValueError("scores must hold at least one series")
    ref_name, ref = items[0]
    fig, (ax_s, ax_d) = new_figure(2, 1, width=MAX_WIDTH, height=6.4, sharex=True)
    styles = ("-", "--", ":", "-.")
    for i, (name, s) in enumerate(items):
        ax_s.plot(pos, s.numpy(), ls=styles[i % 4], lw=1.2, label=name)
        if i:
            ax_d.plot(
                pos,
                (s - ref).numpy(),
                ls=styles[i % 4],
                lw=1.2,
                color=f"C{i}",
                label=name,
            )
    for ax in (ax_s, ax_d):
        ax.axvline(
            original_max - 0.5, color="0.3", ls="--", lw=1, label=f"L = {original_max}"
        )
        ax.grid(True, alpha=0.3)
    ax_d.set_xlabel("key position n (tokens)")
    fig.legend(*ax_s.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    ax_s.set_ylabel("score q·k (dimensionless)")
    ax_s.set_title("scores of the last query", fontsize="medium")
    ax_d.set_ylabel("Δ score (dimensionless)")
    ax_d.set_title(f"difference from: {ref_name}", fontsize="medium")
    return finish(fig, "Dynamic NTK with a KV cache: three ways to hold the keys")


def layout_scores(
    right, wrong, *, labels: tuple[str, str] = ("right layout", "wrong layout")
) -> Figure:
    """One head's causal scores under the rope type its rows were made for, and the
    other.

    12_positions_in_practice. Two heatmaps on one colour scale; the upper
    triangle (future keys) is left blank.

    Args:
        right, wrong: ``(seq, seq)`` score matrices (query rows, key columns).
        labels: the two panel titles.
    """
    a = torch.as_tensor(right).detach().cpu().double()
    b = torch.as_tensor(wrong).detach().cpu().double()
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] != a.shape[1]:
        raise ValueError(
            f"right and wrong must be square score matrices of one shape, "
            f"got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    future = torch.ones_like(a, dtype=torch.bool).triu(1)
    vmax = float(max(a.abs().max(), b.abs().max())) or 1.0
    fig, axes = new_figure(1, 2, width=MAX_WIDTH, height=3.9, sharey=True)
    for ax, data, title in zip(axes, (a, b), labels):
        image = ax.imshow(
            data.masked_fill(future, float("nan")).numpy(),
            cmap="RdBu_r",
            vmin=-vmax,
            vmax=vmax,
        )
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("key position n (tokens)")
    axes[0].set_ylabel("query position m (tokens)")
    fig.colorbar(image, ax=list(axes), shrink=0.9, label="score q·k/√d")
    return finish(fig, "Causal scores of one head")
