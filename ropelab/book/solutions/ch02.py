"""Reference solutions to chapter 2's exercises (02_complex_rotation)."""

from __future__ import annotations

import cmath

__all__ = ["rotate_pair"]


def rotate_pair(x1: float, x2: float, m: int, theta: float) -> tuple[float, float]:
    """Exercise 1: the pair (x1, x2) rotated to position m, (x1 + i·x2)·e^{imθ}."""
    z = complex(x1, x2) * cmath.exp(1j * m * theta)
    return z.real, z.imag
