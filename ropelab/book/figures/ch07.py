"""Chapter 07's figures (context extension): frequencies, ramps, temperatures."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from ropelab.frequencies import inv_freq, wavelengths
from ropelab.scaling import ntk_scaled_base, scaled_inv_freq

from ._style import finish, new_figure

__all__ = [
    "context_extension_factors",
    "pi_interpolation",
    "angle_overshoot",
    "stale_cache_error",
    "yarn_ramps",
    "attention_temperature",
    "llama3_bands",
    "longrope_factors",
]


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

    fig, ax = new_figure(width=8.4, height=5.0)
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
    # Below the axes: inside, every corner holds a curve (PI runs along the top).
    fig.legend(fontsize="small", loc="outside lower center", ncol=2)
    nb = "\u00a0"  # keep "b = 10,000" on one line when the title wraps
    return finish(
        fig,
        f"How each method rescales the {dim // 2} frequencies "
        f"(d{nb}={nb}{dim}, b{nb}={nb}{base:,.0f}, s{nb}={nb}{factor:g})",
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
    x = np.asarray(distances, dtype=float)
    y = np.asarray(score, dtype=float)
    gx, gy = np.asarray(grid, dtype=float), np.asarray(grid_score, dtype=float)
    line = np.interp(x, gx, gy)
    bnd = np.asarray(bound, dtype=float)
    fig, ax = new_figure(width=7.2, height=4.2)
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
    return finish(fig, "Under PI a score lies between two trained ones")


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
    fig, ax = new_figure(width=7.2, height=5.4)
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
    return finish(fig, "Where each pair's angles end up on the longer sequence")


def stale_cache_error(positions, rel_error) -> Figure:
    """Relative error of a cached key rotated with stale frequencies, by key position
    (07_context_extension).

    Args:
        positions: the keys' positions.
        rel_error: ‖k_stale − k_fresh‖ / ‖k_fresh‖ for each key.

    Returns:
        A Figure with one axis.
    """
    fig, ax = new_figure(width=7.2, height=3.8)
    ax.plot([float(p) for p in positions], [float(e) for e in rel_error], lw=0.8)
    ax.set_xlabel("position n of the cached key (tokens)")
    ax.set_ylabel("relative error of the key (unitless)")
    ax.grid(True, alpha=0.3)
    return finish(
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
    fig, ax = new_figure(width=7.2, height=4.0)
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
    fig.legend(fontsize="small", loc="outside lower center", ncol=2)  # off the ramps
    return finish(fig, "YaRN's ramp: as the paper writes it and as checkpoints use it")


def attention_temperature(factors, curves) -> Figure:
    """Logit multiplier μ² against the scale factor s, one line per rule
    (07_context_extension).

    Args:
        factors: scale factors s.
        curves: ``{rule name: μ² at each s}``.

    Returns:
        A Figure with one axis, log x.
    """
    fig, ax = new_figure(width=7.2, height=4.0)
    xs = [float(f) for f in factors]
    for name, values in curves.items():
        ax.plot(xs, [float(v) for v in values], lw=1.6, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("scale factor s = L'/L")
    ax.set_ylabel("logit multiplier μ² (unitless)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return finish(fig, "How much each rule sharpens attention")


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
    fig, ax = new_figure(width=7.2, height=4.0)
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
    return finish(fig, "Llama 3.1: three bands by wavelength")


def longrope_factors(short, long, *, first_slow: int) -> Figure:
    """LongRoPE's per-pair rescale factors, short and long (07_context_extension, eq.
    ``ext-longrope``).

    Args:
        short, long: ρ_j for sequences up to L and beyond it.
        first_slow: the first pair without a full turn in training.

    Returns:
        A Figure with one axis.
    """
    fig, ax = new_figure(width=7.2, height=4.0)
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
    return finish(fig, "LongRoPE: one factor per pair, two sets (illustrative values)")
