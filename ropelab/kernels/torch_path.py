"""apply_rotary's torch path: the rotation in torch operations, without the plain
formula's temporaries (09_performance).

Used where no native kernel takes a call (no C compiler, a GPU without
Triton, a layout a kernel declines) and while torch traces it (dispatch
modes, ``torch.jit.trace``). Both layouts take one multiplication that
writes x·cos into ``out`` and two fused multiply-adds that add
∓x_partner·sin into the pair's two channels in place, reading every table
entry where the plain formula reads it; on the CPU a large x goes through in
blocks of rows that stay in cache between those steps. This module also
holds the pair helpers the other modules below :mod:`ropelab.rotary` use
(:func:`turn`, :func:`swap_pairs`, :func:`formula`), so that none of them
imports :mod:`ropelab.rotary`.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["NAME", "backward_sin", "formula", "rotate_into", "swap_pairs", "turn"]

NAME = "torch"

# Half a block of x and of its result (each of the two threads takes half) fit in one
# core's L2 (1 MiB on common x86 parts), so the fused multiply-adds re-read them from
# cache, not DRAM.
_BLOCK_BYTES = 1 << 20


def swap_pairs(t: Tensor, layout: str, first: float, second: float) -> Tensor:
    """Pairs (a, b) of the last axis -> (first·b, second·a); (-1, 1): a 90° turn."""
    if layout == "half_split":
        a, b = t.chunk(2, dim=-1)
        return torch.cat((first * b, second * a), dim=-1)
    pairs = t.unflatten(-1, (-1, 2))
    turned = (first * pairs[..., 1], second * pairs[..., 0])
    return torch.stack(turned, dim=-1).flatten(-2)


def backward_sin(sin: Tensor, layout: str) -> Tensor:
    """s' = sin with each pair's two entries swapped and negated (−sin for tables whose
    pairs share an angle): the table that rotates a gradient back by −θ. Axes the
    table is broadcast along (stride 0) stay broadcast, so a kernel still reads
    it once for all the heads."""
    base = sin
    for axis, (n, stride) in enumerate(zip(sin.shape, sin.stride())):
        if stride == 0 and n > 1:
            base = base.narrow(axis, 0, 1)
    return swap_pairs(base, layout, -1.0, -1.0).expand(sin.shape)


def turn(x: Tensor, layout: str) -> Tensor:
    """rot(x): the 90° turn (a, b) -> (-b, a) of each pair of ``layout`` (ch. 03)."""
    return swap_pairs(x, layout, -1.0, 1.0)


def formula(
    x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int
) -> Tensor:
    """The plain formula ``x·cos + rot(x)·sin`` on the first ``rotary_dim`` channels,
    the rest passed through: what forward-mode AD and torch.func differentiate."""
    head = x[..., :rotary_dim]
    rotated = head * cos + turn(head, layout) * sin
    if rotary_dim == x.shape[-1]:
        return rotated
    return torch.cat((rotated, x[..., rotary_dim:]), -1)


def rotate_into(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int
) -> None:
    """out = x·cos + rot(x)·sin on ``rotary_dim`` channels, the rest copied; within one
    rounding of the plain formula (the fused multiply-add rounds once where the
    formula rounds twice, and 16-bit dtypes round after each step).

    Takes every call of the contract in :mod:`ropelab.kernels`, in place too
    (``out`` is ``x``: the result goes through a temporary).
    """
    dim = x.shape[-1]
    if _in_place(out, x):
        out.copy_(formula(x, cos, sin, layout, rotary_dim))
        return
    head_x = x if rotary_dim == dim else x[..., :rotary_dim]
    head_out = out if rotary_dim == dim else out[..., :rotary_dim]
    h = rotary_dim // 2
    blocks = _cpu_blocks(head_out, head_x, cos, sin)
    for o, xb, c, s in blocks if blocks is not None else [(head_out, head_x, cos, sin)]:
        _mul_fma(o, xb, c, s, layout, h)
    if rotary_dim < dim:
        out[..., rotary_dim:] = x[..., rotary_dim:]


def _in_place(out: Tensor, x: Tensor) -> bool:
    """Whether out is x's memory (the contract allows that or no shared byte), asked
    without data pointers, which tracers' tensors lack."""
    return out is x or (
        torch._C._is_alias_of(out, x)
        and out.storage_offset() == x.storage_offset()
        and out.stride() == x.stride()
    )


def _mul_fma(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, h: int
) -> None:
    """out = x·cos, then out_a −= x_b·sin_a and out_b += x_a·sin_b, each pair (a, b)."""
    torch.mul(x, cos, out=out)
    if layout == "half_split":
        first, second = slice(0, h), slice(h, 2 * h)
    else:
        first, second = slice(0, None, 2), slice(1, None, 2)
    out[..., first].addcmul_(x[..., second], sin[..., first], value=-1)
    out[..., second].addcmul_(x[..., first], sin[..., second])


def _cpu_blocks(
    out: Tensor, x: Tensor, *tables: Tensor
) -> list[tuple[Tensor, ...]] | None:
    """Split a large contiguous CPU problem into cache-sized blocks of rows, or None to
    do it in one go.

    Returns ``(out_block, x_block, *table_blocks)`` tuples; each table is
    ``(..., seq, width)``, broadcast over x's leading axes.
    """
    if (
        x.device.type != "cpu"
        or x.ndim < 3
        or not (x.is_contiguous() and out.is_contiguous())
    ):
        return None
    seq, dim = x.shape[-2], x.shape[-1]
    if x.numel() * x.element_size() <= 2 * _BLOCK_BYTES:
        return None
    lead = tuple(x.shape[:-2])
    # the tables as (rows of x's leading axes, seq, width) views; a copy would defeat
    # the purpose
    try:
        views = [
            t.expand(*lead, seq, t.shape[-1]).view(-1, seq, t.shape[-1]) for t in tables
        ]
    except RuntimeError:
        return None
    xs, outs = x.view(-1, seq, dim), out.view(-1, seq, dim)
    rows = max(1, _BLOCK_BYTES // (dim * x.element_size()))
    if rows >= seq:
        g = rows // seq
        return [
            (outs[i : i + g], xs[i : i + g], *(v[i : i + g] for v in views))
            for i in range(0, xs.shape[0], g)
        ]
    return [
        (
            outs[i, s : s + rows],
            xs[i, s : s + rows],
            *(v[i, s : s + rows] for v in views),
        )
        for i in range(xs.shape[0])
        for s in range(0, seq, rows)
    ]
