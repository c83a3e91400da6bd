"""Reference solutions to chapter 14's exercises (14_triton_kernel)."""

from __future__ import annotations

import torch
from torch import Tensor

from ropelab.kernels import triton as kt


def partner_sign(rotary_dim: int, layout: str) -> tuple[Tensor, Tensor]:
    """Each channel's partner π(d) and sign σ_d, so that rot(x)[d] = σ_d · x[π(d)] (eq. tri-partner).

    Returns:
        ``(partner, sign)``: an int64 and a float32 tensor, each ``(rotary_dim,)``.
    """
    d = torch.arange(rotary_dim)
    if layout == "interleaved":
        return d ^ 1, torch.where(d % 2 == 0, -1.0, 1.0)
    half = rotary_dim // 2
    return torch.where(d < half, d + half, d - half), torch.where(d < half, -1.0, 1.0)


def grad_x(grad: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The gradient of the rotation with respect to x: grad rotated by −θ (eq. tri-grad)."""
    return kt.apply_rotary(grad, cos, -sin, layout=layout)
