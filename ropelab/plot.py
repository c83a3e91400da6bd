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


# --- 02_complex_rotation --------------------------------------------------


# --- 03_pairing -------------------------------------------------------------


# --- 04_rotation_matrix ---------------------------------------------------


# --- 05_cache_and_decoding ----------------------------------------------

__all__ += ["cos_table", "decode_scores"]


def cos_table(
    dim: int = 64,
    n_positions: int = 128,
    base: float = 10000.0,
    layouts: tuple[str, ...] = ("half_split", "interleaved"),
) -> Figure:
    """The cached cos table cos(m·θ) as a heatmap, positions × channels, one panel per layout.

    Half-split (eq. ``cache-cat``) shows the same d/2 columns twice, side by
    side; interleaved shows every column twice in a row. A dashed line marks
    channel d/2 in the half-split panel.
    """
    import torch

    from .frequencies import inv_freq
    from .rotary import cos_sin

    theta = inv_freq(dim, base, dtype=torch.float64)
    fig, axes = _new_figure(1, len(layouts), width=3.6 * len(layouts) + 1.0, height=4.2, squeeze=False)
    image = None
    for ax, layout in zip(axes[0], layouts):
        cos, _ = cos_sin(torch.arange(n_positions), theta, layout=layout, dtype=torch.float64)
        image = ax.imshow(cos.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                          interpolation="nearest", origin="upper")
        if layout == "half_split":
            ax.axvline(dim / 2 - 0.5, color="black", linestyle="--", linewidth=1.0)
            ax.set_title(f"half-split: cat(a, a), halves split at channel {dim // 2}", fontsize=9)
        else:
            ax.set_title("interleaved: repeat_interleave(a, 2)", fontsize=9)
        ax.set_xlabel("channel i")
        ax.set_ylabel("position m (tokens)")
    cbar = fig.colorbar(image, ax=list(axes[0]), shrink=0.9)
    cbar.set_label("cos(m·θ) (unitless)")
    return _finish(fig, f"The cached cos table, d = {dim}, base {base:,.0f}")


def decode_scores(correct, wrong, *, prompt_len: int, scale: float = 1.0) -> Figure:
    """Scores and attention weights of one decoding query over its cached keys: right offsets vs the offset mistake.

    Args:
        correct, wrong: 1-D scores (tensors or sequences) over keys 0..t, with the
            query at its absolute position and with positions restarted at 0 at
            every step (05_cache_and_decoding, eqs. ``cache-decode``, ``cache-mistake``).
        prompt_len: number of keys that came from the prompt (prefill); later keys
            were generated one per step and are shaded.
        scale: multiplies the scores before the softmax (1/√d in attention).
    """
    import torch

    correct = torch.as_tensor(correct, dtype=torch.float64).cpu()
    wrong = torch.as_tensor(wrong, dtype=torch.float64).cpu()
    if correct.ndim != 1 or correct.shape != wrong.shape:
        raise ValueError(f"correct and wrong must be 1-D of the same length, got {tuple(correct.shape)} and {tuple(wrong.shape)}")
    n = torch.arange(len(correct)).numpy()
    fig, (ax_s, ax_w) = _new_figure(1, 2, width=10.0, height=3.8)
    for ax, f, ylabel in (
        (ax_s, lambda s: s, "score q·k (unitless)"),
        (ax_w, lambda s: torch.softmax(s * scale, dim=0), "attention weight (probability)"),
    ):
        ax.plot(n, f(correct).numpy(), marker="o", markersize=3, label="absolute positions (offset)")
        ax.plot(n, f(wrong).numpy(), marker="x", markersize=4, linestyle="--", label="offset mistake (restart at 0)")
        if prompt_len < len(correct):
            ax.axvspan(prompt_len - 0.5, len(correct) - 0.5, color="0.9", label="generated keys")
        ax.set_xlabel("key position n (tokens)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    ax_s.set_title("scores of the newest query", fontsize=10)
    ax_w.set_title("softmax weights", fontsize=10)
    return _finish(fig, f"Decoding step at position {len(correct) - 1}: offset vs restart at 0")



# --- 06_attention_and_decay ---------------------------------------------
