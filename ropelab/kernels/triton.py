"""RoPE on the GPU in one Triton kernel: ``x·cos + rot(x)·sin`` (14_triton_kernel).

:func:`apply_rotary` has :func:`ropelab.apply_rotary`'s signature and
meaning; :func:`apply_rotary_at` reads the tables at per-token positions
(offsets, left padding, packed and variable-length batches via
:func:`ropelab.packed_positions`); :func:`apply_rotary_qk` rotates q and k in
one launch. Every entry point is differentiable: the backward pass of a
rotation is the rotation by −θ, the same kernel with sin negated.

One program handles a block of ``BLOCK_S`` rows (tokens) of one "outer"
index and loops over the axis the tables broadcast along (the heads), so
cos and sin are read once for all heads. A row's partner channels (the other
half for half-split pairs, the neighbour for interleaved ones) come from a
second, pair-swapped load of the same row instead of a strided even/odd
split. Arithmetic is float32 (float64 for float64 inputs); a 16-bit result
is rounded once, on the store.

On a machine without a GPU, Triton's interpreter runs the same kernel on CPU
tensors when ``TRITON_INTERPRET=1`` is set before this module is imported.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

import triton
import triton.language as tl

__all__ = [
    "apply_rotary",
    "apply_rotary_at",
    "apply_rotary_qk",
    "available",
    "requested_bytes",
    "rotate_into",
]

_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_LAYOUTS = ("half_split", "interleaved")


@triton.jit
def _round_bf16(y):
    """float32 -> bfloat16, rounded to nearest even with integer operations.

    The GPU rounds this way in hardware; Triton's interpreter truncates, so
    the rounding is spelled out to make both give the same bits.
    """
    bits = y.to(tl.uint32, bitcast=True)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    half = (bits >> 16).to(tl.uint16)
    half = tl.where(y != y, 0x7FC0, half)  # NaN stays a (quiet) NaN
    return half.to(tl.bfloat16, bitcast=True)


# fmt: off
@triton.jit
def _rotary_kernel(
    X, COS, SIN, OUT, POS, X2, OUT2,
    n_loop, n_loop2, per_prog, per_prog2, n_rows, rot_dim, dim,
    sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d,  # x, out: outer, loop, row, channel
    sc_o, sc_r, sc_d, ss_o, ss_r, ss_d,  # cos, sin: (outer, row, channel)
    sp_o, sp_r,  # positions: (outer, row)
    sy_o, sy_l, sy_r, sy_d, sz_o, sz_l, sz_r, sz_d,  # x2 (the keys), out2
    INTERLEAVED: tl.constexpr, CONJ: tl.constexpr, HAS_POS: tl.constexpr,
    HAS_X2: tl.constexpr, WIDE64: tl.constexpr, BF16: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """A block of BLOCK_R rows of outer index o, for a group of the looped axis.

    Reads the cos/sin rows once, then rotates x (and x2, the keys, when
    HAS_X2) for each index of its group of the looped axis (the heads):
    ``per_prog`` of them, from ``program_id(2) * per_prog``.
    """
    o = tl.program_id(0).to(tl.int64)
    group = tl.program_id(2)
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    in_row = rows < n_rows
    rotated = d < rot_dim
    if INTERLEAVED:
        partner = d ^ 1  # pairs (2i, 2i+1)
        minus = (d % 2) == 0
    else:
        half = rot_dim // 2
        partner = tl.where(d < half, d + half, d - half)  # pairs (i, i + rot_dim/2)
        minus = d < half
    m_rot = in_row[:, None] & rotated[None, :]
    m_all = in_row[:, None] & (d < dim)[None, :]
    rows = rows.to(tl.int64)

    # The tables, read once for every index of the looped axis.
    if HAS_POS:
        pos = tl.load(POS + o * sp_o + rows * sp_r, mask=in_row, other=0).to(tl.int64)
        c_rows = pos * sc_r
        s_rows = pos * ss_r
    else:
        c_rows = o * sc_o + rows * sc_r
        s_rows = o * ss_o + rows * ss_r
    c = tl.load(COS + c_rows[:, None] + d[None, :] * sc_d, mask=m_rot, other=0.0)
    if CONJ:  # the backward pass: the transpose takes -s of the partner channel
        s_cols = partner
    else:
        s_cols = d
    s = tl.load(SIN + s_rows[:, None] + s_cols[None, :] * ss_d, mask=m_rot, other=0.0)
    if CONJ:
        s = -s
    if WIDE64:
        c = c.to(tl.float64)
        s = s.to(tl.float64)
    else:
        c = c.to(tl.float32)
        s = s.to(tl.float32)
    s = tl.where(minus[None, :], -s, s)  # rot(x) = (-x_partner, x_partner) in each pair

    first = group * per_prog
    _rotate_heads(X, OUT, first, tl.minimum(first + per_prog, n_loop), o, rows, d,
                  partner, rotated, m_all, m_rot, c, s,
                  sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d, BF16)
    if HAS_X2:  # the keys, with the same tables
        first2 = group * per_prog2
        _rotate_heads(X2, OUT2, first2, tl.minimum(first2 + per_prog2, n_loop2), o,
                      rows, d, partner, rotated, m_all, m_rot, c, s,
                      sy_o, sy_l, sy_r, sy_d, sz_o, sz_l, sz_r, sz_d, BF16)


@triton.jit
def _rotate_heads(
    X, OUT, first, last, o, rows, d, partner, rotated, m_all, m_rot, c, s,
    sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d, BF16: tl.constexpr,
):
    """For each head h in [first, last): load the rows and their pair-swapped copy,
    rotate, store."""
    for head in range(first, last):
        h = o * 0 + head  # int64 (o is), so h * stride cannot overflow int32
        xb = X + o * sx_o + h * sx_l + rows[:, None] * sx_r
        x = tl.load(xb + d[None, :] * sx_d, mask=m_all, other=0.0)
        xp = tl.load(xb + partner[None, :] * sx_d, mask=m_rot, other=0.0)
        y = x.to(c.dtype) * c + xp.to(c.dtype) * s  # the rotation, float32 or wider
        y = tl.where(rotated[None, :], y, x)  # channels past rot_dim: copied
        if BF16:
            y = _round_bf16(y)
        ob = OUT + o * so_o + h * so_l + rows[:, None] * so_r
        tl.store(ob + d[None, :] * so_d, y.to(OUT.dtype.element_ty), mask=m_all)
# fmt: on


def available() -> bool:
    """True when Triton can run the kernel: on a CUDA GPU or with TRITON_INTERPRET=1."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()


def _check(x: Tensor, layout: str, rotary_dim: int | None, out: Tensor | None) -> int:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"x must be float32/64, bfloat16 or float16, got {x.dtype}")
    if x.dim() < 2 or x.dim() > 4:
        raise ValueError(
            f"x must have 2 to 4 axes (..., seq, dim), got {tuple(x.shape)}"
        )
    if layout not in _LAYOUTS:
        raise ValueError(
            f"layout must be 'half_split' or 'interleaved', not {layout!r}"
        )
    dim = x.shape[-1]
    r = dim if rotary_dim is None else rotary_dim
    if isinstance(r, bool) or not isinstance(r, int) or r < 2 or r % 2 or r > dim:
        raise ValueError(
            f"rotary_dim must be an even int in [2, {dim}], got {rotary_dim!r}"
        )
    if out is not None:
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(
                f"out must match x: shape {tuple(x.shape)}, {x.dtype} on {x.device}; "
                f"got {tuple(out.shape)}, {out.dtype} on {out.device}"
            )
    return r


def _tables(x: Tensor, cos: Tensor, sin: Tensor, r: int) -> tuple[Tensor, Tensor]:
    """cos and sin expanded (strides 0, no copy) to x's shape over r channels."""
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
        if t.shape[-1] != r:
            raise ValueError(
                f"{name} must have rotary_dim = {r} channels, got {tuple(t.shape)}"
            )
        try:
            torch.broadcast_shapes(t.shape, (*x.shape[:-1], r))
        except RuntimeError:
            raise ValueError(
                f"{name} {tuple(t.shape)} does not broadcast against x {tuple(x.shape)}"
            ) from None
    shape = (*x.shape[:-1], r)
    return cos.expand(shape), sin.expand(shape)


def _four(t: Tensor) -> Tensor:
    """``t`` with leading axes of size 1 added up to 4 axes (a view)."""
    return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape)) if t.dim() < 4 else t


def _launch(
    out, x, cos, sin, pos, layout, r, conj, k=None, out_k=None, kernel=None
) -> None:
    """Run the kernel on 4-axis views (outer, looped, rows, channels) of x, out, k.

    Without ``pos``, cos and sin are expanded to x's shape over r channels;
    with ``pos`` (positions expanded to x's token axes) they are
    ``(n_positions, r)`` tables read at those positions. k, when given, has
    x's shape except along the looped axis (the heads).
    """
    x4 = _four(x)
    varies = _four(pos.unsqueeze(-1))[..., 0] if pos is not None else _four(cos)
    still = [
        a
        for a in (0, 1, 2)
        if x4.shape[a] == 1
        or (varies.stride(a) == 0 and (pos is not None or _four(sin).stride(a) == 0))
    ]
    if k is not None and _qk_axis(x, k) is not None:
        still = [a for a in still if a == _qk_axis(x, k)]
    # Loop over an axis the tables do not vary along, the longest (the heads).
    loop = max(still, key=lambda a: x4.shape[a], default=None)
    if loop is None:  # the tables vary along every axis: one launch per index of axis 0
        if k is not None:
            raise ValueError(
                "q and k in one launch need tables shared across the heads"
            )
        for i in range(x4.shape[0]):
            sub = lambda t: None if t is None else _four(t)[i]
            _launch(
                sub(out),
                sub(x),
                cos if pos is not None else sub(cos),
                sin if pos is not None else sub(sin),
                None if pos is None else _four(pos.unsqueeze(-1))[i][..., 0],
                layout,
                r,
                conj,
            )
        return
    outer, rows = sorted((a for a in (0, 1, 2) if a != loop), key=lambda a: x4.shape[a])
    perm = (outer, loop, rows, 3)
    x4, o4 = x4.permute(perm), _four(out).permute(perm)
    n_outer, n_loop, n_rows, dim = x4.shape
    if pos is None:
        c4, s4 = _four(cos).permute(perm), _four(sin).permute(perm)
        sc = (c4.stride(0), c4.stride(2), c4.stride(3))
        ss = (s4.stride(0), s4.stride(2), s4.stride(3))
        p3, sp = x4, (0, 0)
    else:
        c4, s4 = cos, sin
        sc = (0, cos.stride(0), cos.stride(1))
        ss = (0, sin.stride(0), sin.stride(1))
        p3 = varies.permute(perm[:3])
        sp = (p3.stride(0), p3.stride(2))
    if k is not None:
        k4, ok4 = _four(k).permute(perm), _four(out_k).permute(perm)
        n_loop2, sk, sok = k4.shape[1], k4.stride(), ok4.stride()
    else:
        k4, ok4, n_loop2, sk, sok = x4, o4, 0, (0,) * 4, (0,) * 4
    block_d = triton.next_power_of_2(dim)
    # A tile of at most 4,096 elements (BLOCK_R rows of BLOCK_D channels) keeps
    # x, its partner copy and the tables in registers with the default 4 warps.
    block_r = max(1, min(triton.next_power_of_2(n_rows), max(1, 4096 // block_d), 64))
    row_blocks = triton.cdiv(n_rows, block_r)
    groups = _head_groups(x, n_outer * row_blocks, max(n_loop, n_loop2))
    per_prog = triton.cdiv(n_loop, groups)
    per_prog2 = triton.cdiv(n_loop2, groups)
    grid = (n_outer, row_blocks, groups)
    guard = torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()
    with guard:
        _run_kernel(kernel or _rotary_kernel, grid, (
            x4, c4, s4, o4, p3, k4, ok4,
            n_loop, n_loop2, per_prog, per_prog2, n_rows, r, dim,
            *x4.stride(), *o4.stride(), *sc, *ss, *sp, *sk, *sok,
        ), layout, conj, pos is not None, k is not None, x.dtype, block_r, block_d)


def _head_groups(x: Tensor, programs: int, heads: int) -> int:
    """How many groups to split the heads into: enough programs to fill a GPU.

    Each group re-reads the tables, so heads are grouped only when the other
    grid axes give fewer than about four programs per multiprocessor (a
    decoding step, a short sequence). On the CPU (Triton's interpreter,
    which runs programs one after another) there is one group.
    """
    if not x.is_cuda or heads <= 1:
        return 1
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    return max(1, min(heads, triton.cdiv(4 * sms, programs)))


def _run_kernel(kernel, grid, args, layout, conj, has_pos, has_x2, dtype, block_r,
                block_d) -> None:
    """Launch ``kernel`` on ``grid`` with its arguments and compile-time constants."""
    kernel[grid](
        *args,
        INTERLEAVED=layout == "interleaved", CONJ=conj, HAS_POS=has_pos,
        HAS_X2=has_x2, WIDE64=dtype == torch.float64, BF16=dtype == torch.bfloat16,
        BLOCK_R=block_r, BLOCK_D=block_d,
        enable_fp_fusion=False,  # no fused multiply-adds: the plain formula's roundings
    )


def _qk_axis(q: Tensor, k: Tensor) -> int | None:
    """The one leading axis (of the 4-axis views) where q and k differ: the heads."""
    q4, k4 = _four(q), _four(k)
    diff = [a for a in (0, 1, 2) if q4.shape[a] != k4.shape[a]]
    return diff[0] if len(diff) == 1 else None


def _overlaps(a: Tensor, b: Tensor) -> bool:
    """Whether a and b share memory, other than as the same tensor element for element.

    Views with the same shape and strides (two slices of one buffer) overlap
    only when the distance between their starts is itself an offset inside
    the view: decomposed greedily along the strides, largest first, which is
    exact for views that do not overlap themselves. Other pairs overlap when
    their address ranges do (conservative).
    """
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    if a.shape == b.shape and a.stride() == b.stride():
        delta = b.storage_offset() - a.storage_offset()
        for n, st in sorted(zip(a.shape, a.stride()), key=lambda p: -abs(p[1])):
            if st:
                i = max(-(n - 1), min(n - 1, int(delta / abs(st))))
                delta -= i * abs(st)
        return delta == 0

    def span(t):
        lo = t.data_ptr()
        last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        return lo, lo + (last + 1) * t.element_size()

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


class _Rotate(torch.autograd.Function):
    """y = x·cos + rot(x)·sin (and for k); the backward pass rotates by −θ."""

    @staticmethod
    def forward(ctx, x, k, cos, sin, pos, layout, r, out):
        out = torch.empty_like(x)
        out_k = None if k is None else torch.empty_like(k)
        _launch(out, x, cos, sin, pos, layout, r, False, k, out_k)
        tables = cos.requires_grad or sin.requires_grad
        keep = (x, k) if tables else (None, None)
        ctx.save_for_backward(*keep, cos, sin, pos)
        ctx.layout, ctx.r = layout, r
        return out if k is None else (out, out_k)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad, grad_k=None):
        x, k, cos, sin, pos = ctx.saved_tensors
        gx = gk = gc = gs = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            gx = torch.empty_like(grad)
            if grad_k is not None:
                gk = torch.empty_like(grad_k)
                grad_k = grad_k.contiguous()
            _launch(gx, grad.contiguous(), cos, sin, pos, ctx.layout, ctx.r, True,
                    grad_k, gk)
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            pairs = [(grad, x)] + ([(grad_k, k)] if grad_k is not None else [])
            if ctx.needs_input_grad[2]:
                gc = _table_grad(pairs, cos, pos, ctx.r, None)
            if ctx.needs_input_grad[3]:
                gs = _table_grad(pairs, sin, pos, ctx.r, ctx.layout)
        return gx, gk, gc, gs, None, None, None, None


def _table_grad(pairs, table: Tensor, pos: Tensor | None, r: int, layout: str | None):
    """Σ g·x (cos, layout None) or Σ g·rot(x) (sin) over the rows reading an entry.

    Without positions the table was broadcast, so the sum runs over the
    broadcast axes; with positions, token t read row ``pos[t]``, so its
    share is added to that row.
    """
    from ..rotary import rotate_half, rotate_interleaved

    total = torch.zeros(table.shape, dtype=table.dtype, device=table.device)
    for g, x in pairs:
        xr = x[..., :r]
        if layout is not None:
            xr = (rotate_half if layout == "half_split" else rotate_interleaved)(xr)
        prod = g[..., :r] * xr
        if pos is None and prod.shape == total.shape:
            total = total + prod
        elif pos is None:
            # the keys have fewer heads than the (expanded) table: their share goes
            # into one head's slice, which autograd sums with the others
            sizes = enumerate(zip(prod.shape, total.shape))
            a = next(i for i, (m, n) in sizes if m != n)
            total.narrow(a, 0, 1).add_(prod.sum(a, keepdim=True))
        else:  # only q (x) reads the tables at positions
            total.index_add_(0, pos.reshape(-1), prod.reshape(-1, r).to(table.dtype))
    return total


def _run(x, cos, sin, pos, layout, r, out):
    """The kernel through autograd, or straight into ``out`` (no autograd)."""
    if out is None:
        return _Rotate.apply(x, None, cos, sin, pos, layout, r, None)
    in_place = out.data_ptr() == x.data_ptr() and out.stride() == x.stride()
    if not in_place and _overlaps(out, x):
        raise ValueError(
            "out overlaps x without being x itself: pass out=x or a separate buffer"
        )
    if torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    ):
        raise ValueError(
            "out= does not support autograd: call without out to differentiate"
        )
    _launch(out, x, cos, sin, pos, layout, r, False)
    return out


def apply_rotary(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half_split",
    rotary_dim: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """RoPE in one Triton launch: ``x·cos + rot(x)·sin`` on ``rotary_dim`` channels.

    Same semantics as :func:`ropelab.apply_rotary` (eq. ``rot-apply``): the
    channels past ``rotary_dim`` are copied unchanged; ``out`` may be ``x``
    (in place) or any buffer that does not overlap it.

    Args:
        x: ``(..., seq, dim)``, 2 to 4 axes, float32/64, bfloat16 or float16,
            any strides. ``(batch, heads, seq, dim)``, ``(batch, seq, heads,
            dim)`` and packed ``(tokens, heads, dim)`` all work: the position
            axis is wherever the tables vary.
        cos, sin: tables that broadcast against ``x[..., :rotary_dim]``, e.g.
            ``(seq, rotary_dim)``, ``(batch, seq, rotary_dim)`` or
            ``(seq, 1, rotary_dim)`` for ``(batch, seq, heads, dim)``; laid
            out for ``layout``, as :func:`ropelab.cos_sin` builds them.
        layout: ``"half_split"`` or ``"interleaved"``.
        rotary_dim: the even number of leading channels to rotate (default all).
        out: optional result buffer of x's shape, dtype and device.

    Returns:
        ``out`` (or a new tensor) of x's shape and dtype; differentiable in
        x, cos and sin.
    """
    r = _check(x, layout, rotary_dim, out)
    cos, sin = _tables(x, cos, sin, r)
    return _run(x, cos, sin, None, layout, r, out)


def _check_positions(
    x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, r: int
) -> Tensor:
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor) or t.dim() != 2 or t.shape[1] != r:
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a (n_positions, {r}) table, got {got}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if (
        not isinstance(positions, Tensor)
        or positions.dtype.is_floating_point
        or positions.dtype.is_complex
        or positions.dtype == torch.bool
    ):
        got = (
            positions.dtype
            if isinstance(positions, Tensor)
            else type(positions).__name__
        )
        raise TypeError(f"positions must be an integer tensor, got {got}")
    if positions.device != x.device:
        raise ValueError(f"positions are on {positions.device} but x is on {x.device}")
    try:
        pos = positions.expand(x.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast against "
            f"x's token axes {tuple(x.shape[:-1])}"
        ) from None
    if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= cos.shape[0]):
        raise ValueError(
            f"positions must lie in [0, {cos.shape[0]}), the rows of the tables"
        )
    return pos


def apply_rotary_at(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    positions: Tensor,
    *,
    layout: str = "half_split",
    rotary_dim: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """RoPE with tables read at per-token positions, in one launch (14_triton_kernel).

    For decoding with offsets, left padding (positions from
    :func:`ropelab.positions_from_mask`) and packed or variable-length
    batches (positions from :func:`ropelab.packed_positions` of
    ``cu_seqlens``): token ``t`` of x is rotated by row ``positions[t]`` of
    the tables, which are built once, up to the longest position.

    Args:
        x: ``(..., seq, dim)`` as in :func:`apply_rotary`; for a varlen
            batch ``(total_tokens, heads, dim)``.
        cos, sin: ``(n_positions, rotary_dim)`` tables, e.g. from
            :func:`ropelab.cos_sin` of ``arange(n_positions)``.
        positions: integer positions that broadcast against x's token axes
            ``x.shape[:-1]``: ``(seq,)`` or ``(batch, 1, seq)`` for
            ``(batch, heads, seq, dim)``, ``(total_tokens, 1)`` for
            ``(total_tokens, heads, dim)``; each in ``[0, n_positions)``.

    Returns:
        x rotated, as :func:`apply_rotary` with ``cos[positions]`` and
        ``sin[positions]`` would.
    """
    r = _check(x, layout, rotary_dim, out)
    pos = _check_positions(x, cos, sin, positions, r)
    return _run(x, cos, sin, pos, layout, r, out)


def apply_rotary_qk(
    q: Tensor,
    k: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half_split",
    rotary_dim: int | None = None,
) -> tuple[Tensor, Tensor]:
    """q and k rotated by the same tables in one launch, which reads cos and sin once.

    Args:
        q: ``(..., seq, dim)`` queries, 2 to 4 axes.
        k: keys of q's shape except for the number of heads (grouped-query
            attention), in the same axis order.
        cos, sin: tables shared by every head, as in :func:`apply_rotary`.

    Returns:
        (q rotated, k rotated), new tensors; differentiable.
    """
    r = _check(q, layout, rotary_dim, None)
    _check(k, layout, rotary_dim, None)
    if (
        k.dtype != q.dtype
        or k.device != q.device
        or k.dim() != q.dim()
        or k.shape[-1] != q.shape[-1]
        or (k.shape != q.shape and _qk_axis(q, k) is None)
    ):
        raise ValueError(
            f"k must be like q except for its number of heads: q {tuple(q.shape)} "
            f"{q.dtype}, "
            f"k {tuple(k.shape)} {k.dtype}"
        )
    cos_q, sin_q = _tables(q, cos, sin, r)
    return _Rotate.apply(q, k, cos_q, sin_q, None, layout, r, None)


def rotate_into(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> bool:
    """The dispatch's hook: rotate x into out; False if the kernel does not apply.

    It applies to CUDA tensors of a supported dtype with 2 to 4 axes and
    full-width tables that broadcast against x, as :func:`ropelab.apply_rotary`
    passes them. No autograd: the caller handles it.
    """
    if not (
        x.is_cuda and x.dtype in _DTYPES and 2 <= x.dim() <= 4 and x.shape[-1] % 2 == 0
    ):
        return False
    r = x.shape[-1]
    try:
        cos, sin = _tables(x, cos, sin, r)
    except ValueError:
        return False
    _launch(out, x, cos, sin, None, layout, r, False)
    return True


def requested_bytes(
    x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half_split"
) -> dict:
    """Bytes the kernel's loads and stores request, per tensor, counted as it runs.

    Runs the kernel in Triton's interpreter on CPU copies of the inputs (on
    any machine, GPU or not) with its load and store operations wrapped, and
    adds up the bytes of every element a load or store touches (masked-off
    lanes excluded). These are the bytes the program *asks* for; on a GPU a
    repeated load of the same row (the partner load) is served by the cache,
    so DRAM traffic can be lower.

    Returns:
        ``{"x": …, "cos": …, "sin": …, "out": …}`` in bytes (ints).
    """
    from triton.runtime import interpreter as interp

    x = x.detach().cpu()
    r = _check(x, layout, None, None)
    cos, sin = _tables(x, cos.detach().cpu(), sin.detach().cpu(), r)
    out = torch.empty_like(x)
    spans = {
        name: (t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes())
        for name, t in (("x", x), ("cos", cos), ("sin", sin), ("out", out))
    }
    counts = dict.fromkeys(spans, 0)

    def tally(ptrs, mask):
        size = ptrs.get_element_ty().primitive_bitwidth // 8
        addr = ptrs.data[mask.data]
        for name, (lo, hi) in spans.items():
            counts[name] += int(((addr >= lo) & (addr < hi)).sum()) * size

    builder = interp.interpreter_builder
    load, store = builder.create_masked_load, builder.create_masked_store

    def counted_load(ptrs, mask, other, *args):
        tally(ptrs, mask)
        return load(ptrs, mask, other, *args)

    def counted_store(ptrs, value, mask, *args):
        tally(ptrs, mask)
        return store(ptrs, value, mask, *args)

    # Interpreted twins of the kernel and of the jit functions it calls, so the
    # count runs the same program whether or not TRITON_INTERPRET is set.
    module = globals()
    helpers = {name: module[name] for name in ("_rotate_heads", "_round_bf16")}

    def twin(f):
        if isinstance(f, interp.InterpretedFunction):
            return f
        return interp.InterpretedFunction(f.fn)

    builder.create_masked_load = counted_load
    builder.create_masked_store = counted_store
    module.update({name: twin(f) for name, f in helpers.items()})
    try:
        _launch(out, x, cos, sin, None, layout, r, False, kernel=twin(_rotary_kernel))
    finally:
        builder.create_masked_load, builder.create_masked_store = load, store
        module.update(helpers)
    return counts
