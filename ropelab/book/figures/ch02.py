"""Chapter 02's figures (complex rotation): the goal, a pair turning, its score."""

from __future__ import annotations

import cmath
import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ropelab.complex import apply_rotary_complex, relative_score

from ._style import finish, new_figure

__all__ = ["shift_invariance", "pair_rotation", "pair_score"]


def _free_corner(phases: Sequence[float]) -> str:
    """The legend corner of a square plot centred on 0 farthest, in angle, from
    vectors with these phases (radians)."""
    corners = {"upper right": 45, "upper left": 135, "lower left": -135,
               "lower right": -45}

    def gap(corner: str) -> float:  # the angle to the nearest vector
        a = math.radians(corners[corner])
        return min(abs(math.remainder(a - p, 2 * math.pi)) for p in phases)

    return max(corners, key=gap)


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
    fig, axes = new_figure(1, 2, width=9.6, height=4.8)
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
        ax.axhline(0, color="0.85", lw=0.8, zorder=0)
        ax.axvline(0, color="0.85", lw=0.8, zorder=0)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.set_xlabel("first channel of the pair (input units)")
        ax.set_ylabel("second channel (input units)")
        ax.set_title(
            ("as placed" if s == 0 else f"both shifted by s = {s}")
            + f"\nangle = {abs(a1 - a0):.3f} rad, score = {score:.3f}"
        )
        ax.legend(loc=_free_corner([cmath.phase(fq), cmath.phase(fk)]), fontsize=9)
    return finish(
        fig,
        f"Shifting both positions turns both vectors by sθ (θ = {theta} rad/token)",
    )


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
    fig, axes = new_figure(
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
            # inside the circle, opposite the tips: it covers no arrow and no arc
            u = complex(zs.mean()) / radius
            c = -0.45 * radius * u / abs(u)
            side = 0.62 * radius
            ins = ax.inset_axes(
                [c.real - side / 2, c.imag - side / 2, side, side],
                transform=ax.transData,
            )
            ins.scatter(zs.real, zs.imag, c=colors, s=18, zorder=3)
            for k in (0, len(pos) - 1):  # the ends only: the colours order the rest
                ins.annotate(
                    f"m={pos[k]}",
                    xy=(zs[k].real, zs[k].imag),
                    xytext=(8, 0),
                    textcoords="offset points",
                    va="center",
                    color=colors[k],
                )
            lo, hi = float(zs.imag.min()), float(zs.imag.max())
            span = max(hi - lo, 1e-12)
            cx = float(zs.real.mean())
            ins.set_xlim(cx - 0.5 * span, cx + 3.0 * span)  # room for the labels
            ins.set_ylim(lo - 0.15 * span, hi + 0.15 * span)
            ins.set_xticks([])
            ins.set_yticks([])
            name = f"{name}\ninset: the tips zoomed (span {sweep:.1e} rad)"
        lim = 1.3 * radius
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        ax.axhline(0.0, color="0.85", lw=0.8, zorder=0)
        ax.axvline(0.0, color="0.85", lw=0.8, zorder=0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("Re z = first channel x₁ (input units)")
        ax.set_ylabel("Im z = second channel x₂ (input units)")
    return finish(
        fig,
        rf"One pair $z$ rotated to $z\,e^{{im\theta}}$, m = {pos[0]}..{pos[-1]}",
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
    fig, ax = new_figure(width=8.0, height=4.0)
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
    return finish(
        fig,
        f"One pair's score against m − n (q = {q.real:g}{q.imag:+g}i, k = "
        f"{k.real:g}{k.imag:+g}i)",
    )
