"""Chapter 08's figures (numerics): angle precision and the sources of its error."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ropelab.numerics import cos_error, cos_error_bound, log_positions

from ._style import finish, new_figure

__all__ = ["angle_precision", "angle_error_sources", "number_spacing"]


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
    positions are inf, the cosines NaN, and the float16 line stops. One legend
    below the panels names the colours (dtypes) and line styles. Computed
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
    fig, axes = new_figure(
        1, len(bases), width=6.8, height=4.6, sharey=True, squeeze=False
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
        ax.set_yticks([1e-16, 1e-12, 1e-8, 1e-4, 1.0])
        ax.set_title(f"base = {base:,.0f}", fontsize="medium")
        ax.set_xlabel("position m (tokens)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("largest error over the pairs\n"
                          r"max$_j$ |cos ã$_j$ − cos m$\theta_j$|")
    # One legend below the panels, where it covers no data: the colours name
    # the dtypes, the line styles what is drawn.
    handles = [Line2D([], [], color=colours[n], lw=1.6) for n in dtypes]
    handles += [Line2D([], [], color="0.55", lw=1.6),
                Line2D([], [], color="0.55", lw=1.0, ls="--"),
                Line2D([], [], color=colours["float16"], lw=1.2, ls=":")]
    labels = ["float64 (bound only)", *list(dtypes)[1:], "measured", "bound",
              "65,504: largest float16"]
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    where = "in the angle's dtype" if cos_in_angle_dtype else "in float64"
    return finish(
        fig,
        "Error of cos(m·θ_j) when the angle is computed in each dtype "
        f"(cos taken {where}), d = {dim}",
    )


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
    fig, ax = new_figure(width=6.8, height=4.6)
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
    return finish(
        fig, f"Error sources of a float32 table, d = {dim}, base {base:,.0f}"
    )


def number_spacing(max_value: float = 2.0**26) -> Figure:
    """The gap between a number x ≥ 1 and the next one each dtype can store,
    2^(⌊log₂ x⌋ − p + 1), against x (08_numerics, eq. ``num-bound``).

    One staircase per dtype (bfloat16, float16, float32, float64) on log-log
    axes; float16 stops at its largest finite number, 65,504. A dashed line
    marks a gap of 1: to its right, consecutive integers, that is consecutive
    positions, collide in that dtype. Called as ``figures.ch08.number_spacing``.
    """
    p_bits = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}
    top = int(np.log2(max_value))
    fig, ax = new_figure(width=6.8, height=4.2)
    for name, p in p_bits.items():
        last = 16 if name == "float16" else top  # float16 ends in [2^15, 2^16)
        e = np.arange(0, last + 1)
        x = 2.0 ** e
        gap = 2.0 ** (e - p + 1)
        if name == "float16":
            x, gap = np.append(x[:-1], 65504.0), np.append(gap[:-1], gap[-2])
        ax.step(x, gap, where="post", lw=1.8, label=f"{name} (p = {p})",
                ls=":" if name == "float64" else "-")
    ax.axhline(1.0, color="0.35", ls="--", lw=1)
    ax.annotate("gap > 1: consecutive\nintegers collide",
                (2.0**17, 1.0), xytext=(0, 6), textcoords="offset points",
                fontsize="small", color="0.25", va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("number x, e.g. a position (log scale)")
    ax.set_ylabel("gap to the next number")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return finish(fig, "How far apart the numbers of each dtype lie")
