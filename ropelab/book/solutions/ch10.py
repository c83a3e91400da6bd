"""Reference solutions to chapter 10 (multi-axis RoPE): exercise ``multi-ex1``."""

from __future__ import annotations

import torch

__all__ = ["axial_angles"]


def axial_angles(
    positions_xy: torch.Tensor, dim: int, base: float = 10000.0
) -> torch.Tensor:
    """Axial 2D RoPE angles in float64 (``multi-axial``): ``(n, 2)`` -> ``(n, d // 2)``.

    First the d/4 angles x·ϑ_j, then the d/4 angles y·ϑ_j, ϑ_j = b^(-4j/d).
    """
    j = torch.arange(dim // 4, dtype=torch.float64)
    vt = base ** (-4 * j / dim)  # one ladder for both axes
    pos = positions_xy.to(torch.float64).cpu()
    return torch.cat((pos[:, :1] * vt, pos[:, 1:] * vt), dim=1)  # x pairs, then y pairs
