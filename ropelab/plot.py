"""Every figure the book shows, one function per figure.

Each function is pure: it takes data or parameters, computes what it needs
through ropelab, and returns a :class:`matplotlib.figure.Figure` with a
title, labelled axes (with units) and a legend where there is more than one
line. Figures are closed in pyplot before they are returned, so a notebook
shows each exactly once (as the cell's value) and no global figure state
leaks between cells. Only the notebooks import this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass

import matplotlib as mpl
import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from .cost import cost_model
from .complex import apply_rotary_complex, relative_score
from .frequencies import full_turn_pairs, inv_freq, wavelengths
from .matrix import (
    elementwise_flops,
    floats_per_position,
    matmul_flops,
    rotation_matrix,
)
from .multi_axis import grid_positions, rope_scores_2d
from .numerics import cos_error, cos_error_bound, log_positions
from .pairing import half_split_permutation
from .rotary import cos_sin
from .scaling import ntk_scaled_base, scaled_inv_freq

__all__ = [
    "BOOK_STYLE",
    "COLUMN_WIDTH",
    "MAX_WIDTH",
    "MIN_FONT_PT",
    "rendered_font_sizes",
    "frequency_spectrum",
    "pair_rotation",
    "pair_score",
    "pairing_diagram",
    "score_comparison",
    "rotation_matrix_sparsity",
    "rotation_cost",
    "cos_table",
    "decode_scores",
    "toeplitz_scores",
    "long_term_decay",
    "pair_turns",
    "context_extension_factors",
    "angle_precision",
    "bench_ratios",
    "patch_score_maps",
    "triton_programs",
    "kernel_traffic",
    "rope_at_a_glance",
    "pi_interpolation",
    "angle_overshoot",
    "stale_cache_error",
    "yarn_ramps",
    "attention_temperature",
    "llama3_bands",
    "longrope_factors",
    "angle_error_sources",
    "cost_bars",
    "bench_grid",
    "sinusoidal_encoding",
    "frequency_ladder",
    "angle_sawtooth",
    "wavelength_bars",
    "full_turn_count",
    "shift_invariance",
    "table_error",
    "variant_spectra",
    "variant_decay",
    "relative_position_maps",
    "layer_plans",
    "dynamic_ntk_scores",
    "layout_scores",
    "packing_masks",
    "rerotation_drift",
    "toy_attention",
    "attention_entropy_by_length",
    "extrapolation_accuracy",
]

# --- the book's one figure style ------------------------------------------
#
# A figure is shown as a PNG scaled to fit the book's text column (7 in =
# 672 CSS px in a 1280 px window, 768 px at 1400; the image's max-width is
# 100 %). Text must read at MIN_FONT_PT points or more *as rendered*, so:
# - no figure is wider than MAX_WIDTH: a wider request is scaled down to it,
#   height in proportion (the fonts keep their size, so they grow relative to
#   the drawing). The notebook stores the figure's tight bounding box plus
#   0.1 in of padding on each side (savefig.pad_inches), hence 0.2 in less
#   than the column;
# - the PNG is rendered at DPI = 192 (twice the CSS 96 px/in: sharp on HiDPI
#   screens and in print), so it is at least as wide as the column and the
#   browser only ever scales it *down to the column* or shows it larger:
#   every figure inch is at least one rendered inch;
# - every text is drawn at FLOOR_PT or larger (enforced when the figure is
#   drawn, whatever sizes a figure function asked for): 5 % over MIN_FONT_PT,
#   the slack for a drawing whose bounding box runs a little past its edges.
# The figure background is transparent and the axes white: on a light page the
# figure sits on the page, in dark mode the theme puts a light card behind
# images, and the white plot area stays readable on both.
COLUMN_WIDTH = 7.0  # inches: the book column at 96 CSS px per inch
PAD = 0.1  # inches around the tight bounding box in the stored PNG
MAX_WIDTH = COLUMN_WIDTH - 2 * PAD  # the widest figure
MIN_FONT_PT = 9.0  # the smallest text as rendered, in points
FLOOR_PT = 9.5  # the smallest text as drawn
DPI = 192
BOOK_STYLE: dict[str, object] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.pad_inches": PAD,
    "axes.facecolor": "white",
    "font.family": "DejaVu Sans",
    "mathtext.fontset": "dejavusans",
    "font.size": 11.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 11.0,
    "figure.titlesize": 12.0,
    "figure.titleweight": "bold",
    "xtick.labelsize": 10.0,
    "ytick.labelsize": 10.0,
    "legend.fontsize": 10.0,
    "legend.title_fontsize": 10.0,
    "legend.framealpha": 0.9,
    "axes.grid": False,
    "grid.alpha": 0.3,
    # Okabe-Ito colours: told apart with the common colour-vision deficiencies.
    "axes.prop_cycle": mpl.cycler(
        color=[
            "#0072B2",
            "#D55E00",
            "#009E73",
            "#CC79A7",
            "#E69F00",
            "#56B4E9",
            "#F0E442",
            "#000000",
        ]
    ),
}


class _BookFigure(Figure):
    """A Figure that draws in the book's style, whatever its functions asked for.

    Text sizes given as names ("small") or points below FLOOR_PT are raised
    to FLOOR_PT when the figure is drawn (saved, displayed), and ticks made
    during the draw take BOOK_STYLE's sizes.
    """

    def draw(self, renderer):
        with mpl.rc_context(BOOK_STYLE):
            for text in self.findobj(Text):
                if text.get_fontsize() < FLOOR_PT:
                    text.set_fontsize(FLOOR_PT)
            for ax in self.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                        for label in (tick.label1, tick.label2):
                            if label.get_fontsize() < FLOOR_PT:
                                label.set_fontsize(FLOOR_PT)
                ax.tick_params(which="both", labelsize=max(FLOOR_PT, _tick_size(ax)))
            return super().draw(renderer)


def _tick_size(ax) -> float:
    """The size new tick labels of ``ax`` get (its tick_params, else the style)."""
    size = ax.xaxis._major_tick_kw.get("labelsize", BOOK_STYLE["xtick.labelsize"])
    return float(mpl.font_manager.FontProperties(size=size).get_size_in_points())


def _new_figure(
    nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0, **kw
):
    """A fresh (fig, axes) pair in the book's style, detached from pyplot.

    ``width`` and ``height`` are in inches; a width over MAX_WIDTH is scaled
    down to it, the height in proportion, so the figure is never shrunk in the
    column (its text would shrink with it).
    """
    if width > MAX_WIDTH:
        width, height = MAX_WIDTH, height * MAX_WIDTH / width
    with mpl.rc_context(BOOK_STYLE):
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(width, height),
            layout="constrained",
            FigureClass=_BookFigure,
            **kw,
        )
    plt.close(fig)
    return fig, axes


def _wrap_title(title: str, chars: int) -> str:
    """``title`` broken at spaces into lines of at most ``chars`` characters.

    Never breaks inside ``$...$`` (mathtext must stay on one line); an explicit
    newline in the title is kept.
    """
    lines = []
    for paragraph in title.split("\n"):
        words, line = [], ""
        for word in paragraph.split(" "):  # re-join the words of a $...$ span
            if words and words[-1].count("$") % 2:
                words[-1] += " " + word
            else:
                words.append(word)
        for word in words:
            if line and len(line) + 1 + len(word) > chars:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "\n".join(lines)


def _finish(fig: Figure, title: str) -> Figure:
    """Give ``fig`` its title, in the book's style, wrapped to the figure's width."""
    size = float(BOOK_STYLE["figure.titlesize"])
    # A bold DejaVu Sans character is about 0.65 em wide on average.
    chars = int(fig.get_figwidth() * 72 / (0.65 * size))
    with mpl.rc_context(BOOK_STYLE):
        fig.suptitle(_wrap_title(title, chars))
    return fig


def rendered_font_sizes(
    fig: Figure, column_px: float = COLUMN_WIDTH * 96
) -> list[tuple[str, float]]:
    """Each visible text of ``fig`` and its size in points as the book shows it.

    The notebook stores the figure as a PNG of its tight bounding box plus
    PAD on each side at ``fig.dpi``; the page shows it at its natural size
    (96 px per CSS inch) or, if wider, scaled down to the column
    (``column_px`` CSS pixels).

    Returns:
        (text, rendered size in pt) for every visible, non-empty text.
    """
    fig.draw_without_rendering()  # lays it out and applies the style, as saving does
    width_in = fig.get_tightbbox().width + 2 * PAD  # inches, as the notebook stores it
    natural_px = width_in * fig.dpi
    # rendered inches per figure inch
    scale = min(natural_px, column_px) / (width_in * 96)
    return [
        (t.get_text(), t.get_fontsize() * scale)
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure(root=True) is fig
    ]


# --- intro ----------------------------------------------------------------


def rope_at_a_glance(
    theta: float = 0.5,
    m: int = 1,
    n: int = 3,
    shift: int = 2,
    dim: int = 16,
    base: float = 10000.0,
    position: int = 3,
) -> Figure:
    """The book's opening picture: RoPE's relative property and its frequency ladder.

    Left: one pair turned by its angle: a query at position ``m`` and a key at
    ``n`` (both starting at angle 0 and 40°), and the same two shifted by
    ``shift`` positions; the angle between them, (n − m)θ + 40°, is the same.
    Right: the d/2 pairs as clock hands at ``position``: pair j has turned by
    position·θ_j, θ_j = base^(−2j/d) (intro, chapters 01 and 02).
    """
    import math

    fig, (left, right) = _new_figure(
        1, 2, width=6.8, height=3.3, width_ratios=[1, 1.25]
    )
    t = np.linspace(0, 2 * math.pi, 200)
    left.plot(np.cos(t), np.sin(t), color="0.75", lw=1)
    k0 = math.radians(40)
    colours = BOOK_STYLE["axes.prop_cycle"].by_key()["color"]
    for s, alpha, ls in ((0, 1.0, "-"), (shift, 0.45, "--")):
        for angle, colour, name in (
            ((m + s) * theta, colours[0], "q"),
            ((n + s) * theta + k0, colours[1], "k"),
        ):
            left.annotate(
                "",
                xy=(math.cos(angle), math.sin(angle)),
                xytext=(0, 0),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": colour,
                    "alpha": alpha,
                    "lw": 2,
                    "ls": ls,
                },
            )
            pos = m + s if name == "q" else n + s
            left.text(
                1.18 * math.cos(angle),
                1.18 * math.sin(angle),
                f"${name}_{{{pos}}}$",
                ha="center",
                va="center",
                color=colour,
                alpha=max(alpha, 0.7),
            )
    a0, a1 = m * theta, n * theta + k0
    arc = np.linspace(a0, a1, 50)
    left.plot(0.35 * np.cos(arc), 0.35 * np.sin(arc), color="0.2", lw=1.2)
    left.text(
        0.0,
        -1.45,
        "same angle after a shift:\nthe score sees only n − m",
        ha="center",
        va="top",
    )
    left.set_xlim(-1.35, 1.35)
    left.set_ylim(-1.35, 1.35)
    left.set_aspect(1.0)
    left.axis("off")
    left.set_title("one pair, rotated")

    pairs = dim // 2
    for j in range(pairs):
        th = base ** (-2 * j / dim)
        cx, cy = (j % 4) * 2.4, -(j // 4) * 2.6
        right.plot(cx + np.cos(t), cy + np.sin(t), color="0.75", lw=1)
        ang = position * th
        right.plot(
            [cx, cx + math.cos(ang)], [cy, cy + math.sin(ang)], color=colours[0], lw=2
        )
        right.plot([cx, cx + 1], [cy, cy], color="0.6", lw=1, ls=":")
        right.text(cx, cy - 1.25, f"j = {j}", ha="center", va="top")
    right.set_xlim(-1.3, 3 * 2.4 + 1.3)
    right.set_ylim(-2.6 - 1.9, 1.3)
    right.set_aspect(1.0)
    right.axis("off")
    right.set_title(f"{pairs} pairs at position {position}: fast to slow")
    return _finish(fig, "RoPE rotates each pair of channels by its position")


# --- 01_frequencies -------------------------------------------------------


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
    fig, (ax_theta, ax_lambda) = _new_figure(1, 2, width=10.0, height=4.0)
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
            name += (
                f" ({full_turn_pairs(dim, base, context_len)} pairs with "
                "$\\lambda_j \\leq L$)"
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
        ax.legend(fontsize="small")
    return _finish(fig, f"The RoPE frequency ladder, d = {dim}")


# --- 02_complex_rotation --------------------------------------------------


def pair_rotation(
    thetas: Sequence[float] = (1.0, 10000.0 ** (-126 / 128)),
    positions: Sequence[int] = range(8),
    *,
    pair: tuple[float, float] = (1.0, 0.0),
    names: Sequence[str] | None = None,
) -> Figure:
    """One channel pair z = x₁ + i·x₂ rotated to z·e^{imθ} at several positions
    m, one panel per θ.

    Each panel draws the circle |z| and an arrow from the origin to z·e^{imθ}
    for every m in ``positions``, annotated with m (02_complex_rotation,
    eq. ``euler``). When a panel's whole sweep is under 0.2 rad (a slow pair),
    an inset zooms in on the arrow tips so the positions can be told apart.

    Args:
        thetas: the frequencies θ (rad per token), one panel each. The default
            is θ_0 = 1 and θ_63 = 10000^(-126/128) for d = 128.
        positions: the integer positions m to draw.
        pair: the pair (x₁, x₂) at position 0.
        names: panel titles' names for the frequencies (default θ = value).
    """
    thetas = [float(t) for t in thetas]
    pos = list(positions)
    names = (
        list(names)
        if names is not None
        else [f"θ = {t:.3g} rad/token" for t in thetas]
    )
    if len(names) != len(thetas):
        raise ValueError(f"names has {len(names)} entries for {len(thetas)} thetas")
    z0 = complex(*pair)
    radius = abs(z0)
    if radius == 0:
        raise ValueError("pair must be non-zero")
    fig, axes = _new_figure(
        1, len(thetas), width=4.6 * len(thetas), height=4.8, squeeze=False
    )
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(pos)))
    circle_t = np.linspace(0.0, 2.0 * np.pi, 361)
    for ax, theta, name in zip(axes[0], thetas, names):
        x = torch.tensor([pair], dtype=torch.float64).expand(len(pos), 2)
        rotated = apply_rotary_complex(
            x, pos, torch.tensor([theta], dtype=torch.float64)
        )  # z·e^{imθ}, (len(pos), 2)
        zs = torch.view_as_complex(rotated.contiguous()).numpy()
        ax.plot(
            radius * np.cos(circle_t), radius * np.sin(circle_t), color="0.75", lw=1.0
        )
        for z, c in zip(zs, colors):
            ax.annotate(
                "",
                xy=(z.real, z.imag),
                xytext=(0.0, 0.0),
                arrowprops=dict(
                    arrowstyle="-|>", color=c, lw=1.4, shrinkA=0, shrinkB=0
                ),
            )
        sweep = abs(theta) * (max(pos) - min(pos)) if pos else 0.0
        if sweep >= 0.2:
            for m, z, c in zip(pos, zs, colors):
                u = z / abs(z)
                ax.annotate(
                    f"m={m}",
                    xy=(z.real, z.imag),
                    xytext=(
                        z.real + 0.17 * radius * u.real,
                        z.imag + 0.17 * radius * u.imag,
                    ),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color=c,
                )
        else:
            ins = ax.inset_axes([0.05, 0.53, 0.3, 0.42])
            ins.scatter(zs.real, zs.imag, c=colors, s=18, zorder=3)
            for m, z, c in zip(pos, zs, colors):
                ins.annotate(
                    f"m={m}",
                    xy=(z.real, z.imag),
                    xytext=(6, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                    color=c,
                )
            lo, hi = float(zs.imag.min()), float(zs.imag.max())
            span = max(hi - lo, 1e-12)
            cx = float(zs.real.mean())
            ins.set_xlim(cx - 0.6 * span, cx + 0.6 * span)
            ins.set_ylim(lo - 0.1 * span, hi + 0.1 * span)
            ins.set_aspect("equal")
            ins.set_xticks([])
            ins.set_yticks([])
            ins.set_title(f"zoom: tips span {sweep:.1e} rad", fontsize=7)
            ax.indicate_inset_zoom(ins, edgecolor="0.4")
        lim = 1.3 * radius
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.axhline(0.0, color="0.85", lw=0.8, zorder=0)
        ax.axvline(0.0, color="0.85", lw=0.8, zorder=0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("Re z = first channel x₁ (input units)")
        ax.set_ylabel("Im z = second channel x₂ (input units)")
    return _finish(
        fig,
        rf"One pair $z$ rotated to $z\,e^{{im\theta}}$ at positions m = "
        rf"{pos[0]}..{pos[-1]}",
    )


def pair_score(
    q: complex = complex(1.0, 0.5),
    k: complex = complex(0.8, -0.4),
    thetas: Sequence[float] = (1.0, 0.1),
    distances: Sequence[int] = range(-24, 25),
) -> Figure:
    """The one-pair score Re[q·conj(k)·e^{i(m−n)θ}] against m − n, one line per
    θ (02_complex_rotation, eq. ``relative``).

    Computed by :func:`ropelab.complex.relative_score`. The dashed lines are
    ±|q|·|k|, the bound the score oscillates between.

    Args:
        q, k: the query and key pairs as complex numbers q₁ + i·q₂.
        thetas: frequencies θ in rad per token.
        distances: the integer distances m − n on the x axis.
    """
    dist = torch.tensor(list(distances), dtype=torch.int64)
    qt = torch.tensor([q.real, q.imag], dtype=torch.float64)
    kt = torch.tensor([k.real, k.imag], dtype=torch.float64)
    fig, ax = _new_figure(width=8.0, height=4.0)
    for theta in thetas:
        s = relative_score(
            qt, kt, dist, torch.tensor([float(theta)], dtype=torch.float64)
        )
        ax.plot(
            dist.numpy(),
            s.numpy(),
            marker="o",
            ms=3,
            lw=1.0,
            label=f"θ = {float(theta):.3g} rad/token",
        )
    bound = abs(q) * abs(k)
    ax.axhline(bound, color="0.5", ls="--", lw=1.0, label="±|q|·|k|")
    ax.axhline(-bound, color="0.5", ls="--", lw=1.0)
    ax.set_xlabel("relative position m − n (tokens)")
    ax.set_ylabel(r"score $\mathrm{Re}[q\,\bar{k}\,e^{i(m-n)\theta}]$ (units of q·k)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _finish(
        fig,
        f"One pair's score against m − n (q = {q.real:g}{q.imag:+g}i, k = "
        f"{k.real:g}{k.imag:+g}i)",
    )


# --- 03_pairing -------------------------------------------------------------


def pairing_diagram(dim: int = 8) -> Figure:
    """Which channels form a pair in the interleaved and the half-split layouts, and how
    P moves them (03_pairing).

    Top row: the interleaved layout, channel k holds x_k and pairs (2i, 2i+1).
    Bottom row: the half-split layout after ``to_half_split``, channel p holds
    x_{perm[p]} and pairs (i, i + d/2). One colour per pair i (frequency θ_i);
    an arrow from channel k to P(k) for every channel (eq. ``permutation``).

    Args:
        dim: head dimension d (even, small: 4 to 16 reads well).
    """
    perm_t = half_split_permutation(dim)
    perm, dest = (
        perm_t.tolist(),
        perm_t.argsort().tolist(),
    )  # dest[k] = P(k), where channel k lands
    half = dim // 2
    cmap = plt.get_cmap("tab10" if half <= 10 else "viridis")
    colours = [cmap(i if half <= 10 else i / max(half - 1, 1)) for i in range(half)]
    fig, ax = _new_figure(width=max(6.4, 0.9 * dim), height=4.2)
    rows = {"interleaved": 1.0, "half_split": 0.0}
    w, h = 0.8, 0.34
    for k in range(dim):  # interleaved row: channel k holds x_k, pair k // 2
        ax.add_patch(
            mpatches.FancyBboxPatch(
                (k - w / 2, rows["interleaved"] - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02",
                color=colours[k // 2],
                alpha=0.85,
            )
        )
        ax.text(
            k,
            rows["interleaved"],
            f"$x_{{{k}}}$",
            ha="center",
            va="center",
            fontsize=12,
        )
    for p in range(dim):  # half-split row: channel p holds x_perm[p], pair p mod d/2
        ax.add_patch(
            mpatches.FancyBboxPatch(
                (p - w / 2, rows["half_split"] - h / 2),
                w,
                h,
                boxstyle="round,pad=0.02",
                color=colours[p % half],
                alpha=0.85,
            )
        )
        ax.text(
            p,
            rows["half_split"],
            f"$x_{{{perm[p]}}}$",
            ha="center",
            va="center",
            fontsize=12,
        )
    for k in range(dim):
        ax.annotate(
            "",
            xy=(dest[k], rows["half_split"] + h / 2 + 0.02),
            xytext=(k, rows["interleaved"] - h / 2 - 0.02),
            arrowprops=dict(
                arrowstyle="->", color=colours[k // 2], lw=1.4, shrinkA=0, shrinkB=0
            ),
        )
    ax.set_xlim(-0.7, dim - 0.3)
    ax.set_ylim(-0.45, 1.45)
    ax.set_xticks(np.arange(dim))
    ax.set_yticks(
        [rows["half_split"], rows["interleaved"]],
        ["half-split\npairs (i, i + d/2)", "interleaved\npairs (2i, 2i + 1)"],
    )
    ax.set_xlabel("channel index within the head (position along the last axis)")
    ax.set_ylabel("layout")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [
        mpatches.Patch(color=colours[i], alpha=0.85, label=f"pair {i} (θ$_{{{i}}}$)")
        for i in range(half)
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=min(half, 4),
        frameon=False,
    )
    return _finish(
        fig,
        f"Channel pairs for d = {dim}: arrows are the permutation P "
        "(2i → i, 2i+1 → i + d/2)",
    )


def score_comparison(
    reference, other, *, labels: tuple[str, str] = ("reference", "other")
) -> Figure:
    """Two attention-score matrices side by side and their difference
    (03_pairing, eq. ``weightperm``).

    Args:
        reference, other: score matrices ``(seq_q, seq_k)`` (tensors or arrays,
            e.g. one head of q·kᵀ/√d).
        labels: panel titles for ``reference`` and ``other``.

    Returns:
        A Figure with three heatmaps (reference, other, other - reference)
        and two colour bars.
    """
    a = (
        reference.detach().double().cpu().numpy()
        if isinstance(reference, torch.Tensor)
        else np.asarray(reference, float)
    )
    b = (
        other.detach().double().cpu().numpy()
        if isinstance(other, torch.Tensor)
        else np.asarray(other, float)
    )
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            "reference and other must be 2-D score matrices of one shape, got "
            f"{a.shape} and {b.shape}"
        )
    fig, axes = _new_figure(1, 3, width=12.0, height=4.0)
    vmax = float(max(np.abs(a).max(), np.abs(b).max())) or 1.0
    diff = b - a
    dmax = float(np.abs(diff).max()) or 1.0
    for ax, data, title in zip(axes[:2], (a, b), labels):
        im = ax.imshow(data, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        ax.set_title(title)
    fig.colorbar(
        im, ax=axes[:2].tolist(), label="score q·k/√d (dimensionless)", shrink=0.85
    )
    im_d = axes[2].imshow(diff, cmap="PuOr_r", vmin=-dmax, vmax=dmax)
    axes[2].set_title("difference: middle − left")
    fig.colorbar(im_d, ax=axes[2], label="Δ score (dimensionless)", shrink=0.85)
    for ax in axes:
        ax.set_xlabel("key position n (tokens)")
        ax.set_ylabel("query position m (tokens)")
    return _finish(fig, "Attention scores of one head")


# --- 04_rotation_matrix ---------------------------------------------------


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
    fig, axes = _new_figure(1, 2, width=9.6, height=4.6)
    titles = {
        "interleaved": "interleaved: block diagonal",
        "half_split": "half-split: $P R_{inter} P^T$",
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
            f"{titles[layout]} ({int((r != 0).sum())} of {dim * dim} non-zero)",
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
    return _finish(
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
    fig, (left, right) = _new_figure(1, 2, width=9.6, height=4.0)
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
    left.set_ylabel("floating-point operations (flops)")
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
        ax.legend(fontsize="small")
    return _finish(fig, "The dense R grows as d², the elementwise form as d")


# --- 05_cache_and_decoding ----------------------------------------------


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
    fig, axes = _new_figure(
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
    return _finish(fig, f"The cached cos table, d = {dim}, base {base:,.0f}")


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
    fig, (ax_s, ax_w) = _new_figure(1, 2, width=10.0, height=3.8)
    for ax, f, ylabel in (
        (ax_s, lambda s: s, "score q·k (unitless)"),
        (
            ax_w,
            lambda s: torch.softmax(s * scale, dim=0),
            "attention weight (probability)",
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
        ax.legend(fontsize=8)
    ax_s.set_title("scores of the newest query", fontsize=10)
    ax_w.set_title("softmax weights", fontsize=10)
    return _finish(
        fig, f"Decoding step at position {len(correct) - 1}: offset vs restart at 0"
    )


# --- 06_attention_and_decay ---------------------------------------------


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
    fig, ax = _new_figure(width=5.6, height=4.6)
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
    """RoFormer's relative upper bound (left) beside what scores actually do (right).

    Left: (1/(d/2)) Σ_j |S_j| against the relative distance, the curve of
    RoFormer's figure on long-term decay (06_attention_and_decay, eq.
    ``attn-decay-bound``). Right: the bound, the mean |score| over random q, k, and the
    score for q = k with equal pairs, each divided by its own value at distance 0.

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
    fig, (left, right) = _new_figure(1, 2, width=11.0, height=4.0)
    left.plot(x, curves[0].numpy(), color="C0")
    left.set_xlabel("relative distance m − n (tokens)")
    left.set_ylabel("relative upper bound (1/(d/2)) Σ|S_j| (dimensionless)")
    left.set_title(f"RoFormer's bound, d = {dim}, base = {base:g}", fontsize="medium")
    labels = (
        "relative upper bound",
        "mean |score|, random Gaussian q, k",
        "score for q = k (all h_j equal)",
    )
    for curve, label, color in zip(curves, labels, ("C0", "C1", "C2")):
        right.plot(x, (curve / curve[0]).numpy(), label=label, color=color)
    right.axhline(0.0, color="0.6", linewidth=0.8)
    right.set_xlabel("relative distance m − n (tokens)")
    right.set_ylabel("value / value at distance 0 (dimensionless)")
    right.set_title("the bound against actual scores", fontsize="medium")
    right.legend(fontsize="small")
    return _finish(fig, "Long-term decay: what the bound promises and what scores do")


def pair_turns(
    dim: int = 128, bases=(10000.0, 500000.0), context: int = 4096
) -> Figure:
    """How many full turns each pair j makes across ``context`` tokens:
    context·θ_j/(2π), log scale.

    (06_attention_and_decay, eq. ``attn-turns``.) Pairs above the dashed line
    (one turn) wrap around many times; pairs below it barely move.
    """
    fig, ax = _new_figure()
    for base in bases:
        turns = context / wavelengths(dim, base)
        ax.plot(range(dim // 2), turns.numpy(), marker=".", label=f"base = {base:g}")
    ax.axhline(1.0, color="0.4", linestyle="--", label="one full turn")
    ax.set_yscale("log")
    ax.set_xlabel("pair index j (0 = fastest)")
    ax.set_ylabel(f"turns over {context} tokens, {context}·θ_j / 2π")
    ax.legend()
    return _finish(fig, f"How far each pair turns across {context} tokens (d = {dim})")


# --- 07_context_extension ------------------------------------------------


def context_extension_factors(
    dim: int = 128,
    base: float = 10000.0,
    original: int = 4096,
    factor: float = 8.0,
    *,
    dynamic_len: int | None = 32768,
    llama3: tuple[float, float] | None = (1.0, 4.0),
    longrope_factors: Sequence[float] | None = None,
) -> Figure:
    """What each context-extension method does to each pair: θ_j/θ'_j against λ_j
    (07_context_extension).

    One line per method on log-log axes: Position Interpolation (``linear``),
    NTK-aware (eq. ``ext-ntk``), dynamic NTK evaluated at ``dynamic_len``
    tokens, YaRN (the reference code's ramp, eq. ``ext-yarn-ramp``), Llama 3
    (eq. ``ext-llama3``, with ``llama3 = (low_freq_factor,
    high_freq_factor)``) and, when ``longrope_factors`` is given, LongRoPE
    with those per-pair factors. A factor of 1 keeps the pair's frequency
    (extrapolation); ``factor`` divides it as PI does. A dashed vertical line
    marks the original context length: pairs to its right never completed a
    turn in training.

    Args:
        dim, base: the head dimension d and base b of the trained model.
        original: the pre-training context length L (tokens).
        factor: the scale factor s = L'/L.
        dynamic_len: the current sequence length for dynamic NTK, or None to omit it.
        llama3: (low_freq_factor, high_freq_factor) for the Llama 3 line, or None to
            omit it.
        longrope_factors: dim/2 rescale factors λ_j for a LongRoPE line, or None.

    Returns:
        A Figure with one axis: one line per method plus the vertical line.
    """
    theta = inv_freq(dim, base, dtype=torch.float64)
    lam = wavelengths(dim, base).tolist()

    def ratio(scaling, seq_len=None):
        scaled, _ = scaled_inv_freq(
            dim, base, scaling, seq_len=seq_len, dtype=torch.float64
        )
        return (theta / scaled).tolist()

    common = {"factor": factor, "original_max_position_embeddings": original}
    curves = [
        (
            "Position Interpolation (linear)",
            ratio({"rope_type": "linear", "factor": factor}),
            "-",
            "o",
        ),
        (
            (
                "NTK-aware, b' = b·s^(d/(d-2)) = "
                f"{ntk_scaled_base(base, factor, dim):,.0f}"
            ),
            (
                theta
                / inv_freq(dim, ntk_scaled_base(base, factor, dim), dtype=torch.float64)
            ).tolist(),
            "-",
            "s",
        ),
    ]
    if dynamic_len is not None:
        curves.append(
            (
                f"dynamic NTK at {dynamic_len:,} tokens",
                ratio({"rope_type": "dynamic", **common}, seq_len=dynamic_len),
                "--",
                "v",
            )
        )
    curves.append(
        (
            "YaRN (β_fast = 32, β_slow = 1)",
            ratio({"rope_type": "yarn", **common}),
            "-",
            "^",
        )
    )
    if llama3 is not None:
        low, high = llama3
        curves.append(
            (
                f"Llama 3 (low {low:g}, high {high:g})",
                ratio(
                    {
                        "rope_type": "llama3",
                        "low_freq_factor": low,
                        "high_freq_factor": high,
                        **common,
                    }
                ),
                "-",
                "D",
            )
        )
    if longrope_factors is not None:
        values = [float(v) for v in longrope_factors]
        if len(values) != dim // 2:
            raise ValueError(
                f"longrope_factors must hold dim // 2 = {dim // 2} numbers, got "
                f"{len(values)}"
            )
        curves.append(("LongRoPE (example factors)", values, ":", "x"))

    fig, ax = _new_figure(width=8.4, height=5.0)
    for label, values, style, marker in curves:
        ax.plot(lam, values, ls=style, marker=marker, ms=3, lw=1.3, label=label)
    ax.axvline(
        original,
        color="0.3",
        ls="--",
        lw=1,
        label=f"original context L = {original:,} tokens",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max(max(values) for _, values, _, _ in curves)
    ticks = [2.0**k for k in range(int(math.log2(top)) + 2)]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(
        r"wavelength $\lambda_j = 2\pi/\theta_j$ of the trained pair (tokens)"
    )
    ax.set_ylabel(r"interpolation factor $\theta_j / \theta'_j$ (1 = unchanged)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _finish(
        fig,
        f"How each method rescales the {dim // 2} frequencies (d = {dim}, b = "
        f"{base:,.0f}, s = {factor:g})",
    )


def pi_interpolation(distances, score, grid, grid_score, bound) -> Figure:
    """Position Interpolation's score between trained distances (07_context_extension,
    eq. ``ext-pi-bound``).

    Args:
        distances: fractional distances Δ'/s at which the PI score is drawn.
        score: the PI score a(Δ'/s) at those distances.
        grid, grid_score: the integer distances seen in training and a(Δ) there.
        bound: the half-width of the band eq. ``ext-pi-bound`` allows around the
            straight line through the grid scores, at ``distances``.

    Returns:
        A Figure with one axis: the grid points, the line through them, the
        band and the interpolated score.
    """
    import numpy as np

    x = np.asarray(distances, dtype=float)
    y = np.asarray(score, dtype=float)
    gx, gy = np.asarray(grid, dtype=float), np.asarray(grid_score, dtype=float)
    line = np.interp(x, gx, gy)
    bnd = np.asarray(bound, dtype=float)
    fig, ax = _new_figure(width=7.2, height=4.2)
    ax.fill_between(
        x,
        line - bnd,
        line + bnd,
        color="0.85",
        label="allowed by the interpolation bound",
    )
    ax.plot(gx, gy, "k--", lw=1, label="straight line between trained distances")
    ax.plot(x, y, lw=1.6, label="PI score at fractional distances Δ'/s")
    ax.plot(gx, gy, "ko", ms=5, label="scores at trained (integer) distances")
    ax.set_xlabel("distance Δ = Δ'/s (trained positions)")
    ax.set_ylabel("score a(Δ) (unitless)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return _finish(fig, "Under PI a score lies between two trained ones")


def angle_overshoot(curves, *, first_slow: int) -> Figure:
    """Largest run angle over largest trained angle, per pair and method
    (07_context_extension, eq. ``ext-beyond``).

    Args:
        curves: ``{method name: sequence of (L'-1)θ'_j / ((L-1)θ_j), j = 0..d/2-1}``.
        first_slow: the first pair that never completed a turn in training.

    Returns:
        A Figure with one axis, log y: one line per method, the slow pairs
        shaded, and a line at 1 (the largest angle seen in training).
    """
    fig, ax = _new_figure(width=7.2, height=5.4)
    n = 0
    for name, values in curves.items():
        values = [float(v) for v in values]
        n = len(values)
        ax.plot(range(n), values, marker="o", ms=3, lw=1.3, label=name)
    ax.axvspan(
        first_slow - 0.5,
        n - 0.5,
        color="0.9",
        label="slow pairs (no full turn in training)",
    )
    ax.axhline(1.0, color="0.3", ls="--", lw=1, label="largest angle seen in training")
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ticks = [2.0**k for k in range(-8, 8) if low <= 2.0**k <= high]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("pair index j")
    ax.set_ylabel("largest angle at L' / at L")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    return _finish(fig, "Where each pair's angles end up on the longer sequence")


def stale_cache_error(positions, rel_error) -> Figure:
    """Relative error of a cached key rotated with stale frequencies, by key position
    (07_context_extension).

    Args:
        positions: the keys' positions.
        rel_error: ‖k_stale − k_fresh‖ / ‖k_fresh‖ for each key.

    Returns:
        A Figure with one axis.
    """
    fig, ax = _new_figure(width=7.2, height=3.8)
    ax.plot([float(p) for p in positions], [float(e) for e in rel_error], lw=0.8)
    ax.set_xlabel("position n of the cached key (tokens)")
    ax.set_ylabel("relative error of the key (unitless)")
    ax.grid(True, alpha=0.3)
    return _finish(
        fig, "Dynamic NTK: keys rotated before θ changed drift with their position"
    )


def yarn_ramps(gamma_paper, gamma_code, *, j_low: int, j_high: int) -> Figure:
    """YaRN's blend weight γ_j per pair, the paper's ramp in r and the code's ramp in j
    (07_context_extension).

    Args:
        gamma_paper: γ(r_j), eq. ``ext-yarn-ramp``.
        gamma_code: the index ramp of the reference code and transformers.
        j_low, j_high: the code's rounded ramp ends.

    Returns:
        A Figure with one axis.
    """
    fig, ax = _new_figure(width=7.2, height=4.0)
    n = len(gamma_paper)
    ax.plot(
        range(n),
        [float(g) for g in gamma_paper],
        marker="o",
        ms=3,
        label="paper: linear in r_j",
    )
    ax.plot(
        range(n),
        [float(g) for g in gamma_code],
        marker="s",
        ms=3,
        label="code and transformers: linear in j",
    )
    for x in (j_low, j_high):
        ax.axvline(x, color="0.5", ls=":", lw=1)
    ax.set_xlabel("pair index j")
    ax.set_ylabel("γ_j (1 = keep θ_j, 0 = θ_j / s)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    return _finish(fig, "YaRN's ramp: as the paper writes it and as checkpoints use it")


def attention_temperature(factors, curves) -> Figure:
    """Logit multiplier μ² against the scale factor s, one line per rule
    (07_context_extension).

    Args:
        factors: scale factors s.
        curves: ``{rule name: μ² at each s}``.

    Returns:
        A Figure with one axis, log x.
    """
    fig, ax = _new_figure(width=7.2, height=4.0)
    xs = [float(f) for f in factors]
    for name, values in curves.items():
        ax.plot(xs, [float(v) for v in values], lw=1.6, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("scale factor s = L'/L")
    ax.set_ylabel("logit multiplier μ² (unitless)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _finish(fig, "How much each rule sharpens attention")


def llama3_bands(
    wavelengths, factors, *, high_wavelength: float, low_wavelength: float
) -> Figure:
    """Llama 3's three bands: θ_j/θ'_j against λ_j (07_context_extension, eq.
    ``ext-llama3``).

    Args:
        wavelengths: λ_j of the trained pairs (tokens).
        factors: θ_j / θ'_j.
        high_wavelength, low_wavelength: L/high_freq_factor and L/low_freq_factor.

    Returns:
        A Figure with one axis, log-log.
    """
    fig, ax = _new_figure(width=7.2, height=4.0)
    lam = [float(v) for v in wavelengths]
    ax.axvspan(min(lam), high_wavelength, color="#d9ead3", label="kept")
    ax.axvspan(high_wavelength, low_wavelength, color="#fff2cc", label="blended")
    ax.axvspan(low_wavelength, max(lam), color="#f4cccc", label="divided by s")
    ax.plot(lam, [float(f) for f in factors], "ko", ms=3, label="pairs of Llama 3.1")
    ax.set_xscale("log")
    ax.set_xlabel(r"wavelength $\lambda_j$ of the trained pair (tokens)")
    ax.set_ylabel(r"$\theta_j / \theta'_j$")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _finish(fig, "Llama 3.1: three bands by wavelength")


def longrope_factors(short, long, *, first_slow: int) -> Figure:
    """LongRoPE's per-pair rescale factors, short and long (07_context_extension, eq.
    ``ext-longrope``).

    Args:
        short, long: ρ_j for sequences up to L and beyond it.
        first_slow: the first pair without a full turn in training.

    Returns:
        A Figure with one axis.
    """
    fig, ax = _new_figure(width=7.2, height=4.0)
    n = len(long)
    ax.plot(
        range(n),
        [float(v) for v in long],
        marker="o",
        ms=3,
        label="long factors (ℓ > L)",
    )
    ax.plot(
        range(n),
        [float(v) for v in short],
        marker="s",
        ms=3,
        label="short factors (ℓ ≤ L)",
    )
    ax.axvline(first_slow - 0.5, color="0.4", ls="--", lw=1, label="first slow pair")
    ax.set_xlabel("pair index j")
    ax.set_ylabel("rescale factor ρ_j = θ_j / θ'_j")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _finish(fig, "LongRoPE: one factor per pair, two sets (illustrative values)")


# --- 08_numerics ------------------------------------------------------------


def angle_precision(
    dim: int = 128,
    bases: tuple[float, ...] = (1e4, 5e5),
    *,
    n_positions: int = 200,
    max_position: int = 1_000_000,
    cos_in_angle_dtype: bool = False,
) -> Figure:
    """max_j |cos ã_j − cos m·θ_j| against the position m, one line per angle
    dtype, one panel per base (08_numerics).

    Solid lines: the error measured by :func:`ropelab.numerics.cos_error` at
    about ``n_positions`` log-spaced positions, with the angle computed in
    float32, bfloat16 and float16 (float64 is the reference, so its measured
    error is 0 and has no point on a log axis). Dashed lines, same colours: the
    bound of eq. ``num-cosbound`` for each dtype, float64 included. A dotted
    vertical line marks 65,504, the largest float16: beyond it float16
    positions are inf, the cosines NaN, and the float16 line stops. Computed
    on the CPU: the point is the format, not the device.

    Args:
        dim: head dimension d (all d/2 pairs are measured).
        bases: frequency bases, one panel each.
        n_positions, max_position: the position grid (see
            :func:`ropelab.numerics.log_positions`).
        cos_in_angle_dtype: round cos to the angle's dtype too (as a model's
            would be) instead of keeping it in float64.
    """
    dtypes = {
        "float64": torch.float64,
        "float32": torch.float32,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
    }
    colours = {
        "float64": "0.2",
        "float32": "tab:blue",
        "float16": "tab:orange",
        "bfloat16": "tab:red",
    }
    pos = log_positions(n_positions, max_position)
    x = pos.double().numpy()
    fig, axes = _new_figure(
        1, len(bases), width=5.6 * len(bases), height=4.6, sharey=True, squeeze=False
    )
    for ax, base in zip(axes[0], bases):
        for name, dt in dtypes.items():
            cos_dt = dt if cos_in_angle_dtype else torch.float64
            bound = cos_error_bound(pos, dim, base, dt, cos_dtype=cos_dt).numpy()
            if dt != torch.float64:
                err = cos_error(pos, dim, base, dt, cos_dtype=cos_dt).numpy()
                ax.plot(
                    x,
                    np.where(err > 0, err, np.nan),
                    color=colours[name],
                    lw=1.6,
                    label=f"{name}, measured",
                )
            ax.plot(
                x,
                bound,
                color=colours[name],
                lw=1.0,
                ls="--",
                label=f"{name}, bound (num-cosbound)",
            )
        ax.axvline(
            65504,
            color=colours["float16"],
            ls=":",
            lw=1.2,
            label="65,504: largest float16",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-17, 10.0)
        ax.set_title(f"base = {base:,.0f}", fontsize="medium")
        ax.set_xlabel("position m (tokens)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(r"max$_j$ |cos ã$_j$ − cos m$\theta_j$| (dimensionless)")
    axes[0][-1].legend(fontsize="x-small", loc="lower right")
    where = "in the angle's dtype" if cos_in_angle_dtype else "in float64"
    return _finish(
        fig,
        "Error of cos(m·θ_j) when the angle is computed in each dtype "
        f"(cos taken {where}), d = {dim}",
    )


# --- 09_performance -----------------------------------------------------------


def angle_error_sources(positions, curves, *, base: float, dim: int) -> Figure:
    """The three sources of a float32 table's error against the position (08_numerics).

    Args:
        positions: the positions m (tokens).
        curves: ``{source name: largest error over the pairs at each position}``;
            a constant source (the rounding of cos and sin) may be a single number.
        base, dim: the settings, for the title.

    Returns:
        A Figure with one log-log axis, one line per source.
    """
    xs = [float(p) for p in positions]
    fig, ax = _new_figure(width=6.8, height=4.6)
    for name, values in curves.items():
        ys = (
            [float(values)] * len(xs)
            if isinstance(values, (int, float))
            else [float(v) for v in values]
        )
        ax.plot(
            xs,
            ys,
            lw=1.6,
            ls="--" if isinstance(values, (int, float)) else "-",
            label=name,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("position m (tokens)")
    ax.set_ylabel("largest error over the pairs (rad, or unitless for cos)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return _finish(
        fig, f"Error sources of a float32 table, d = {dim}, base {base:,.0f}"
    )


def bench_ratios(results, *, model: bool = True) -> Figure:
    """Measured time of each method over its memory floor: bars per method and shape,
    one panel per dtype (09_performance).

    The y axis is log scaled. A dashed line marks the floor (1×: ``copy_``,
    which reads and writes the same bytes into a preallocated buffer), a grey
    band the HF formula ``x*cos + rotate_half(x)*sin``. With ``model`` a black
    tick per method marks the bytes it moves over the floor's, by
    :func:`ropelab.cost.cost_model` (eq. ``perf-floor``): where the bar stands
    far above its tick, something other than memory traffic costs the time
    (allocation for ``clone`` and every method that returns new tensors,
    arithmetic for the dense R, per-call overhead for tiny tensors).

    Args:
        results: :class:`ropelab.bench.Result` objects or their dicts (as in
            a ``--json`` file), any shapes and dtypes; methods without a time
            (skipped) get no bar.
        model: draw the cost model's ratio as a tick per method.

    Returns:
        A Figure with one axis per dtype.
    """
    rows = [asdict(r) if is_dataclass(r) else dict(r) for r in results]
    if not rows:
        raise ValueError("results is empty")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    shapes = list(dict.fromkeys(tuple(r["shape"]) for r in rows))
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m != "copy_"]
    width = 0.8 / len(shapes)
    fig, axes = _new_figure(
        len(dtypes),
        1,
        width=6.8,
        height=1.6 + 3.4 * len(dtypes),
        sharex=True,
        squeeze=False,
    )
    for ax, dtype in zip(axes[:, 0], dtypes):
        table = {
            (tuple(r["shape"]), r["method"]): r for r in rows if r["dtype"] == dtype
        }
        if "hf" in methods:
            i = methods.index("hf")
            ax.axvspan(
                i - 0.45, i + 0.45, color="0.88", zorder=0, label="the HF formula"
            )
        for k, shape in enumerate(shapes):
            xs, ys = [], []
            for j, method in enumerate(methods):
                r = table.get((shape, method))
                x = j + (k - (len(shapes) - 1) / 2) * width
                if r is not None and r["ratio_floor"] is not None:
                    xs.append(x)
                    ys.append(r["ratio_floor"])
                elif r is not None:
                    ax.text(
                        x,
                        1.15,
                        "skipped",
                        rotation=90,
                        ha="center",
                        va="bottom",
                        color=f"C{k}",
                    )
            ax.bar(xs, ys, width, color=f"C{k}", label=f"shape {shape}", zorder=2)
        ax.axhline(
            1.0,
            color="0.2",
            ls="--",
            lw=1.2,
            label="memory floor (copy_) = 1×",
            zorder=3,
        )
        if model:
            ticks = [
                (j, cost_model(int(shapes[0][-1]), dtype, method=m).ratio_floor)
                for j, m in enumerate(methods)
            ]
            ax.scatter(
                [j for j, _ in ticks],
                [v for _, v in ticks],
                marker="_",
                s=400,
                linewidths=2.5,
                color="k",
                zorder=4,
                label="cost model: bytes moved / floor",
            )
        ax.set_yscale("log")
        ax.set_xticks(range(len(methods)), methods, rotation=35, ha="right")
        ax.set_xlabel("method")
        ax.set_title(dtype)
        ax.set_ylabel("time / time of copy_ (×)")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return _finish(
        fig, "Time of each method over the memory floor (log scale; lower is better)"
    )


def cost_bars(methods, *, dim: int = 128, dtype: str = "float32") -> Figure:
    """Bytes each method reads, writes and allocates per token-head, by the cost model
    (09_performance).

    Stacked bars (read, written) against the floor 2·d·s, and a hatched bar
    beside each for the fresh memory it allocates, from
    :func:`ropelab.cost.cost_model` for a ``dim``-channel head in ``dtype``.

    Args:
        methods: names from ``ropelab.cost.METHODS``.
        dim: head dimension d.
        dtype: the dtype of x, e.g. ``"float32"``.
    """
    from .cost import cost_model

    costs = [cost_model(dim, dtype, method=m) for m in methods]
    if not costs:
        raise ValueError("methods is empty")
    floor = 2 * dim * costs[0].itemsize
    fig, ax = _new_figure(width=6.4, height=4.2)
    xs = range(len(costs))
    ax.bar(
        [x - 0.2 for x in xs],
        [c.bytes_read / floor for c in costs],
        0.4,
        color="C0",
        label="read",
    )
    ax.bar(
        [x - 0.2 for x in xs],
        [c.bytes_written / floor for c in costs],
        0.4,
        bottom=[c.bytes_read / floor for c in costs],
        color="C1",
        label="written",
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [c.bytes_allocated / floor for c in costs],
        0.4,
        color="white",
        edgecolor="C2",
        hatch="//",
        label="allocated",
    )
    ax.axhline(1.0, color="0.2", ls="--", lw=1.2, label="the floor 2ds = 1")
    ax.set_xticks(list(xs), list(methods), rotation=35, ha="right")
    ax.set_xlabel("method")
    ax.set_ylabel("bytes per token-head / 2ds")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right")
    return _finish(fig, f"Bytes moved and allocated per token-head, d = {dim}, {dtype}")


def bench_grid(grid, goals=()) -> Figure:
    """apply_rotary(..., out=) over copy_ against the sequence length, one line per
    layout and axis order (09_performance).

    One panel per dtype, log-scaled sequence length; the goals' limits for
    ``copy_`` baselines are drawn as dotted steps at the lengths they cover.

    Args:
        grid: :class:`ropelab.bench.GridResult` objects or their dicts
            (a ``--json`` file's ``grid``).
        goals: the goals (dicts with ``shapes``, ``limit``, ``against``, ``dtypes``),
            optional.
    """
    from dataclasses import asdict, is_dataclass

    rows = [asdict(r) if is_dataclass(r) else dict(r) for r in grid]
    rows = [r for r in rows if r["against"] == "copy_" and r["call"] == "out"]
    if not rows:
        raise ValueError("grid has no results against copy_")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = _new_figure(
        1,
        len(dtypes),
        width=1.0 + 3.4 * len(dtypes),
        height=4.2,
        sharey=True,
        squeeze=False,
    )
    names = {"heads": "(b, h, s, d)", "positions": "(b, s, h, d)"}
    for ax, dtype in zip(axes[0], dtypes):
        series = dict.fromkeys(
            (r["layout"], r["order"]) for r in rows if r["dtype"] == dtype
        )
        for k, (layout, order) in enumerate(series):
            pts = sorted(
                (r["shape"][2], r["ratio"])
                for r in rows
                if (r["dtype"], r["layout"], r["order"]) == (dtype, layout, order)
            )
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="os^v"[k % 4],
                color=f"C{k}",
                ls="-" if order == "heads" else "--",
                label=f"{layout}, {names.get(order, order)}",
            )
        for g in goals:
            if g.get("against") == "copy_" and dtype in g.get("dtypes", ()):
                for shape in g["shapes"]:
                    s = shape[2]
                    ax.plot(
                        [s / 1.6, s * 1.6], [g["limit"]] * 2, color="0.3", ls=":", lw=2
                    )
        ax.axhline(1.0, color="0.2", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length S (tokens)")
        ax.set_title(dtype)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("time / time of copy_ (×)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return _finish(fig, "apply_rotary(..., out=) over copy_ (dotted: the goals)")


# --- 10_multi_axis ------------------------------------------------------------


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
    fig, axes = _new_figure(
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
            label="query patch",
        )
        fig.colorbar(
            image, ax=ax, shrink=0.8, label="score ⟨R_p q, R_p' k⟩ (dimensionless)"
        )
        ax.set_xlabel("key column x' (patches)")
        ax.set_ylabel("key row y' (patches)")
        ax.set_title(name, fontsize="medium")
        ax.legend(loc="upper right", fontsize="small")
    return _finish(
        fig,
        f"Scores of one query patch against a {rows} × {cols} grid of keys "
        f"(d = {q.shape[-1]})",
    )


# --- 01_frequencies: one figure per section ---------------------------------


def sinusoidal_encoding(d_model: int = 64, n_positions: int = 128) -> Figure:
    """The Transformer's sinusoidal encoding PE(m, c) as a heatmap
    (01_frequencies, eq. ``freq-sinusoidal``).

    Rows are positions m, columns channels c; channel 2i holds sin(m·θ_i) and
    2i + 1 holds cos(m·θ_i), θ_i = 10000^(−2i/d). The left columns change
    every token, the right ones barely move: the geometric ladder of speeds.
    """
    import torch

    m = torch.arange(n_positions, dtype=torch.float64)[:, None]
    theta = 10000.0 ** (-2 * torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.empty(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(m * theta), torch.cos(m * theta)
    fig, ax = _new_figure(width=6.4, height=4.4)
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
    return _finish(fig, f"Sinusoidal position encoding, d = {d_model}")


def frequency_ladder(dim: int = 128, bases: tuple[float, ...] = (1e4, 5e5)) -> Figure:
    """θ_j against the pair index, the code's 0-based j below and RoFormer's 1-based j
    above (01_frequencies).

    A log y axis turns the geometric ladder θ_j = b^(−2j/d) into straight
    lines from θ_0 = 1; the top axis relabels the same points with the
    paper's index j + 1 (eqs. ``theta`` and ``freq-theta0``).
    """
    import torch

    from .frequencies import inv_freq

    fig, ax = _new_figure(width=6.4, height=4.2)
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
    return _finish(fig, f"The frequency ladder, d = {dim}")


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
    import math

    import torch

    from .frequencies import angles, inv_freq

    pos = torch.arange(n_positions)
    phi = angles(pos, inv_freq(dim, base, dtype=torch.float64))
    fig, ax = _new_figure(width=7.2, height=4.0)
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
    return _finish(fig, f"Rotation angles of four pairs, d = {dim}, base {base:,.0f}")


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
    from .frequencies import wavelengths

    lam = wavelengths(dim, base)
    fig, ax = _new_figure(width=7.2, height=4.0)
    ax.bar(range(dim // 2), lam.numpy(), width=0.8, color="tab:blue", alpha=0.8)
    for L, style in zip(contexts, ("--", "-.", ":")):
        ax.axhline(L, color="0.25", ls=style, lw=1.2, label=f"L = {L:,} tokens")
    ax.set_yscale("log")
    ax.set_xlabel("pair index j (0-based)")
    ax.set_ylabel(r"wavelength $\lambda_j$ (tokens per turn)")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(loc="upper left")
    return _finish(
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
    import numpy as np

    from .frequencies import wavelengths

    lengths = np.unique(np.geomspace(1, max_len, 2000).round())
    fig, ax = _new_figure(width=7.2, height=4.0)
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
    ax.legend(loc="upper left")
    return _finish(fig, f"How many pairs complete a turn within L tokens, d = {dim}")


# --- 02_complex_rotation: the goal, drawn -----------------------------------


def shift_invariance(
    q: complex = complex(1.0, 0.3),
    k: complex = complex(0.6, 0.7),
    *,
    theta: float = 0.35,
    m: int = 2,
    n: int = 5,
    shift: int = 3,
) -> Figure:
    """q at position m and k at n, then both moved by ``shift``: the angle between them
    stays (02_complex_rotation).

    Left: f(q, m) = q·e^{imθ} and f(k, n) = k·e^{inθ} with the arc of the
    angle between them. Right: the same at m + s and n + s. Both pairs turn
    by sθ, so the angle, and with it the score Re[f(q)·conj(f(k))], is the
    same (eqs. ``cplx-goal``, ``relative``).
    """
    import cmath
    import math

    fig, axes = _new_figure(1, 2, width=9.6, height=4.8)
    lim = 1.25 * max(abs(q), abs(k))
    for ax, s in zip(axes, (0, shift)):
        fq = q * cmath.exp(1j * (m + s) * theta)
        fk = k * cmath.exp(1j * (n + s) * theta)
        for z, name, colour in (
            (fq, f"q at m = {m + s}", "tab:blue"),
            (fk, f"k at n = {n + s}", "tab:orange"),
        ):
            ax.annotate(
                "",
                xy=(z.real, z.imag),
                xytext=(0, 0),
                arrowprops=dict(
                    arrowstyle="-|>", color=colour, lw=2, shrinkA=0, shrinkB=0
                ),
            )
            ax.plot([], [], color=colour, lw=2, label=name)
        a0, a1 = cmath.phase(fq), cmath.phase(fk)
        a1 = a0 + math.remainder(a1 - a0, 2 * math.pi)
        r = 0.35 * min(abs(q), abs(k))
        ts = [a0 + (a1 - a0) * t / 40 for t in range(41)]
        ax.plot(
            [r * math.cos(t) for t in ts],
            [r * math.sin(t) for t in ts],
            color="0.3",
            lw=1.2,
        )
        score = (fq * fk.conjugate()).real
        ax.text(
            0.03,
            0.03,
            f"angle = {abs(a1 - a0):.3f} rad\nscore = {score:.3f}",
            transform=ax.transAxes,
            fontsize=10,
            va="bottom",
        )
        ax.axhline(0, color="0.85", lw=0.8, zorder=0)
        ax.axvline(0, color="0.85", lw=0.8, zorder=0)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.set_xlabel("first channel of the pair (input units)")
        ax.set_ylabel("second channel (input units)")
        ax.set_title("as placed" if s == 0 else f"both shifted by s = {s}")
        ax.legend(loc="upper left", fontsize=9)
    return _finish(
        fig,
        f"Shifting both positions turns both vectors by sθ (θ = {theta} rad/token)",
    )


# --- 05_cache_and_decoding: what a bfloat16 cast does to the tables -----------


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
    import numpy as np
    import torch

    pos = torch.as_tensor(positions).cpu().numpy()
    fig, ax = _new_figure(width=7.6, height=4.2)
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
    ax.legend(loc="lower right", fontsize=9)
    return _finish(fig, "Error of the cos table against exact arithmetic")


# --- 13_current_architectures ---------------------------------------------


def variant_spectra(spectra: dict, *, context: int | None = None) -> Figure:
    """Wavelength 2π/θ_j of every pair j, one line per variant (chapter 13).

    Pairs with θ_j = 0 (not rotated) are drawn as crosses above the lines.

    Args:
        spectra: label -> ``(d/2,)`` frequencies θ_j (0 for a pair not rotated).
        context: if given, a horizontal line at this many tokens (the training context).
    """
    import torch

    if not spectra:
        raise ValueError("spectra must name at least one set of frequencies")
    fig, ax = _new_figure(width=7.0, height=4.2)
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
    return _finish(fig, "Which pairs rotate, and how slowly")


def variant_decay(
    distances, curves: dict, *, ylabel: str = "score / score at distance 0"
) -> Figure:
    """Probe score (q = k, equal pairs) against distance, per variant (chapter 13).

    Args:
        distances: ``(n,)`` distances in tokens.
        curves: label -> ``(n,)`` values, already normalised as ``ylabel`` says.
    """
    import torch

    x = torch.as_tensor(distances).cpu().numpy()
    fig, ax = _new_figure(width=7.0, height=4.2)
    for i, (label, c) in enumerate(curves.items()):
        y = torch.as_tensor(c).detach().to("cpu", torch.float64).numpy()
        ax.plot(x, y, label=label, color=f"C{i}")
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(0, float(x.max()))
    ax.set_xlabel("relative distance m − n (tokens, linear to 10, then log)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    return _finish(fig, "What each variant does to the decay of chapter 06")


def relative_position_maps(maps: dict) -> Figure:
    """Relative position ρ(m, n) per method, causal part, one heatmap each
    (chapter 13).

    Args:
        maps: title -> ``(seq, seq)`` real matrix ρ(m, n).
    """
    import torch

    if not maps:
        raise ValueError("maps must name at least one method")
    vmax = max(float(m.max()) for m in maps.values())
    ncols = min(2, len(maps))
    nrows = -(-len(maps) // ncols)
    fig, axes = _new_figure(
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
    return _finish(fig, "The relative position each method hands to RoPE")


def layer_plans(plans: dict) -> Figure:
    """Which layers rotate, and with which base, one row per model (chapter 13).

    Args:
        plans: model name -> list of per-layer dicts with ``"rope"`` and ``"base"``
            (as ``ropelab.variants.layer_rope_plan`` returns).
    """
    from matplotlib.patches import Patch, Rectangle

    if not plans:
        raise ValueError("plans must name at least one model")
    bases = sorted({p["base"] for plan in plans.values() for p in plan if p["rope"]})
    cycle = BOOK_STYLE["axes.prop_cycle"].by_key()["color"]
    colors = {b: cycle[i % len(cycle)] for i, b in enumerate(bases)}
    n = max(len(plan) for plan in plans.values())
    fig, ax = _new_figure(width=MAX_WIDTH, height=0.5 * len(plans) + 2.2)
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
    return _finish(fig, "Which layers rotate, with which base")


# --- 14_triton_kernel -----------------------------------------------------


def triton_programs(n_rows: int = 16, n_heads: int = 4, block_rows: int = 4) -> Figure:
    """Which program of the Triton kernel rotates which (token, head) row
    (14_triton_kernel).

    One program takes a block of ``block_rows`` tokens and loops over every
    head, so its cos/sin rows are loaded once and used ``n_heads`` times.
    Left: the grid of (token, head) rows coloured by program; right: how
    often each table row is loaded, per program and in total.

    Args:
        n_rows: tokens in the sequence.
        n_heads: heads that share the tables.
        block_rows: tokens per program (``BLOCK_R``).
    """
    import numpy as np

    fig, (ax, ax_t) = _new_figure(
        1, 2, width=6.4, height=3.4, gridspec_kw={"width_ratios": [3, 1]}
    )
    n_prog = -(-n_rows // block_rows)
    grid = np.repeat(np.arange(n_rows) // block_rows, n_heads).reshape(n_rows, n_heads)
    cmap = plt.get_cmap("tab10", max(n_prog, 2))
    ax.imshow(grid, cmap=cmap, aspect="auto", vmin=-0.5, vmax=max(n_prog, 2) - 0.5)
    for p in range(n_prog):
        y = p * block_rows + (min(block_rows, n_rows - p * block_rows) - 1) / 2
        ax.text(
            n_heads - 0.5 + 0.05,
            y,
            f" program {p}",
            va="center",
            fontsize="small",
            clip_on=False,
        )
    ax.set_xticks(range(n_heads))
    ax.set_yticks(range(0, n_rows, block_rows))
    for r in range(1, n_rows):
        ax.axhline(r - 0.5, color="white", lw=0.6)
    for h in range(1, n_heads):
        ax.axvline(h - 0.5, color="white", lw=0.6)
    ax.set_xlabel("head h (the loop inside a program)")
    ax.set_ylabel("token (row of x)")
    ax.set_title("one program per block of tokens")
    loads = np.ones(n_rows)
    ax_t.barh(
        np.arange(n_rows), loads, color=[cmap(r // block_rows) for r in range(n_rows)]
    )
    ax_t.set_ylim(n_rows - 0.5, -0.5)
    ax_t.set_xlim(0, n_heads)
    ax_t.set_xlabel("loads of each\ncos/sin row")
    ax_t.set_yticks([])
    ax_t.set_title(f"once, not {n_heads}×")
    return _finish(fig, "The kernel's grid: tables read once for all heads")


def kernel_traffic(rows: dict[str, dict[str, float]], *, floor: float) -> Figure:
    """Bytes per token-head that each implementation moves, by what they carry
    (14_triton_kernel).

    Args:
        rows: ``{implementation: {part: bytes per token-head}}``, e.g.
            ``{"Triton kernel": {"x": 256, "tables": 16, "out": 256}}``.
        floor: the memory floor ``2ds`` in bytes per token-head (a dashed line).
    """
    fig, ax = _new_figure(1, 1, width=6.4, height=3.2)
    names = list(rows)
    parts = list(dict.fromkeys(p for r in rows.values() for p in r))
    left = [0.0] * len(names)
    for part in parts:
        widths = [rows[n].get(part, 0.0) for n in names]
        ax.barh(names, widths, left=left, label=part)
        left = [a + b for a, b in zip(left, widths)]
    ax.axvline(floor, color="0.3", ls="--", lw=1, label=f"floor 2ds = {floor:,.0f} B")
    ax.invert_yaxis()
    ax.set_xlabel("bytes per token-head")
    ax.legend(fontsize="small", loc="lower right")
    return _finish(fig, "Bytes asked for, per token-head")


# --- 12_positions_in_practice ---------------------------------------------


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
    from .positions import packed_positions

    pos = packed_positions(cu_seqlens).cpu()
    cu = torch.as_tensor(cu_seqlens).cpu().long()
    n = len(pos)
    doc = torch.repeat_interleave(torch.arange(len(cu) - 1), cu.diff())
    causal = torch.ones(n, n).tril()
    same = (doc[:, None] == doc[None, :]).double()
    fig, axes = _new_figure(1, 2, width=MAX_WIDTH, height=4.4)
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
    return _finish(fig, title)


def rerotation_drift(shifts, errors: dict) -> Figure:
    """Error of keys moved many times vs encoded once (12_positions_in_practice).

    Args:
        shifts: the numbers of moves at which the error was measured (x axis).
        errors: line label -> max |error| at each entry of ``shifts`` (e.g.
            re-rotated step by step, re-encoded from the raw key).
    """
    x = [int(s) for s in shifts]
    fig, ax = _new_figure(width=6.4, height=4.2)
    markers = "osd^v"
    for i, (name, err) in enumerate(errors.items()):
        y = [float(e) for e in err]
        if len(y) != len(x):
            raise ValueError(
                f"errors[{name!r}] has {len(y)} values for {len(x)} shifts"
            )
        ax.plot(
            x,
            [max(v, 1e-12) for v in y],
            marker=markers[i % len(markers)],
            ms=4,
            label=name,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of one-token shifts applied to the cache")
    ax.set_ylabel("max |key − exact key| (key entries ~ 1)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    return _finish(fig, "float32 keys: shifted step by step vs encoded once")


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
    fig, (ax_s, ax_d) = _new_figure(2, 1, width=MAX_WIDTH, height=6.4, sharex=True)
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
    return _finish(fig, "Dynamic NTK with a KV cache: three ways to hold the keys")


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
    fig, axes = _new_figure(1, 2, width=MAX_WIDTH, height=3.9, sharey=True)
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
    return _finish(fig, "Causal scores of one head")


# --- 11_trained_model ----------------------------------------------------


def toy_attention(maps: dict, *, value_positions: dict, train_len: int) -> Figure:
    """The toy decoder's attention for one sequence per length: the previous-token head
    and the query's row (11).

    One row of panels per length. Left: the first layer's head that attends
    one position back, as a heatmap over the last ``train_len`` query and key
    positions. Right: the second layer's attention from the query (last
    position) over all key positions, one line per head, with the value's
    position marked.

    Args:
        maps: length -> ``(layer1, layer2)``, each ``(heads, seq, seq)`` attention
            weights.
        value_positions: length -> the value's position in that sequence.
        train_len: the training length L (marked on the right panels).
    """
    import torch

    fig, axes = _new_figure(
        len(maps), 2, width=MAX_WIDTH, height=3.3 * len(maps) + 0.4, squeeze=False
    )
    for (left, right), (length, (first, second)) in zip(axes, maps.items()):
        first = first.detach().to("cpu", torch.float64)
        second = second.detach().to("cpu", torch.float64)
        prev = first.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
        head = int(prev.argmax())
        window = first[head, -train_len:, -train_len:]
        start = length - train_len
        extent = (start - 0.5, length - 0.5, length - 0.5, start - 0.5)
        image = left.imshow(
            window.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, extent=extent
        )
        fig.colorbar(image, ax=left, shrink=0.85, label="attention weight")
        left.set_xlabel("key position n (tokens)")
        left.set_ylabel("query position m (tokens)")
        left.set_title(f"layer 1, head {head}, length {length}")
        for h in range(second.shape[0]):
            right.plot(
                range(length), second[h, -1].numpy(), label=f"head {h}", linewidth=1.0
            )
        right.axvline(value_positions[length], color="k", linestyle=":", label="value")
        if length > train_len:
            right.axvspan(
                -0.5,
                length - train_len - 0.5,
                color="0.9",
                label=f"> L = {train_len} back",
            )
        right.set_xlabel("key position n (tokens)")
        right.set_ylabel("attention weight")
        right.set_title(f"layer 2, the query's row, length {length}")
        right.set_ylim(0.0, 1.05)
        right.legend(loc="upper right")
    return _finish(
        fig, "Where the trained model looks, at its training length and beyond"
    )


def attention_entropy_by_length(lengths, entropies: dict) -> Figure:
    """Mean attention entropy of the query's row against sequence length, with log n for
    uniform attention (11).

    Args:
        lengths: the sequence lengths (tokens).
        entropies: line label -> one entropy (nats) per length.
    """
    import math

    fig, ax = _new_figure()
    lengths = list(lengths)
    for label, values in entropies.items():
        ax.plot(lengths, list(values), marker="o", label=label)
    ax.plot(
        lengths,
        [math.log(n) for n in lengths],
        color="0.5",
        linestyle="--",
        label="uniform, log n",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("attention entropy (nats)")
    ax.legend()
    return _finish(fig, "Attention spreads out beyond the training length")


def extrapolation_accuracy(
    results, *, methods=None, train_len: int, title: str
) -> Figure:
    """Accuracy against length for each method, without and with fine-tuning, side by
    side (11).

    Args:
        results: rows as in ``ropelab.extrapolate`` (method, finetune_steps, length,
            accuracy).
        methods: the method names to draw, in order (default: all, in first-seen order).
        train_len: the training length L (a dotted line).
        title: the figure's title.
    """
    names = (
        list(dict.fromkeys(r["method"] for r in results))
        if methods is None
        else list(methods)
    )
    steps = sorted({r["finetune_steps"] for r in results})
    fig, axes = _new_figure(
        1, len(steps), width=MAX_WIDTH, height=4.6, sharey=True, squeeze=False
    )
    for ax, n_steps in zip(axes[0], steps):
        for i, name in enumerate(names):
            rows = sorted(
                (
                    r
                    for r in results
                    if r["method"] == name and r["finetune_steps"] == n_steps
                ),
                key=lambda r: r["length"],
            )
            if rows:  # a marker and dash per method: lines that coincide stay apart
                ax.plot(
                    [r["length"] for r in rows],
                    [r["accuracy"] for r in rows],
                    label=name,
                    marker="osD^vPX*"[i % 8],
                    linestyle=("-", "--", "-.", ":")[i % 4],
                    alpha=0.85,
                )
        lengths = sorted({r["length"] for r in results})
        ax.axvline(train_len, color="0.5", linestyle=":", label=f"L = {train_len}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_title(
            "no fine-tuning" if n_steps == 0 else f"after {n_steps} fine-tuning steps"
        )
    axes[0][0].set_ylabel("accuracy (fraction of answers right)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4)
    return _finish(fig, title)
