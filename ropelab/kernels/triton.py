"""RoPE on the GPU in one Triton kernel: ``x·cos + rot(x)·sin`` (14_triton_kernel).

:func:`apply_rotary` is :func:`ropelab.apply_rotary` with this kernel first
(the same checks, errors and aliasing rules: it goes through the same
dispatch); :func:`apply_rotary_at` reads the tables at per-token positions
(offsets, left padding, packed and variable-length batches via
:func:`ropelab.packed_positions`); :func:`apply_rotary_qk` rotates q and k in
one launch. Every entry point is differentiable: the backward pass of a
rotation is the rotation by −θ, the same kernel with the sine table's pairs
swapped and negated (−sin for tables whose pairs share an angle).

One program handles a block of ``BLOCK_R`` rows (tokens) of one "outer"
index and loops over the axis the tables broadcast along (the heads), so
cos and sin are read once for all heads. Row blocks and outer indices share
grid axis 0 (up to 2^31 − 1 programs); groups of heads are axis 1. Each
element of x is loaded once: half-split pairs as the two halves of a row,
interleaved pairs as one contiguous row split into its even and odd channels
in registers (``tl.reshape`` + ``tl.split``, and ``tl.join`` to store), so
every load and store is a contiguous vector. Arithmetic is float32 (float64
for float64 inputs) without fused multiply-adds; a 16-bit result is rounded
once, to nearest even, on the store.

The host side works out a call's grid and arguments once per signature
(shapes, strides, dtypes, layout) and keeps them; after the first launch it
calls the compiled kernel's launcher directly with the data pointers (where
the pointers are 16-byte aligned as they were then, no launch hook is set
and the tensors are on the current device; else Triton's own launch).

On a machine without a GPU, Triton's interpreter runs the same kernel on CPU
tensors when ``TRITON_INTERPRET=1`` is set before this module is imported.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

import triton
import triton.language as tl

from .._checks import check_apply, check_keys, check_layout, check_out, check_out_grad
from .._checks import check_positions, check_rotary_dim, check_triton_x, check_x
from . import torch_path

__all__ = [
    "apply_rotary",
    "apply_rotary_at",
    "apply_rotary_qk",
    "available",
    "plan",
    "requested_bytes",
]

NAME = "triton"
_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
_TILE = 4096  # elements of x in one block of rows: x, the tables and y in registers


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


@triton.jit
def _store(PTR, y, mask, BF16: tl.constexpr):
    """Store y, rounded once to the pointer's type."""
    if BF16:
        y = _round_bf16(y)
    tl.store(PTR, y.to(PTR.dtype.element_ty), mask=mask)


# fmt: off
@triton.jit
def _load_pairs(PTR, base, sd, ok, rot_dim, other,
                INTERLEAVED: tl.constexpr, BLOCK_R: tl.constexpr,
                BLOCK_H: tl.constexpr):
    """Both entries (a, b) of every pair of BLOCK_R rows, each (BLOCK_R, BLOCK_H).

    Interleaved: one contiguous load of the row's first 2·BLOCK_H channels,
    split into even and odd channels in registers. Half-split: the two halves.
    """
    if INTERLEAVED:
        d = tl.arange(0, 2 * BLOCK_H)
        m = ok[:, None] & (d < rot_dim)[None, :]
        v = tl.load(PTR + base[:, None] + d[None, :] * sd, mask=m, other=other)
        a, b = tl.split(tl.reshape(v, (BLOCK_R, BLOCK_H, 2)))
    else:
        j = tl.arange(0, BLOCK_H)
        m = ok[:, None] & (j < rot_dim // 2)[None, :]
        first = PTR + base[:, None] + j[None, :] * sd
        a = tl.load(first, mask=m, other=other)
        b = tl.load(first + (rot_dim // 2) * sd, mask=m, other=other)
    return a, b


@triton.jit
def _store_pairs(PTR, base, sd, ok, rot_dim, ya, yb, INTERLEAVED: tl.constexpr,
                 BF16: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    """Store the pairs (ya, yb) where :func:`_load_pairs` reads them."""
    if INTERLEAVED:
        d = tl.arange(0, 2 * BLOCK_H)
        m = ok[:, None] & (d < rot_dim)[None, :]
        y = tl.reshape(tl.join(ya, yb), (BLOCK_R, 2 * BLOCK_H))
        _store(PTR + base[:, None] + d[None, :] * sd, y, m, BF16)
    else:
        j = tl.arange(0, BLOCK_H)
        m = ok[:, None] & (j < rot_dim // 2)[None, :]
        first = PTR + base[:, None] + j[None, :] * sd
        _store(first, ya, m, BF16)
        _store(first + (rot_dim // 2) * sd, yb, m, BF16)


@triton.jit
def _load_tables(COS, SIN, POS, o, h, rows, in_row, n_pos, rot_dim,
                 sc_o, sc_l, sc_r, sc_d, ss_o, ss_l, ss_r, ss_d, sp_o, sp_l, sp_r,
                 INTERLEAVED: tl.constexpr, HAS_POS: tl.constexpr, WIDE64: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):
    """cos and sin of every pair of the rows, in the compute type: (ca, cb, sa, sb).

    With positions, row t reads table row POS[t]; a position outside
    [0, n_pos) reads NaN (no host check: that would need a synchronisation).
    """
    if HAS_POS:
        pos = tl.load(POS + o * sp_o + h * sp_l + rows * sp_r, mask=in_row, other=0)
        pos = pos.to(tl.int64)
        ok = in_row & (pos >= 0) & (pos < n_pos)
        c_base = pos * sc_r
        s_base = pos * ss_r
    else:
        ok = in_row
        c_base = o * sc_o + h * sc_l + rows * sc_r
        s_base = o * ss_o + h * ss_l + rows * ss_r
    nan = float("nan")
    ca, cb = _load_pairs(COS, c_base, sc_d, ok, rot_dim, nan, INTERLEAVED, BLOCK_R,
                         BLOCK_H)
    sa, sb = _load_pairs(SIN, s_base, ss_d, ok, rot_dim, nan, INTERLEAVED, BLOCK_R,
                         BLOCK_H)
    if WIDE64:  # (one return: Triton compiles a single exit)
        ca, cb = ca.to(tl.float64), cb.to(tl.float64)
        sa, sb = sa.to(tl.float64), sb.to(tl.float64)
    else:
        ca, cb = ca.to(tl.float32), cb.to(tl.float32)
        sa, sb = sa.to(tl.float32), sb.to(tl.float32)
    return ca, cb, sa, sb


@triton.jit
def _rotate_rows(X, OUT, o, h, rows, in_row, rot_dim, dim, ca, cb, sa, sb,
                 sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d,
                 INTERLEAVED: tl.constexpr, BF16: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr):
    """Rotate the rows of head h: (a, b) -> (a·ca − b·sa, b·cb + a·sb); copy the
    tail."""
    xb = o * sx_o + h * sx_l + rows * sx_r
    ob = o * so_o + h * so_l + rows * so_r
    xa, xp = _load_pairs(X, xb, sx_d, in_row, rot_dim, 0.0, INTERLEAVED, BLOCK_R,
                         BLOCK_H)
    xa = xa.to(ca.dtype)
    xp = xp.to(ca.dtype)
    ya = xa * ca - xp * sa  # x·cos + rot(x)·sin, pair by pair, every table entry
    yb = xp * cb + xa * sb
    _store_pairs(OUT, ob, so_d, in_row, rot_dim, ya, yb, INTERLEAVED, BF16, BLOCK_R,
                 BLOCK_H)
    if BLOCK_T > 0:  # the channels past rot_dim: copied
        t = rot_dim + tl.arange(0, BLOCK_T)
        m = in_row[:, None] & (t < dim)[None, :]
        v = tl.load(X + xb[:, None] + t[None, :] * sx_d, mask=m)
        tl.store(OUT + ob[:, None] + t[None, :] * so_d, v, mask=m)


@triton.jit
def _rotary_kernel(
    X, COS, SIN, OUT, POS, X2, OUT2,
    n_blocks, n_loop, n_loop2, per_prog, per_prog2, n_rows, n_pos, rot_dim, dim,
    sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d,  # x, out: outer, loop, row, channel
    sc_o, sc_l, sc_r, sc_d, ss_o, ss_l, ss_r, ss_d,  # cos, sin (row: the table row)
    sp_o, sp_l, sp_r,  # positions
    sy_o, sy_l, sy_r, sy_d, sz_o, sz_l, sz_r, sz_d,  # x2 (the keys), out2
    INTERLEAVED: tl.constexpr, HAS_POS: tl.constexpr, HAS_X2: tl.constexpr,
    TABLES_PER_HEAD: tl.constexpr, WIDE64: tl.constexpr, BF16: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr,
):
    """A block of BLOCK_R rows of outer index o, for a group of the looped axis.

    Program axis 0 is (outer index, block of rows), axis 1 the group of the
    looped axis (the heads): ``per_prog`` of them, from ``program_id(1) *
    per_prog``. The tables are read once for the group unless they vary along
    the looped axis too (TABLES_PER_HEAD); then x2 (the keys, HAS_X2) too.
    """
    pid = tl.program_id(0)
    o = (pid // n_blocks).to(tl.int64)
    rows = (pid % n_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)
    in_row = rows < n_rows
    rows = rows.to(tl.int64)
    zero = o * 0  # int64: head * stride cannot overflow int32
    group = tl.program_id(1)
    first = group * per_prog
    if not TABLES_PER_HEAD:
        ca, cb, sa, sb = _load_tables(
            COS, SIN, POS, o, zero, rows, in_row, n_pos, rot_dim,
            sc_o, sc_l, sc_r, sc_d, ss_o, ss_l, ss_r, ss_d, sp_o, sp_l, sp_r,
            INTERLEAVED, HAS_POS, WIDE64, BLOCK_R, BLOCK_H)
    for head in range(first, tl.minimum(first + per_prog, n_loop)):
        h = zero + head
        if TABLES_PER_HEAD:
            ca, cb, sa, sb = _load_tables(
                COS, SIN, POS, o, h, rows, in_row, n_pos, rot_dim,
                sc_o, sc_l, sc_r, sc_d, ss_o, ss_l, ss_r, ss_d, sp_o, sp_l, sp_r,
                INTERLEAVED, HAS_POS, WIDE64, BLOCK_R, BLOCK_H)
        _rotate_rows(X, OUT, o, h, rows, in_row, rot_dim, dim, ca, cb, sa, sb,
                     sx_o, sx_l, sx_r, sx_d, so_o, so_l, so_r, so_d,
                     INTERLEAVED, BF16, BLOCK_R, BLOCK_H, BLOCK_T)
    if HAS_X2:  # the keys, with the same tables (never per head)
        first2 = group * per_prog2
        for head in range(first2, tl.minimum(first2 + per_prog2, n_loop2)):
            h = zero + head
            _rotate_rows(X2, OUT2, o, h, rows, in_row, rot_dim, dim, ca, cb, sa, sb,
                         sy_o, sy_l, sy_r, sy_d, sz_o, sz_l, sz_r, sz_d,
                         INTERLEAVED, BF16, BLOCK_R, BLOCK_H, BLOCK_T)
# fmt: on


def available() -> bool:
    """True when Triton can run the kernel: on a CUDA GPU or with TRITON_INTERPRET=1."""
    return _INTERPRET or torch.cuda.is_available()


# The plan of a launch: worked out once per signature ---------------------------------

_CONSTEXPRS = ("INTERLEAVED", "HAS_POS", "HAS_X2", "TABLES_PER_HEAD", "WIDE64", "BF16",
               "BLOCK_R", "BLOCK_H", "BLOCK_T")
_SMS: dict[int, int] = {}  # CUDA device index -> multiprocessors


class _Plan:
    """One signature's launch: grid, integer arguments, constants, and after the first
    launch the compiled kernel whose launcher later calls use directly."""

    __slots__ = ("grid", "ints", "consts", "values", "device", "compiled")

    def __init__(self, grid, ints, consts, device) -> None:
        self.grid, self.ints, self.consts, self.device = grid, ints, consts, device
        self.values = tuple(consts[name] for name in _CONSTEXPRS)
        self.compiled: Any = None


def _pad4(shape, strides) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Sizes and strides with leading axes of size 1 (stride 0) added up to 4 axes."""
    n = 4 - len(shape)
    return (1,) * n + tuple(shape), (0,) * n + tuple(strides)


def _lead_strides(t_shape, t_strides, x_shape3) -> tuple[int, int, int]:
    """The strides of a tensor broadcast against x's three leading axes (after
    padding): 0 where it has size 1 or lacks the axis."""
    n = len(t_shape)
    out = []
    for a in range(3):
        i = a - (3 - n)  # the tensor's axis aligned with x's axis a (right-aligned)
        out.append(0 if i < 0 or t_shape[i] == 1 else t_strides[i])
    return tuple(out)  # type: ignore[return-value]


def _make_plan(out, x, cos, sin, pos, layout, r, k=None, out_k=None) -> _Plan | None:
    """The launch for these shapes and strides, or None (more than 4 axes)."""
    if x.ndim > 4 or x.ndim < 1:
        return None
    shape4, sx = _pad4(x.shape, x.stride())
    _, so = _pad4(out.shape, out.stride())
    lead = shape4[:3]
    dim = shape4[3]
    if pos is None:
        sc = _lead_strides(cos.shape[:-1], cos.stride()[:-1], lead) + (cos.stride(-1),)
        ss = _lead_strides(sin.shape[:-1], sin.stride()[:-1], lead) + (sin.stride(-1),)
        sp = (0, 0, 0)
        varies = [sc[a] != 0 or ss[a] != 0 for a in range(3)]
        n_pos = 0
    else:  # tables (n_pos, r) read at positions broadcast against x's token axes
        sp = _lead_strides(pos.shape, pos.stride(), lead)
        sc = (0, 0, cos.stride(0), cos.stride(1))
        ss = (0, 0, sin.stride(0), sin.stride(1))
        varies = [sp[a] != 0 for a in range(3)]
        n_pos = cos.shape[0]
    varies = [v and lead[a] > 1 for a, v in enumerate(varies)]
    shared = [a for a in range(3) if not varies[a]]
    if k is not None:  # the keys differ from q along one axis: the heads, looped
        k4 = _pad4(k.shape, k.stride())[0]
        diff = [a for a in range(3) if k4[a] != lead[a]]
        shared = [a for a in shared if a in diff] if diff else shared
        if not shared:
            return None
    per_head = not shared
    if per_head:  # the tables vary along every axis: loop over the shortest
        loop = min(range(3), key=lambda a: lead[a])
    else:
        loop = max(shared, key=lambda a: lead[a])
    outer, rows_axis = sorted((a for a in range(3) if a != loop), key=lambda a: lead[a])
    perm = (outer, loop, rows_axis)
    n_outer, n_loop, n_rows = (lead[a] for a in perm)
    half = triton.next_power_of_2(max(1, r // 2))
    tail = dim - r
    block_t = triton.next_power_of_2(tail) if tail > 0 else 0
    rows_pow2 = triton.next_power_of_2(max(1, n_rows))
    block_r = max(1, min(rows_pow2, _TILE // (2 * half), 64))
    n_blocks = triton.cdiv(n_rows, block_r)
    programs = n_outer * n_blocks
    if programs >= 2**31:
        return None
    if pos is None:
        stc = (sc[outer], sc[loop], sc[rows_axis], sc[3])
        sts = (ss[outer], ss[loop], ss[rows_axis], ss[3])
        stp = (0, 0, 0)
    else:
        stc, sts = (0, 0, sc[2], sc[3]), (0, 0, ss[2], ss[3])
        stp = (sp[outer], sp[loop], sp[rows_axis])
    order = (*perm, 3)
    stx = tuple(sx[a] for a in order)
    sto = tuple(so[a] for a in order)
    if k is not None:
        k_shape4, sk = _pad4(k.shape, k.stride())
        _, sok = _pad4(out_k.shape, out_k.stride())
        n_loop2 = k_shape4[loop]
        sty, stz = tuple(sk[a] for a in order), tuple(sok[a] for a in order)
    else:
        n_loop2, sty, stz = 0, (0,) * 4, (0,) * 4
    groups = _head_groups(x.device, programs, max(n_loop, n_loop2))
    per_prog, per_prog2 = triton.cdiv(n_loop, groups), triton.cdiv(n_loop2, groups)
    ints = (n_blocks, n_loop, n_loop2, per_prog, per_prog2, n_rows, n_pos, r, dim,
            *stx, *sto, *stc, *sts, *stp, *sty, *stz)
    consts = dict(
        INTERLEAVED=layout == "interleaved", HAS_POS=pos is not None,
        HAS_X2=k is not None, TABLES_PER_HEAD=per_head,
        WIDE64=x.dtype == torch.float64, BF16=x.dtype == torch.bfloat16,
        BLOCK_R=block_r, BLOCK_H=half, BLOCK_T=block_t,
    )
    return _Plan((programs, groups, 1), ints, consts, x.device)


def _head_groups(device: torch.device, programs: int, heads: int) -> int:
    """How many groups to split the heads into: enough programs to fill a GPU.

    Each group re-reads the tables, so heads are grouped only when the other
    grid axis gives fewer than about four programs per multiprocessor (a
    decoding step, a short sequence). On the CPU (Triton's interpreter,
    which runs programs one after another) there is one group.
    """
    if device.type != "cuda" or heads <= 1:
        return 1
    index = device.index if device.index is not None else torch.cuda.current_device()
    sms = _SMS.get(index)
    if sms is None:
        sms = torch.cuda.get_device_properties(index).multi_processor_count
        _SMS[index] = sms
    return max(1, min(heads, triton.cdiv(4 * sms, programs)))


# The launch -------------------------------------------------------------------------


def _hooks_empty() -> bool:
    """Whether no launch hook is set (a profiler sets them): the direct launch skips
    them, so it is used only then."""
    knobs = getattr(triton, "knobs", None)
    if knobs is None:
        return False
    for hook in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


def _launchable(compiled: Any) -> bool:
    """Whether ``compiled`` (what Triton's launch returned) has the launcher this module
    calls directly: Triton 3.x's ``CompiledKernel``."""
    return all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata"))


def _launch(plan: _Plan, tensors: tuple, kernel: Any = None) -> None:
    """Launch the kernel on ``tensors`` = (x, cos, sin, out, pos, x2, out2).

    After a first launch through Triton (which compiles, and whose result is
    kept), a call on the current CUDA device, with no launch hook and every
    pointer 16-byte aligned (as Triton assumed when it compiled the kernel for
    the first call's aligned pointers), goes straight to the compiled kernel's
    launcher: the data pointers, the kept integers and constants, the current
    stream. Everything else takes Triton's own launch.
    """
    compiled = plan.compiled
    if compiled is not None and kernel is None:
        ptrs = [t.data_ptr() for t in tensors]
        aligned = not (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[4] | ptrs[5]
                       | ptrs[6]) & 15
        index = plan.device.index
        if aligned and index == torch.cuda.current_device() and _hooks_empty():
            g0, g1, g2 = plan.grid
            stream = torch._C._cuda_getCurrentRawStream(index)
            compiled.run(g0, g1, g2, stream, compiled.function,
                         compiled.packed_metadata, None, None, None, *ptrs, *plan.ints,
                         *plan.values)
            return
    _triton_launch(plan, tensors, kernel)


def _triton_launch(plan: _Plan, tensors: tuple, kernel: Any = None) -> None:
    """Triton's own launch (it compiles on first use); keeps the compiled kernel for
    :func:`_launch` when the pointers are aligned and the direct launch applies."""
    device = plan.device
    cuda = device.type == "cuda"
    guard = torch.cuda.device(device) if cuda else contextlib.nullcontext()
    with guard:
        compiled = (kernel or _rotary_kernel)[plan.grid](
            *tensors, *plan.ints, **plan.consts,
            enable_fp_fusion=False,  # no fused multiply-add: the formula's roundings
        )
    if (kernel is None and cuda and plan.compiled is None
            and _launchable(compiled) and _DIRECT
            and not any(t.data_ptr() & 15 for t in tensors)):
        plan.compiled = compiled


# ROPELAB_TRITON_DIRECT=0 keeps every launch on Triton's own path (for comparison).
_DIRECT = os.environ.get("ROPELAB_TRITON_DIRECT", "1") != "0"


# The backend contract (ropelab.kernels) ---------------------------------------------

_PLAIN = (Tensor, torch.nn.Parameter)
_plans: dict[tuple, _Plan | None] = {}


def _key(out, x, cos, sin, layout, r, *extra) -> tuple:
    return (x.device, x.dtype, out.dtype, cos.dtype, sin.dtype, x.shape, x.stride(),
            out.stride(), cos.shape, cos.stride(), sin.shape, sin.stride(), layout, r,
            *extra)  # fmt: skip


def _cached_plan(key: tuple, build: Callable[[], _Plan | None]) -> _Plan | None:
    found = _plans.get(key, False)
    if found is False:
        found = build()
        if len(_plans) >= 256:
            _plans.clear()
        _plans[key] = found
    return found


def plan(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int
) -> Callable[[Tensor, Tensor, Tensor, Tensor], bool] | None:
    """The backend contract of :mod:`ropelab.kernels`: a runner for calls of this
    signature, or None where the kernel does not take them.

    It takes CUDA tensors (any CPU tensor under ``TRITON_INTERPRET=1``) of
    float32, float64, bfloat16 or float16 with 1 to 4 axes, any strides, in
    place too (each program reads a row's pairs before writing them).
    """
    for t in (out, x, cos, sin):
        if type(t) not in _PLAIN or t.is_neg() or t._is_zerotensor():
            return None
    if not (x.is_cuda or _INTERPRET) or x.dtype not in _DTYPES:
        return None
    found = _cached_plan(_key(out, x, cos, sin, layout, rotary_dim),
                         lambda: _make_plan(out, x, cos, sin, None, layout, rotary_dim))
    if found is None:
        return None

    def runner(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor) -> bool:
        _launch(found, (x, cos, sin, out, x, x, out))
        return True

    return runner


# The entry points -------------------------------------------------------------------


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

    :func:`ropelab.apply_rotary` with this kernel in front of the others, for
    CPU tensors too when Triton's interpreter is on: the same checks (the
    same exceptions), the same aliasing rules (``out`` may be ``x`` itself,
    in place, or memory that shares no byte with x, cos and sin), the same
    reading of the tables (every entry, element by element), the same
    autograd. A call the kernel does not take (more than four axes) takes the
    torch path, as there.

    Args:
        x: ``(..., seq, dim)``, float32/64, bfloat16 or float16, any strides.
            ``(batch, heads, seq, dim)``, ``(batch, seq, heads, dim)`` and packed
            ``(tokens, heads, dim)`` all work: the position axis is wherever
            the tables vary.
        cos, sin: tables that broadcast against ``x[..., :rotary_dim]``, e.g.
            ``(seq, rotary_dim)``, ``(batch, 1, seq, rotary_dim)`` or
            ``(seq, 1, rotary_dim)`` for ``(batch, seq, heads, dim)``; laid
            out for ``layout``, as :func:`ropelab.cos_sin` builds them.
        layout: ``"half_split"`` or ``"interleaved"``.
        rotary_dim: the even number of leading channels to rotate (default all).
        out: optional result buffer of x's shape, dtype and device.

    Returns:
        ``out`` (or a new tensor) of x's shape and dtype; differentiable in
        x, cos and sin.
    """
    from . import apply

    x, layout, r, out = check_apply(x, cos, sin, layout, rotary_dim, out)
    return apply(x, cos, sin, layout, r, out, first=sys.modules[__name__])


class _Rotate(torch.autograd.Function):
    """y = x·cos + rot(x)·sin with positions or keys; the backward pass rotates by −θ
    (the same kernel with the sine table's pairs swapped and negated)."""

    @staticmethod
    def forward(ctx, x, k, cos, sin, pos, layout, r):
        out = torch.empty_like(x)
        out_k = None if k is None else torch.empty_like(k)
        _run(out, x, cos, sin, pos, layout, r, k, out_k)
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
            sin_back = torch_path.backward_sin(sin, ctx.layout)
            gx = torch.empty_like(grad)
            if grad_k is not None:
                gk = torch.empty_like(grad_k)
            _run(gx, grad, cos, sin_back, pos, ctx.layout, ctx.r, grad_k, gk)
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            pairs = [(grad, x)] + ([(grad_k, k)] if grad_k is not None else [])
            if ctx.needs_input_grad[2]:
                gc = _table_grad(pairs, cos, pos, ctx.r, None)
            if ctx.needs_input_grad[3]:
                gs = _table_grad(pairs, sin, pos, ctx.r, ctx.layout)
        return gx, gk, gc, gs, None, None, None


def _run(out, x, cos, sin, pos, layout, r, k=None, out_k=None) -> None:
    """One launch for positions or keys (planned once per signature)."""
    extra = (None if pos is None else (pos.shape, pos.stride(), pos.dtype),
             None if k is None else (k.shape, k.stride(), out_k.stride()))
    found = _cached_plan(
        _key(out, x, cos, sin, layout, r, *extra),
        lambda: _make_plan(out, x, cos, sin, pos, layout, r, k, out_k))
    if found is None:  # unreachable past _checks; kept as a guard
        raise ValueError(
            f"x {tuple(x.shape)}: the Triton kernel takes at most 4 axes and fewer "
            "than 2**31 row blocks")
    _launch(found, (x, cos, sin, out, x if pos is None else pos,
                    x if k is None else k, out if out_k is None else out_k))


def _table_grad(pairs, table: Tensor, pos: Tensor | None, r: int, layout: str | None):
    """Σ g·x (cos, layout None) or Σ g·rot(x) (sin) over the rows reading an entry.

    Without positions the table was broadcast, so the sum runs over the
    broadcast axes; with positions, token t read row ``pos[t]``, so its
    share is added to that row.
    """
    total = torch.zeros(table.shape, dtype=table.dtype, device=table.device)
    for g, x in pairs:
        xr = x[..., :r]
        if layout is not None:
            xr = torch_path.turn(xr, layout)
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
    the tables, which are built once, up to the longest position. The tables
    are cast to x's dtype first, as :func:`apply_rotary` does. Positions are
    not checked against the tables' length on the host (that would read them:
    a synchronisation, which a CUDA graph cannot hold): the rotated channels
    of a token whose position lies outside ``[0, n_positions)`` come out NaN.

    Args:
        x: ``(..., seq, dim)`` as in :func:`apply_rotary`; for a varlen
            batch ``(total_tokens, heads, dim)``.
        cos, sin: ``(n_positions, rotary_dim)`` tables, e.g. from
            :func:`ropelab.cos_sin` of ``arange(n_positions)``.
        positions: integer positions that broadcast against x's token axes
            ``x.shape[:-1]``: ``(seq,)`` or ``(batch, 1, seq)`` for
            ``(batch, heads, seq, dim)``, ``(total_tokens, 1)`` for
            ``(total_tokens, heads, dim)``.
        out: as in :func:`apply_rotary` (x itself, or disjoint memory).

    Returns:
        x rotated, as :func:`apply_rotary` with ``cos[positions]`` and
        ``sin[positions]`` would.
    """
    x = check_x(x)
    layout = check_layout(layout)
    r = check_rotary_dim(rotary_dim, x)
    pos = check_positions(x, cos, sin, positions, r)
    check_triton_x(x, _DTYPES, _INTERPRET)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if out is None:
        if torch.is_grad_enabled() and (
            x.requires_grad or cos.requires_grad or sin.requires_grad
        ):
            return _Rotate.apply(x, None, cos, sin, pos, layout, r)
        out = torch.empty_like(x)
    else:
        out = check_out(out, x, cos, sin)
        check_out_grad(out, x, cos, sin)
    _run(out, x, cos, sin, pos, layout, r)
    return out


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
    q, layout, r, _ = check_apply(q, cos, sin, layout, rotary_dim, None)
    check_triton_x(q, _DTYPES, _INTERPRET)
    k = check_keys(q, k, cos, sin)
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)
    shape = (*q.shape[:-1], r)
    return _Rotate.apply(q, k, cos.expand(shape), sin.expand(shape), None, layout, r)


def requested_bytes(
    x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half_split"
) -> dict:
    """Bytes the kernel's loads and stores request, per tensor, counted as it runs.

    Runs the kernel in Triton's interpreter on CPU copies of the inputs (on
    any machine, GPU or not) with its load and store operations wrapped, and
    adds up the bytes of every element a load or store touches (masked-off
    lanes excluded). These are the bytes the program *asks* for: each element
    of x and of the result once, each table row once for all the heads.

    Returns:
        ``{"x": …, "cos": …, "sin": …, "out": …}`` in bytes (ints).
    """
    from triton.runtime import interpreter as interp

    x = check_x(x.detach().cpu())
    layout = check_layout(layout)
    cos, sin = cos.detach().cpu().to(x.dtype), sin.detach().cpu().to(x.dtype)
    r = x.shape[-1]
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
    helpers = {name: f for name, f in module.items() if name != "_rotary_kernel"
               and hasattr(f, "fn") and hasattr(f, "arg_names")}

    def twin(f):
        if isinstance(f, interp.InterpretedFunction):
            return f
        return interp.InterpretedFunction(f.fn)

    plan_ = _make_plan(out, x, cos, sin, None, layout, r)
    plan_ = _Plan((plan_.grid[0], 1, 1), plan_.ints, plan_.consts, torch.device("cpu"))
    builder.create_masked_load = counted_load
    builder.create_masked_store = counted_store
    module.update({name: twin(f) for name, f in helpers.items()})
    try:
        _triton_launch(plan_, (x, cos, sin, out, x, x, out),
                       kernel=twin(_rotary_kernel))
    finally:
        builder.create_masked_load, builder.create_masked_store = load, store
        module.update(helpers)
    return counts
