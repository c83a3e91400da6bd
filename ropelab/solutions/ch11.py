"""Reference solutions to chapter 11's exercises (11_trained_model)."""

from __future__ import annotations

import math

__all__ = ["critical_dimension", "extrapolation_bound"]


def critical_dimension(dim: int, base: float, train_len: int) -> int:
    """Liu et al.'s critical dimension d_extra = 2⌈(d/2)·log_b(L/2π)⌉ (eq. ``toy-critical``).

    The channels (two per pair) whose pairs complete a full turn within the
    training length; the pairs beyond it never saw their whole circle.
    """
    return 2 * math.ceil(dim / 2 * math.log(train_len / (2 * math.pi)) / math.log(base))


def extrapolation_bound(dim: int, base: float, train_len: int) -> float:
    """Liu et al.'s extrapolation bound T = 2π·b^(d_extra/d): the wavelength of the first pair past the critical dimension."""
    return 2 * math.pi * base ** (critical_dimension(dim, base, train_len) / dim)
