"""Reference solutions to chapter 1's exercises (01_frequencies)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["inv_freq"]


def inv_freq(d: int, base: float) -> Tensor:
    """Exercise 1: θ from RoFormer's 1-based formula b^(−2(i−1)/d); (d/2,), float32."""
    j = torch.arange(1, d // 2 + 1,
                     dtype=torch.float64)  # the paper's 1-based pair index
    return (base ** (-2 * (j - 1) / d)).float()
