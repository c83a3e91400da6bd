"""Reference solutions to chapter 07 (context extension): the exercises ``ext-ex1``
and ``ext-ex3``."""

from __future__ import annotations

import math

import torch

__all__ = ["pi_inv_freq", "ntk_base", "yarn_logit_factor"]


def pi_inv_freq(d: int, base: float, s: float) -> torch.Tensor:
    """Position Interpolation's frequencies θ_j / s, float64 ``(d // 2,)`` (ext-pi)."""
    return 1.0 / (s * base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))


def ntk_base(base: float, s: float, d: int) -> float:
    """The NTK-aware base b·s^(d/(d-2)) (eq. ``ext-ntk``)."""
    return base * s ** (d / (d - 2))


def yarn_logit_factor(s: float) -> float:
    """The factor μ² = (0.1·ln s + 1)² by which YaRN multiplies the attention logits
    for a scale factor ``s > 1`` (eq. ``ext-yarn-temp``, exercise ``ext-ex3``)."""
    return (0.1 * math.log(s) + 1) ** 2
