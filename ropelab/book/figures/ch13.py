"""Chapter 13's figures (current architectures): spectra, decay, position maps."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ._style import BOOK_STYLE, MAX_WIDTH, finish, new_figure

__all__ = ["variant_spectra", "variant_decay", "relative_position_maps", "layer_plans"]


def variant_spectra(spectra: dict, *, context: int | None = None) -> Figure:
    """Wavelength 2π/θ_j of every pair j, one line per variant (chapter 13).

    Pairs with θ_j = 0 (not rotated) are drawn as crosses above the lines.

    Args:
        spectra: label -> ``(d/2,)`` frequencies θ_j (0 for a pair not rotated).
        context: if given, a horizontal line at this many tokens (the training context).
    """
    if not spectra:
        raise ValueError("spectra must name at least one set of frequencies")
    fig, ax = new_figure(width=7.0, height=4.2)
    finite = [2 * torch.pi / t.double()[t > 0] for t in spectra.values()]
    top = 10 * max(float(w.max()) for w in finite if len(w))
    for i, (label, theta) in enumerate(spectra.items()):
        t = theta.detach().to("cpu", torch.float64)
        j = torch.arange(len(t))
        rot = t > 0
        color = f"C{i}"
        wl = (2 * torch.pi / t[rot]).numpy()
        ax.plot(j[rot].numpy(), wl, marker="o", ms=3, label=label, color=color)
        flat = torch.full((int((~rot).sum()),), top * 1.6**i).numpy()
        ax.plot(j[~rot].numpy(), flat, marker="x", ms=4, linestyle="none", color=color)
    ax.axhline(top / 1.5, color="0.6", linewidth=0.8, linestyle=":")
    ax.text(0, top * 1.1, "× not rotated (θ = 0)", fontsize="small", color="0.3")
    if context is not None:
        label = f"context {context:,} tokens"
        ax.axhline(context, color="k", linewidth=0.8, linestyle="--", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("pair index j")
    ax.set_ylabel("wavelength 2π/θ_j (tokens)")
    ax.legend(fontsize="small", loc="lower right")
    return finish(fig, "Which pairs rotate, and how slowly")


def variant_decay(
    distances, curves: dict, *, ylabel: str = "score / score at distance 0"
) -> Figure:
    """Probe score (q = k, equal pairs) against distance, per variant (chapter 13).

    Args:
        distances: ``(n,)`` distances in tokens.
        curves: label -> ``(n,)`` values, already normalised as ``ylabel`` says.
    """
    x = torch.as_tensor(distances).cpu().numpy()
    fig, ax = new_figure(width=7.0, height=4.2)
    for i, (label, c) in enumerate(curves.items()):
        y = torch.as_tensor(c).detach().to("cpu", torch.float64).numpy()
        ax.plot(x, y, label=label, color=f"C{i}")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(0, float(x.max()))
    ax.set_xlabel("relative distance m − n (tokens, linear to 10, then log)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    return finish(fig, "What each variant does to the decay of chapter 06")


def relative_position_maps(maps: dict) -> Figure:
    """Relative position ρ(m, n) per method, causal part, one heatmap each
    (chapter 13).

    Args:
        maps: title -> ``(seq, seq)`` real matrix ρ(m, n).
    """
    if not maps:
        raise ValueError("maps must name at least one method")
    vmax = max(float(m.max()) for m in maps.values())
    ncols = min(2, len(maps))
    nrows = -(-len(maps) // ncols)
    fig, axes = new_figure(
        nrows, ncols, width=MAX_WIDTH, height=3.1 * nrows + 0.6, squeeze=False
    )
    for ax in axes.flat[len(maps) :]:
        ax.set_visible(False)
    for ax, (name, rho) in zip(axes.flat, maps.items()):
        r = rho.detach().to("cpu", torch.float64)
        causal = torch.ones_like(r, dtype=torch.bool).tril()
        r = torch.where(causal, r, torch.full_like(r, float("nan")))
        image = ax.imshow(r.numpy(), cmap="viridis", vmin=0, vmax=vmax)
        ax.set_xlabel("key position n (tokens)")
        ax.set_ylabel("query m (tokens)")
        ax.set_title(name, fontsize="medium")
    label = "relative position ρ(m, n) (tokens)"
    fig.colorbar(image, ax=list(axes.flat), shrink=0.8, label=label)
    return finish(fig, "The relative position each method hands to RoPE")


def layer_plans(plans: dict) -> Figure:
    """Which layers rotate, and with which base, one row per model (chapter 13).

    Args:
        plans: model name -> list of per-layer dicts with ``"rope"`` and ``"base"``
            (as ``ropelab.variants.layer_rope_plan`` returns).
    """
    if not plans:
        raise ValueError("plans must name at least one model")
    bases = sorted({p["base"] for plan in plans.values() for p in plan if p["rope"]})
    cycle = BOOK_STYLE["axes.prop_cycle"].by_key()["color"]
    colors = {b: cycle[i % len(cycle)] for i, b in enumerate(bases)}
    n = max(len(plan) for plan in plans.values())
    fig, ax = new_figure(width=MAX_WIDTH, height=0.5 * len(plans) + 2.2)
    for row, (name, plan) in enumerate(plans.items()):
        for i, p in enumerate(plan):
            color = colors[p["base"]] if p["rope"] else "0.85"
            ax.add_patch(Rectangle((i, row), 0.9, 0.8, color=color))
    ax.set_xlim(0, n)
    ax.set_ylim(len(plans), -0.2)
    ax.set_yticks([r + 0.4 for r in range(len(plans))], list(plans))
    ax.set_xlabel("layer index")
    handles = [Patch(color=colors[b], label=f"RoPE, base {b:,.0f}") for b in bases]
    handles.append(Patch(color="0.85", label="no position encoding"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    return finish(fig, "Which layers rotate, with which base")
