"""Chapter 05's figures (cache and decoding): cos tables, their error, decoding."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from ropelab.frequencies import inv_freq
from ropelab.rotary import cos_sin

from ._style import finish, new_figure

__all__ = ["cos_table", "table_error", "decode_scores"]


def cos_table(
    dim: int = 64,
    n_positions: int = 128,
    base: float = 10000.0,
    layouts: tuple[str, ...] = ("half_split", "interleaved"),
) -> Figure:
    """The cached cos table cos(m·θ) as a heatmap, positions × channels, one panel
    per layout.

    Half-split (eq. ``cache-cat``) shows the same d/2 columns twice, side by
    side; interleaved shows every column twice in a row. A dashed line marks
    channel d/2 in the half-split panel.
    """
    theta = inv_freq(dim, base, dtype=torch.float64)
    fig, axes = new_figure(
        1, len(layouts), width=3.6 * len(layouts) + 1.0, height=4.2, squeeze=False
    )
    image = None
    for ax, layout in zip(axes[0], layouts):
        cos, _ = cos_sin(
            torch.arange(n_positions), theta, layout=layout, dtype=torch.float64
        )
        image = ax.imshow(
            cos.numpy(),
            aspect="auto",
            cmap="RdBu_r",
            vmin=-1.0,
            vmax=1.0,
            interpolation="nearest",
            origin="upper",
        )
        if layout == "half_split":
            ax.axvline(dim / 2 - 0.5, color="black", linestyle="--", linewidth=1.0)
            ax.set_title(
                f"half-split: cat(a, a), halves split at channel {dim // 2}", fontsize=9
            )
        else:
            ax.set_title("interleaved: repeat_interleave(a, 2)", fontsize=9)
        ax.set_xlabel("channel i")
        ax.set_ylabel("position m (tokens)")
    cbar = fig.colorbar(image, ax=list(axes[0]), shrink=0.9)
    cbar.set_label("cos(m·θ) (unitless)")
    return finish(fig, f"The cached cos table, d = {dim}, base {base:,.0f}")


def table_error(
    positions, errors: dict, *, ylabel: str = "max |cos error| over channels"
) -> Figure:
    """The largest error of a cos table per position, one line per implementation
    (05_cache_and_decoding).

    Args:
        positions: 1-D positions (tokens).
        errors: name -> 1-D errors at ``positions`` (tensors or arrays); zeros are
            drawn at the floor of the log axis.
        ylabel: the y axis label, with units.
    """
    pos = torch.as_tensor(positions).cpu().numpy()
    fig, ax = new_figure(width=7.6, height=4.2)
    floor = 1e-9
    for name, err in errors.items():
        e = torch.as_tensor(err, dtype=torch.float64).cpu().numpy()
        if e.shape != pos.shape:
            raise ValueError(
                f"errors[{name!r}] has shape {e.shape}, positions {pos.shape}"
            )
        ax.plot(pos, np.maximum(e, floor), lw=1.0, label=name)
    ax.axhline(2.0, color="0.4", ls=":", lw=1.0, label="2, the largest possible")
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, 5)
    ax.set_xlabel("position m (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    # below the axes: the curves fill the plot from bottom to top
    fig.legend(loc="outside lower center", ncol=2, fontsize=9)
    return finish(fig, "Error of the cos table against exact arithmetic")


def decode_scores(correct, wrong, *, prompt_len: int, scale: float = 1.0) -> Figure:
    """Scores and attention weights of one decoding query over its cached keys: right
    offsets vs the offset mistake.

    Args:
        correct, wrong: 1-D scores (tensors or sequences) over keys 0..t, with the
            query at its absolute position and with positions restarted at 0 at
            every step (05_cache_and_decoding, eqs. ``cache-decode``,
            ``cache-mistake``).
        prompt_len: number of keys that came from the prompt (prefill); later keys
            were generated one per step and are shaded.
        scale: multiplies the scores before the softmax (1/√d in attention).
    """
    correct = torch.as_tensor(correct, dtype=torch.float64).cpu()
    wrong = torch.as_tensor(wrong, dtype=torch.float64).cpu()
    if correct.ndim != 1 or correct.shape != wrong.shape:
        raise ValueError(
            "correct and wrong must be 1-D of the same length, got "
            f"{tuple(correct.shape)} and {tuple(wrong.shape)}"
        )
    n = torch.arange(len(correct)).numpy()
    fig, (ax_s, ax_w) = new_figure(1, 2, width=10.0, height=3.8)
    for ax, f, ylabel in (
        (ax_s, lambda s: s, "score q·k (unitless)"),
        (
            ax_w,
            lambda s: torch.softmax(s * scale, dim=0),
            "attention weight",
        ),
    ):
        ax.plot(
            n,
            f(correct).numpy(),
            marker="o",
            markersize=3,
            label="absolute positions (offset)",
        )
        ax.plot(
            n,
            f(wrong).numpy(),
            marker="x",
            markersize=4,
            linestyle="--",
            label="offset mistake (restart at 0)",
        )
        if prompt_len < len(correct):
            ax.axvspan(
                prompt_len - 0.5,
                len(correct) - 0.5,
                color="0.9",
                label="generated keys",
            )
        ax.set_xlabel("key position n (tokens)")
        ax.set_ylabel(ylabel)
    # one legend for both panels, below them: inside, it would cover the curves
    fig.legend(*ax_s.get_legend_handles_labels(), loc="outside lower center", ncol=2)
    ax_s.set_title("scores of the newest query", fontsize=10)
    ax_w.set_title("softmax weights", fontsize=10)
    return finish(
        fig, f"Decoding step at position {len(correct) - 1}: offset vs restart at 0"
    )
