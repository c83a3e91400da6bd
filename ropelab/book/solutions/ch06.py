"""Reference solutions to chapter 06 (attention and decay): exercise ``attn-ex1``."""

from __future__ import annotations

import torch

__all__ = ["decay_bound"]


def decay_bound(distances, dim: int, base: float = 10000.0) -> torch.Tensor:
    """RoFormer's relative upper bound B(δ) in float64 (eq. ``attn-decay-bound``).

    B(δ) = (1/(d/2)) Σ_{j=1}^{d/2} |S_j(δ)|, with S_j the partial sums of the
    phasors e^{iδθ_j}; ``distances`` ``(n,)`` -> ``(n,)``.
    """
    j = torch.arange(dim // 2, dtype=torch.float64)
    theta = base ** (-2 * j / dim)  # θ_j, j = 0..d/2-1
    angle = torch.as_tensor(distances, dtype=torch.float64)[:, None] * theta
    phasors = torch.polar(torch.ones_like(angle), angle)
    partial = torch.cumsum(phasors, dim=1)  # S_1 .. S_{d/2}
    return partial.abs().mean(dim=1)
