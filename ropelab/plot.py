"""Every figure the book shows, one function per figure.

Each function is pure: it takes data or parameters, computes what it needs
through ropelab, and returns a :class:`matplotlib.figure.Figure` with a
title, labelled axes (with units) and a legend where there is more than one
line. Figures are closed in pyplot before they are returned, so a notebook
shows each exactly once (as the cell's value) and no global figure state
leaks between cells. Only the notebooks import this module.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__: list[str] = []


def _new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0, **kw):
    """A fresh (fig, axes) pair, detached from pyplot's figure manager."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)
    return fig, axes


def _finish(fig: Figure, title: str) -> Figure:
    fig.suptitle(title)
    return fig


# --- 01_frequencies -------------------------------------------------------

__all__ += ["frequency_spectrum"]


def frequency_spectrum(
    dim: int = 128, bases: tuple[float, ...] = (1e4, 5e5), *, context_len: int | None = 8192
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
    import torch

    from .frequencies import full_turn_pairs, inv_freq, wavelengths

    fig, (ax_theta, ax_lambda) = _new_figure(1, 2, width=10.0, height=4.0)
    j = list(range(dim // 2))
    for base in bases:
        name = f"base = {base:,.0f}"
        ax_theta.plot(j, inv_freq(dim, base, dtype=torch.float64).tolist(), marker=".", ms=3, label=name)
        if context_len is not None:
            name += f" ({full_turn_pairs(dim, base, context_len)} pairs with $\\lambda_j \\leq L$)"
        ax_lambda.plot(j, wavelengths(dim, base).tolist(), marker=".", ms=3, label=name)
    if context_len is not None:
        ax_lambda.axhline(context_len, color="0.3", ls="--", lw=1, label=f"L = {context_len:,} tokens")
    ax_theta.set_title(r"frequency $\theta_j$")
    ax_theta.set_ylabel(r"$\theta_j$ (radians per token)")
    ax_lambda.set_title(r"wavelength $\lambda_j = 2\pi/\theta_j$")
    ax_lambda.set_ylabel(r"$\lambda_j$ (tokens)")
    for ax in (ax_theta, ax_lambda):
        ax.set_yscale("log")
        ax.set_xlabel(r"pair index $j$ (0-based)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    return _finish(fig, f"The RoPE frequency ladder, d = {dim}")


# --- 02_complex_rotation --------------------------------------------------


# --- 03_pairing -------------------------------------------------------------


# --- 04_rotation_matrix ---------------------------------------------------


# --- 05_cache_and_decoding ----------------------------------------------


# --- 06_attention_and_decay ---------------------------------------------
