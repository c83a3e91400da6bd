"""The intro's figure: RoPE's relative property and its frequency ladder at a glance."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from ._style import BOOK_STYLE, finish, new_figure

__all__ = ["rope_at_a_glance"]


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
    fig, (left, right) = new_figure(
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
    return finish(fig, "RoPE rotates each pair of channels by its position")
