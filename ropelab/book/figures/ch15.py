"""Chapter 15's figures (a real pretrained model): which pairs q and k use, where
the heads attend by distance, perplexity beyond the trained length, and the
bfloat16 rebuild's damage."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from ._style import MAX_WIDTH, finish, new_figure

__all__ = ["pair_usage", "attention_distance", "extension_perplexity", "rebuild_damage"]

_MARKERS = "osD^vPX*"
_DASHES = ("-", "--", "-.", ":")


def pair_usage(usage, wavelengths, groups: dict, *, context: int) -> Figure:
    """Each pair's share of the q·k budget: per layer (mean over heads), and per
    group of heads against the pair's wavelength (15).

    Args:
        usage: ``(layers, heads, pairs)`` shares, each head's summing to 1.
        wavelengths: ``(pairs,)`` wavelengths in tokens.
        groups: label -> list of ``(layer, head)`` for the right panel.
        context: the trained context (a dotted line at that wavelength).
    """
    u = np.asarray(usage, dtype=float)
    lam = np.asarray(wavelengths, dtype=float)
    pairs = u.shape[-1]
    fig, (left, right) = new_figure(
        1, 2, width=MAX_WIDTH, height=4.6, gridspec_kw={"width_ratios": [1.0, 1.15]}
    )
    image = left.imshow(
        u.mean(1) * pairs,
        aspect="auto",
        origin="lower",
        cmap="viridis",
        norm=mpl.colors.LogNorm(vmin=1 / 8, vmax=8),
        extent=(-0.5, pairs - 0.5, -0.5, u.shape[0] - 0.5),
    )
    left.set_xlabel("pair j (slower →)")
    left.set_ylabel("layer")
    left.set_title("mean over heads")
    bar = fig.colorbar(image, ax=left, location="bottom", shrink=0.9, pad=0.02)
    ticks = [1 / 8, 1 / 2, 2, 8]
    bar.set_ticks(ticks, labels=["1/8", "1/2", "2", "8"])
    bar.ax.minorticks_off()
    bar.set_label("share × d/2 (1 = even)")
    for i, (label, members) in enumerate(groups.items()):
        rows = np.stack([u[layer, head] for layer, head in members]) * pairs
        right.plot(
            lam,
            rows.mean(0),
            marker=_MARKERS[i],
            markersize=3.5,
            linestyle=_DASHES[i % 4],
            label=f"{label} ({len(members)})",
        )
    right.axhline(1.0, color="0.6", linewidth=0.8)
    right.axvline(context, color="0.4", linestyle=":", label="trained context")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel(r"wavelength $\lambda_j$ (tokens)")
    right.set_ylabel("share × d/2")
    right.set_title("by kind of head")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    return finish(fig, "Which pairs carry the scores")


def attention_distance(profile, bin_edges, sink) -> Figure:
    """Mean attention weight on one key at distance Δ, per layer (log-binned), and
    the weight on the first token (15).

    Args:
        profile: ``(layers, bins)`` mean weight per key, over heads and queries.
        bin_edges: ``bins + 1`` distance edges in tokens.
        sink: ``(layers,)`` mean weight on the first token.
    """
    p = np.asarray(profile, dtype=float)
    edges = np.asarray(bin_edges, dtype=float)
    fig, (left, right) = new_figure(
        1,
        2,
        width=MAX_WIDTH,
        height=4.2,
        sharey=True,
        gridspec_kw={"width_ratios": [3.2, 1.0]},
    )
    layers = np.arange(p.shape[0] + 1) - 0.5
    image = left.pcolormesh(
        edges,
        layers,
        np.clip(p, 1e-6, None),
        cmap="magma",
        norm=mpl.colors.LogNorm(vmin=1e-5, vmax=1.0),
    )
    left.set_xscale("log")
    left.set_xlabel("distance m − n (tokens)")
    left.set_ylabel("layer")
    left.set_title("weight on one key")
    bar = fig.colorbar(image, ax=left, location="bottom", shrink=0.9, pad=0.02)
    bar.set_label("mean attention weight")
    right.barh(np.arange(p.shape[0]), np.asarray(sink, dtype=float), color="#0072B2")
    right.set_xlim(0, 1)
    right.set_xlabel("weight")
    right.set_title("first token")
    return finish(fig, "Where attention goes, by distance and layer")


def extension_perplexity(
    blocks: dict, intervals: dict | None = None, *, block: int, context: int, title: str
) -> Figure:
    """Perplexity by block of positions for each method (15).

    Args:
        blocks: method -> perplexity of each block of ``block`` tokens.
        intervals: method -> ``(low, high)`` lists for a shaded band (optional).
        block: tokens per block; context: the trained length (a dotted line).
    """
    fig, ax = new_figure(width=MAX_WIDTH, height=4.3)
    for i, (name, ppl) in enumerate(blocks.items()):
        x = (np.arange(len(ppl)) + 0.5) * block / 1024
        ax.plot(
            x,
            ppl,
            marker=_MARKERS[i % 8],
            markersize=4,
            linestyle=_DASHES[i % 4],
            label=name,
        )
        if intervals and name in intervals:
            lo, hi = intervals[name]
            ax.fill_between(x, lo, hi, alpha=0.15)
    ax.axvline(context / 1024, color="0.4", linestyle=":")
    ax.text(
        context / 1024,
        0.98,
        " trained length",
        transform=ax.get_xaxis_transform(),
        va="top",
        ha="left",
        color="0.3",
    )
    ax.set_yscale("log")
    ax.set_xlabel("position of the block (thousands of tokens)")
    ax.set_ylabel("perplexity of the block")
    fig.legend(loc="outside lower center", ncols=4)
    return finish(fig, title)


def rebuild_damage(correct, faulty, agreement, *, block: int) -> Figure:
    """Perplexity by block with correct and with rebuilt bfloat16 tables, and how
    often the two predict the same next token (15)."""
    fig, (left, right) = new_figure(1, 2, width=MAX_WIDTH, height=4.1)
    x = np.arange(len(correct)) * block + block / 2
    left.plot(x, correct, marker="o", markersize=4, label="float32 tables")
    left.plot(
        x, faulty, marker="s", markersize=4, linestyle="--", label="rebuilt in bfloat16"
    )
    left.set_yscale("log")
    left.set_ylabel("perplexity of the block")
    fig.legend(loc="outside lower center", ncols=2)
    right.plot(
        x,
        100 * np.asarray(agreement, dtype=float),
        marker="D",
        markersize=4,
        color="#009E73",
    )
    right.set_ylim(0, 100)
    right.set_ylabel("same next token (%)")
    for ax in (left, right):
        ax.set_xlabel("position (middle of the block)")
    return finish(fig, "Chapter 05's bfloat16 rebuild on the real model")
