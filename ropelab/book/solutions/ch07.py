"""Reference solutions to chapter 07 (context extension): the exercise ``ext-ex1``."""

from __future__ import annotations

import torch

__all__ = ["pi_inv_freq", "ntk_base"]


def pi_inv_freq(d: int, base: float, s: float) -> torch.Tensor:
    """Position Interpolation's frequencies θ_j / s, float64 ``(d // 2,)`` (ext-pi)."""
    return 1.0 / (s * base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))


def ntk_base(base: float, s: float, d: int) -> float:
    """The NTK-aware base b·s^(d/(d-2)) (eq. ``ext-ntk``)."""
    return base * s ** (d / (d - 2))
