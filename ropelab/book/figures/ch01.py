"""Chapter 01's figures (frequencies): the encoding, the ladder, angles, wavelengths."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure

from ropelab.frequencies import angles, full_turn_pairs, inv_freq, wavelengths

from ._style import finish, new_figure

__all__ = [
    "sinusoidal_encoding",
    "frequency_ladder",
    "angle_sawtooth",
    "wavelength_bars",
    "full_turn_count",
    "frequency_spectrum",
]


def sinusoidal_encoding(d_model: int = 64, n_positions: int = 128) -> Figure:
    """The Transformer's sinusoidal encoding PE(m, c) as a heatmap
    (01_frequencies, eq. ``freq-sinusoidal``).

    Rows are positions m, columns channels c; channel 2i holds sin(m·θ_i) and
    2i + 1 holds cos(m·θ_i), θ_i = 10000^(−2i/d). The left columns change
    every token, the right ones barely move: the geometric ladder of speeds.
    """
    m = torch.arange(n_positions, dtype=torch.float64)[:, None]
    theta = 10000.0 ** (-2 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(m * theta), torch.cos(m * theta)
    fig, ax = new_figure(width=6.4, height=4.4)
    image = ax.imshow(
        pe.numpy(),
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        interpolation="nearest",
    )
    fig.colorbar(image, ax=ax, shrink=0.9, label="PE(m, c) (unitless)")
    ax.set_xlabel("channel c (sin at even c, cos at odd c)")
    ax.set_ylabel("position m (tokens)")
    return finish(fig, f"Sinusoidal position encoding, d = {d_model}")


def frequency_ladder(dim: int = 128, bases: tuple[float, ...] = (1e4, 5e5)) -> Figure:
    """θ_j against the pair index, the code's 0-based j below and RoFormer's 1-based j
    above (01_frequencies).

    A log y axis turns the geometric ladder θ_j = b^(−2j/d) into straight
    lines from θ_0 = 1; the top axis relabels the same points with the
    paper's index j + 1 (eqs. ``theta`` and ``freq-theta0``).
    """

    fig, ax = new_figure(width=6.4, height=4.2)
    j = list(range(dim // 2))
    for base in bases:
        ax.plot(
            j,
            inv_freq(dim, base, dtype=torch.float64).tolist(),
            marker=".",
            ms=4,
            label=f"base b = {base:,.0f}",
        )
    ax.set_yscale("log")
    ax.set_xlabel(r"pair index $j$ in the code (0-based): $\theta_j = b^{-2j/d}$")
    ax.set_ylabel(r"frequency $\theta_j$ (radians per token)")
    top = ax.secondary_xaxis("top", functions=(lambda x: x + 1, lambda x: x - 1))
    top.set_xlabel("RoFormer's index (1-based) for the same pair")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return finish(fig, f"The frequency ladder, d = {dim}")


def angle_sawtooth(
    dim: int = 128,
    pairs: tuple[int, ...] = (0, 8, 16, 32),
    n_positions: int = 64,
    base: float = 10000.0,
) -> Figure:
    """The angle m·θ_j modulo 2π against the position m for a few pairs j
    (01_frequencies, eq. ``angles``).

    Each pair's angle grows linearly; a fast pair wraps around the circle
    many times (a sawtooth), a slow one hardly leaves 0.
    """


    pos = torch.arange(n_positions)
    phi = angles(pos, inv_freq(dim, base, dtype=torch.float64))
    fig, ax = new_figure(width=7.2, height=4.0)
    for j in pairs:
        wrapped = torch.remainder(phi[:, j], 2 * math.pi)
        ax.plot(
            pos.numpy(),
            wrapped.numpy(),
            marker=".",
            ms=4,
            lw=1.0,
            label=(
                rf"pair $j = {j}$, $\theta_{{{j}}}$ = "
                rf"{float(phi[1, j]):.3g} rad/token"
            ),
        )
    ax.set_ylim(-0.2, 2 * math.pi + 0.2)
    ax.set_yticks([0, math.pi, 2 * math.pi], ["0", "π", "2π"])
    ax.set_xlabel("position m (tokens)")
    ax.set_ylabel(r"angle $m\theta_j$ mod $2\pi$ (radians)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig, f"Rotation angles of four pairs, d = {dim}, base {base:,.0f}")


def wavelength_bars(
    dim: int = 128,
    base: float = 10000.0,
    contexts: tuple[int, ...] = (2048, 8192, 32768),
) -> Figure:
    """Every pair's wavelength λ_j = 2π/θ_j on a log axis, with context lengths
    marked (01_frequencies).

    The bars run from λ_0 = 2π to λ_{d/2−1} = 2π·b^{(d−2)/d} (eqs.
    ``wavelength``, ``freq-extremes``); a pair whose bar stays below a
    dashed line completes a full turn within that context.
    """
    lam = wavelengths(dim, base)
    fig, ax = new_figure(width=7.2, height=4.0)
    ax.bar(range(dim // 2), lam.numpy(), width=0.8, color="tab:blue", alpha=0.8)
    for L, style in zip(contexts, ("--", "-.", ":")):
        ax.axhline(L, color="0.25", ls=style, lw=1.2, label=f"L = {L:,} tokens")
    ax.set_yscale("log")
    ax.set_xlabel("pair index j (0-based)")
    ax.set_ylabel(r"wavelength $\lambda_j$ (tokens per turn)")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    # below the axes: inside, the legend would sit on the lines it names
    fig.legend(loc="outside lower center", ncol=len(contexts))
    return finish(
        fig, f"Wavelengths of the {dim // 2} pairs, d = {dim}, base {base:,.0f}"
    )


def full_turn_count(
    dim: int = 128, bases: tuple[float, ...] = (1e4, 5e5), max_len: int = 2**20
) -> Figure:
    """N(L), the number of pairs with λ_j ≤ L, against the context length L
    (01_frequencies, eq. ``freq-fullturn``).

    Counted directly from the wavelengths at each L; a staircase that climbs
    by one pair every time L passes a wavelength, up to d/2.
    """

    lengths = np.unique(np.geomspace(1, max_len, 2000).round())
    fig, ax = new_figure(width=7.2, height=4.0)
    for base in bases:
        lam = wavelengths(dim, base).numpy()
        counts = (lam[None, :] <= lengths[:, None]).sum(1)
        ax.step(lengths, counts, where="post", label=f"base b = {base:,.0f}")
    ax.axhline(
        dim // 2, color="0.5", ls=":", lw=1.0, label=f"all d/2 = {dim // 2} pairs"
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel(r"pairs with $\lambda_j \leq L$, $N(L)$")
    ax.grid(True, which="major", alpha=0.3)
    # the staircases start at the left and the d/2 line runs along the top
    ax.legend(loc="lower right")
    return finish(fig, f"How many pairs complete a turn within L tokens, d = {dim}")


def frequency_spectrum(
    dim: int = 128,
    bases: tuple[float, ...] = (1e4, 5e5),
    *,
    context_len: int | None = 8192,
) -> Figure:
    """θ_j and λ_j = 2π/θ_j against the pair index j for each base (01_frequencies).

    Two panels with a log y axis: the frequencies (eq. ``theta``) and the
    wavelengths (eq. ``wavelength``). Both are straight lines on a log axis,
    since they are geometric in j. A dashed line marks ``context_len`` on the
    wavelength panel: the pairs below it complete a full turn within that
    context (eq. ``freq-fullturn``).

    Args:
        dim: head dimension d.
        bases: the bases to compare, one line each.
        context_len: a context length in tokens to mark, or None.
    """
    fig, (ax_theta, ax_lambda) = new_figure(1, 2, width=10.0, height=4.0)
    j = list(range(dim // 2))
    for base in bases:
        name = f"base = {base:,.0f}"
        ax_theta.plot(
            j,
            inv_freq(dim, base, dtype=torch.float64).tolist(),
            marker=".",
            ms=3,
            label=name,
        )
        if context_len is not None:
            name = (
                f"{full_turn_pairs(dim, base, context_len)} pairs with "
                "$\\lambda_j \\leq L$"
            )
        ax_lambda.plot(j, wavelengths(dim, base).tolist(), marker=".", ms=3, label=name)
    if context_len is not None:
        ax_lambda.axhline(
            context_len, color="0.3", ls="--", lw=1, label=f"L = {context_len:,} tokens"
        )
    ax_theta.set_title(r"frequency $\theta_j$")
    ax_theta.set_ylabel(r"$\theta_j$ (radians per token)")
    ax_lambda.set_title(r"wavelength $\lambda_j = 2\pi/\theta_j$")
    ax_lambda.set_ylabel(r"$\lambda_j$ (tokens)")
    for ax in (ax_theta, ax_lambda):
        ax.set_yscale("log")
        ax.set_xlabel(r"pair index $j$ (0-based)")
        ax.grid(True, which="major", alpha=0.3)
    # in the corner each panel's lines leave empty (the colours name the bases)
    ax_theta.legend(loc="lower left", fontsize="small")
    # room above the lines for the legend
    ax_lambda.set_ylim(top=30 * wavelengths(dim, max(bases)).max().item())
    ax_lambda.legend(loc="upper left", fontsize="small")
    return finish(fig, f"The RoPE frequency ladder, d = {dim}")
