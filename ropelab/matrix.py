"""The dense rotation matrix R_{Θ,m} (chapter 04_rotation_matrix).

R is block diagonal in the interleaved layout: d/2 blocks
[[cos mθ_j, -sin mθ_j], [sin mθ_j, cos mθ_j]] (04_rotation_matrix, eq. ``rmatrix``).
In the half-split layout the same rotations sit at rows and columns
(j, j + d/2), so R is P R_interleaved Pᵀ for the permutation P of 03_pairing.
It costs d² multiplications per vector against about 3d for the elementwise
form, which is why no implementation builds it; this module exists to check
the derivations.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_inv_freq, check_layout
from .frequencies import angles

__all__ = ["rotation_matrix"]


def rotation_matrix(position: int | Tensor, inv_freq: Tensor, *, layout: str = "interleaved") -> Tensor:
    """The dense orthogonal R_{Θ,m} with ``R @ x[m] == apply_rotary`` at position m (04_rotation_matrix, eq. ``rmatrix``).

    Args:
        position: one integer position m (an int or a 0-d integer tensor).
        inv_freq: ``(dim // 2,)`` frequencies; R has its dtype and device.
        layout: ``"interleaved"`` (block diagonal) or ``"half_split"``.

    Returns:
        Tensor ``(dim, dim)``.
    """
    inv_freq = check_inv_freq(inv_freq)
    layout = check_layout(layout)
    if isinstance(position, torch.Tensor):
        if position.ndim != 0 or position.is_floating_point() or position.dtype == torch.bool:
            raise TypeError(f"position must be one integer, got a tensor of shape {tuple(position.shape)} and dtype {position.dtype}")
        position = int(position)
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"position must be an int, got {type(position).__name__} {position!r}")
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    half = inv_freq.shape[0]
    a = angles([position], inv_freq)[0]
    c, s = a.cos(), a.sin()
    idx = torch.arange(half, device=inv_freq.device)
    if layout == "interleaved":
        first, second = 2 * idx, 2 * idx + 1
    else:
        first, second = idx, idx + half
    r = torch.zeros(2 * half, 2 * half, dtype=inv_freq.dtype, device=inv_freq.device)
    r[first, first] = c
    r[first, second] = -s
    r[second, first] = s
    r[second, second] = c
    return r
