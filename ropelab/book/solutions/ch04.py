"""Reference solutions to chapter 4's exercises (04_rotation_matrix)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["rotation_matrix"]


def rotation_matrix(position: int, theta: Tensor) -> Tensor:
    """Exercise 1: R_{Θ,m}, interleaved, one 2×2 block per frequency; (d, d)."""
    a = position * theta
    c, s = a.cos(), a.sin()
    blocks = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)),
                         -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks.unbind(0))
