"""apply_rotary's torch path: the rotation without the plain formula's temporaries
(09_performance).

Used where the fused kernel does not apply (a GPU, no C compiler, a layout
the kernel declines, or while torch traces the call). Interleaved pairs are
one complex multiplication by the phasor table; half-split pairs are one
multiplication and two fused multiply-adds, in cache-sized blocks of rows on
the CPU.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._checks import compiling

__all__ = ["rotate_into"]

# Half a block of x and of its result (each of the two threads takes half) fit in one
# core's L2 (1 MiB on common x86 parts), so the fused multiply-adds re-read them from
# cache, not DRAM.
_BLOCK_BYTES = 1 << 20


def _complex_view_ok(t: Tensor) -> bool:
    """Whether ``t``'s last axis can be viewed as complex pairs without a copy."""
    return (
        t.stride(-1) == 1
        and t.storage_offset() % 2 == 0
        and all(st % 2 == 0 for st in t.stride()[:-1])
    )


def rotate_into(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> None:
    """out = x·cos + rot(x)·sin with torch operations, within one rounding of the
    plain formula.

    Interleaved pairs are one complex multiplication by the phasor table: a
    single pass over a float32/float64 x, and for bfloat16/float16 (torch has
    no complex type for them) an upcast into a float32 scratch block, an
    in-place multiplication and one rounding back, block by block on the CPU.
    It assumes the two entries of each pair in ``cos`` and ``sin`` are equal,
    as :func:`ropelab.cos_sin` builds them. Half-split pairs take one
    multiplication that writes x·cos into ``out`` and two fused multiply-adds
    that add ∓x_partner·sin into its two halves in place; on the CPU a large
    x goes through in blocks of rows that stay in cache between those steps.
    """
    h = x.shape[-1] // 2
    if compiling():
        _mul_fma(
            out, x, cos, sin, layout, h
        )  # torch.compile fuses it; views and blocks are
        return  # for eager mode (and storage offsets cannot be traced)
    if layout == "interleaved" and _complex_view_ok(x) and _complex_view_ok(out):
        wide_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        phasor = torch.complex(
            cos[..., 0::2].to(wide_dtype), sin[..., 0::2].to(wide_dtype)
        )
        if x.dtype in (torch.float32, torch.float64):
            torch.mul(
                torch.view_as_complex(x.unflatten(-1, (h, 2))),
                phasor,
                out=torch.view_as_complex(out.unflatten(-1, (h, 2))),
            )
            return
        blocks = _cpu_blocks(out, x, phasor)
        if blocks is None:
            wide = x.float()  # upcast: the 16-bit dtypes have no complex type
            torch.view_as_complex(wide.unflatten(-1, (h, 2))).mul_(phasor)
            out.copy_(wide)  # one rounding back
            return
        scratch = torch.empty(
            blocks[0][1].numel(), dtype=torch.float32, device=x.device
        )
        for o, xb, p in blocks:
            wide = scratch[: xb.numel()].view(xb.shape)
            wide.copy_(xb)
            torch.view_as_complex(wide.unflatten(-1, (h, 2))).mul_(p)
            o.copy_(wide)
        return
    blocks = _cpu_blocks(out, x, cos, sin)
    for o, xb, c, sn in blocks if blocks is not None else [(out, x, cos, sin)]:
        _mul_fma(o, xb, c, sn, layout, h)


def _mul_fma(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, h: int
) -> None:
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
