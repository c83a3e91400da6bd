"""Reference solutions to chapter 14's exercises (14_triton_kernel)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ropelab.kernels import triton as kt


def partner_sign(rotary_dim: int, layout: str) -> tuple[Tensor, Tensor]:
    """Each channel's partner π(d) and sign σ_d: rot(x)[d] = σ_d · x[π(d)].

    Returns:
        ``(partner, sign)``: an int64 and a float32 tensor, each ``(rotary_dim,)``.
    """
    d = torch.arange(rotary_dim)
    if layout == "interleaved":
        return d ^ 1, torch.where(d % 2 == 0, -1.0, 1.0)
    half = rotary_dim // 2
    return torch.where(d < half, d + half, d - half), torch.where(d < half, -1.0, 1.0)


def grad_x(grad: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The gradient of the rotation with respect to x: grad rotated by −θ (tri-grad)."""
    return kt.apply_rotary(grad, cos, -sin, layout=layout)


@triton.jit
def _rows_kernel(X, COS, SIN, OUT, d, BLOCK_H: tl.constexpr):
    """One program per row of a contiguous (rows, d) tensor, half-split (tri-pair)."""
    first = tl.program_id(0).to(tl.int64) * d + tl.arange(0, BLOCK_H)  # entries a
    second = first + d // 2  # entries b
    mask = tl.arange(0, BLOCK_H) < d // 2
    a = tl.load(X + first, mask=mask, other=0.0)
    b = tl.load(X + second, mask=mask, other=0.0)
    ca, cb = tl.load(COS + first, mask=mask), tl.load(COS + second, mask=mask)
    sa, sb = tl.load(SIN + first, mask=mask), tl.load(SIN + second, mask=mask)
    tl.store(OUT + first, a * ca - b * sa, mask=mask)  # eq. (tri-pair)
    tl.store(OUT + second, b * cb + a * sb, mask=mask)


def rotate_rows(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Exercise tri-ex-kernel: a first RoPE kernel, half-split, one program per row.

    Shapes: x, cos, sin contiguous ``(rows, d)`` float32, d even; returns ``(rows, d)``.
    """
    out = torch.empty_like(x)
    block = triton.next_power_of_2(max(1, x.shape[-1] // 2))
    _rows_kernel[(x.shape[0],)](x, cos, sin, out, x.shape[-1], BLOCK_H=block)
    return out
