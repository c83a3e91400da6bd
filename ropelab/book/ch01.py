"""Chapter 01's helpers (frequencies): exact references computed with mpmath.

The chapter compares ropelab, transformers and Meta's code with values that
share none of their code: the frequencies, wavelengths and full-turn counts
of eqs. ``theta``, ``wavelength`` and ``freq-fullturn`` evaluated to 40
significant digits. A float is converted to mpmath exactly, so a comparison
with a float input (a context length L, a float32 θ) is decided exactly.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import mpmath
import torch
from torch import Tensor

__all__ = [
    "DIGITS",
    "exact_theta",
    "exact_wavelengths",
    "exact_full_turns",
    "exponent_is_exact",
    "relative_errors",
    "turns_completed",
]

DIGITS = 40  # significant decimal digits of the exact references


def _check(d: int, base: float) -> None:
    if isinstance(d, bool) or not isinstance(d, int) or d <= 0 or d % 2:
        raise ValueError(f"d must be a positive even int, got {d!r}")
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base!r}")


@lru_cache(maxsize=64)
def _theta(d: int, base: float) -> tuple[mpmath.mpf, ...]:
    with mpmath.workdps(DIGITS):
        b = mpmath.mpf(base)
        return tuple(b ** (-mpmath.mpf(2 * j) / d) for j in range(d // 2))


def exact_theta(d: int, base: float) -> tuple[mpmath.mpf, ...]:
    """θ_j = base^(−2j/d), j = 0..d/2−1, to 40 digits
    (01_frequencies, eq. ``theta``)."""
    _check(d, base)
    return _theta(d, float(base))


@lru_cache(maxsize=64)
def _wavelengths(d: int, base: float) -> tuple[mpmath.mpf, ...]:
    with mpmath.workdps(DIGITS):
        two_pi = 2 * mpmath.pi
        return tuple(two_pi / t for t in _theta(d, base))


def exact_wavelengths(d: int, base: float) -> tuple[mpmath.mpf, ...]:
    """λ_j = 2π/θ_j = 2π·base^(2j/d) in tokens, to 40 digits
    (01_frequencies, eq. ``wavelength``); (d/2,) increasing."""
    _check(d, base)
    return _wavelengths(d, float(base))


def exact_full_turns(d: int, base: float, context_len: float) -> int:
    """N(L): how many pairs have λ_j ≤ L, decided exactly for the given float L
    (01_frequencies, eq. ``freq-fullturn``), by counting, not by the closed form."""
    _check(d, base)
    length = mpmath.mpf(context_len)  # exact: a float is a dyadic rational
    with mpmath.workdps(DIGITS):
        return sum(1 for lam in _wavelengths(d, float(base)) if lam <= length)


def exponent_is_exact(d: int) -> bool:
    """Whether float32 ``arange(0, d, 2) / d`` holds every 2j/d exactly
    (true when d is a power of two)."""
    _check(d, 2.0)
    computed = (torch.arange(0, d, 2).float() / d).tolist()
    return all(Fraction(x) == Fraction(2 * j, d) for j, x in enumerate(computed))


def relative_errors(theta: Tensor, base: float) -> Tensor:
    """|θ̂_j / θ_j − 1| of computed frequencies θ̂ (d/2,) against the exact θ_j,
    in float64 (01_frequencies)."""
    if theta.ndim != 1:
        raise ValueError(f"theta must be 1-d (d/2,), got shape {tuple(theta.shape)}")
    d = 2 * theta.numel()
    exact = exact_theta(d, base)
    with mpmath.workdps(DIGITS):
        errs = [abs(mpmath.mpf(t) / e - 1) for t, e in zip(theta.tolist(), exact)]
    return torch.tensor([float(e) for e in errs], dtype=torch.float64)


def turns_completed(phasors: Tensor) -> Tensor:
    """How many full turns each pair's phasor e^{imθ_j} completes over positions
    m = 0..L−1, counted from the table alone; (L, d/2) complex -> (d/2,) int64.

    Pair j has completed a turn each time its angle, read in (−π, π], passes
    from negative to non-negative: the unwrapped angle m·θ_j has crossed a
    multiple of 2π. Valid while every step θ_j is below π (all of RoPE's).
    """
    if phasors.ndim != 2 or not phasors.is_complex():
        raise ValueError(
            f"phasors must be a complex (L, d/2) table, got {phasors.dtype} "
            f"{tuple(phasors.shape)}"
        )
    angle = phasors.angle()
    return ((angle[:-1] < 0) & (angle[1:] >= 0)).sum(0)
