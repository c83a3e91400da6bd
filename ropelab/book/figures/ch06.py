"""Chapter 06's figures (attention and decay): Toeplitz scores, the decay bound."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from ropelab.frequencies import wavelengths

from ._style import finish, new_figure

__all__ = ["toeplitz_scores", "long_term_decay", "pair_turns"]


def toeplitz_scores(
    scores, *, title: str = "RoPE scores for the same q and k at every position"
) -> Figure:
    """Heatmap of a score matrix S[m, n] (query position m down, key position n across).

    For the same q and k at every position, RoPE makes S constant along every
    diagonal m - n = const (06_attention_and_decay, eq. ``attn-toeplitz``).

    Args:
        scores: ``(Lq, Lk)`` real tensor (any device; drawn from a float64 CPU copy).
    """
    s = scores.detach().to("cpu", dtype=torch.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must have shape (Lq, Lk), got {tuple(s.shape)}")
    fig, ax = new_figure(width=5.6, height=4.6)
    image = ax.imshow(
        s.numpy(), cmap="RdBu_r", vmin=-float(s.abs().max()), vmax=float(s.abs().max())
    )
    fig.colorbar(image, ax=ax, label="score ⟨R_m q, R_n k⟩ (dimensionless)")
    ax.set_xlabel("key position n (tokens)")
    ax.set_ylabel("query position m (tokens)")
    ax.set_title(title, fontsize="medium")
    return fig


def long_term_decay(
    distances, bound, *, random_mean_abs, equal_qk, dim: int, base: float
) -> Figure:
    """RoFormer's relative upper bound (top) above what scores actually do (bottom).

    Top: (1/(d/2)) Σ_j |S_j| against the relative distance, the curve of
    RoFormer's figure on long-term decay (06_attention_and_decay, eq.
    ``attn-decay-bound``). Bottom: the bound, the mean |score| over random q, k,
    and the score for q = k with equal pairs, each divided by its own value at
    distance 0; the legend sits below the panel, clear of the curves.

    Args:
        distances: ``(n,)`` integer distances, starting at 0.
        bound, random_mean_abs, equal_qk: ``(n,)`` real tensors on any device.
        dim, base: the settings, for the titles.
    """
    x = torch.as_tensor(distances).cpu().numpy()
    curves = [
        torch.as_tensor(c).detach().to("cpu", dtype=torch.float64)
        for c in (bound, random_mean_abs, equal_qk)
    ]
    if int(x[0]) != 0:
        raise ValueError(
            "distances must start at 0 (the curves are normalised there), got "
            f"{int(x[0])}"
        )
    # Stacked, so that each panel has the full column and short labels; the
    # legend sits below the lower panel, where it covers no curve.
    fig, (left, right) = new_figure(2, 1, width=6.4, height=7.6, sharex=True)
    left.plot(x, curves[0].numpy(), color="C0")
    left.set_xlabel("relative distance m − n (tokens)")
    left.tick_params(labelbottom=True)  # each panel reads on its own
    left.set_ylabel("bound B(δ) (dimensionless)")
    left.set_title(f"RoFormer's bound alone, d = {dim}, base {base:,.0f}",
                   fontsize="medium")
    labels = (
        "relative upper bound B(δ)",
        "mean |score|, random Gaussian q, k",
        "score for q = k (all h_j equal)",
    )
    for curve, label, color in zip(curves, labels, ("C0", "C1", "C2")):
        right.plot(x, (curve / curve[0]).numpy(), label=label, color=color)
    right.axhline(0.0, color="0.6", linewidth=0.8)
    right.set_xlabel("relative distance m − n (tokens)")
    right.set_ylabel("value ÷ value at δ = 0")
    right.set_title("the bound against actual scores", fontsize="medium")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                 frameon=False)
    return finish(fig, "Long-term decay: what the bound promises and what scores do")


def pair_turns(
    dim: int = 128, bases=(10000.0, 500000.0), context: int = 4096
) -> Figure:
    """How many full turns each pair j makes across ``context`` tokens:
    context·θ_j/(2π), log scale.

    (06_attention_and_decay, eq. ``attn-turns``.) Pairs above the dashed line
    (one turn) wrap around many times; pairs below it barely move.
    """
    fig, ax = new_figure()
    for base in bases:
        turns = context / wavelengths(dim, base)
        ax.plot(range(dim // 2), turns.numpy(), marker=".", label=f"base = {base:g}")
    ax.axhline(1.0, color="0.4", linestyle="--", label="one full turn")
    ax.set_yscale("log")
    ax.set_xlabel("pair index j (0 = fastest)")
    ax.set_ylabel(f"turns over {context} tokens, {context}·θ_j / 2π")
    ax.legend()
    return finish(fig, f"How far each pair turns across {context} tokens (d = {dim})")
