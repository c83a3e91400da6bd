"""Applying RoPE with cos/sin tables, in both pair layouts (chapters 02 and 03).

Two layouts pair the d channels of a head differently:

* ``"half_split"``: channel i is paired with i + d/2 (transformers' LLaMA,
  GPT-NeoX). Rotation is ``x·cos + rotate_half(x)·sin`` (03_pairing, eq. ``halfsplit``).
* ``"interleaved"``: channel 2i is paired with 2i+1 (RoFormer, Meta's LLaMA,
  GPT-J). Rotation is ``x·cos + rotate_interleaved(x)·sin`` with cos and sin
  repeated element-wise (03_pairing, eq. ``interleaved``).

Both rotate pair j by the angle m·θ_j (02_complex_rotation, eq. ``rot2x2``).
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

try:
    from torch._C._functorch import is_functorch_wrapped_tensor as _is_functorch_wrapped
except ImportError:  # older torch: no torch.func wrappers to see
    def _is_functorch_wrapped(t: Tensor) -> bool:
        return False

from . import _native
from ._checks import PositionsLike, check_float_tensor, check_layout, check_x
from .frequencies import angles

__all__ = ["cos_sin", "cos_sin_from_angles", "rotate_half", "rotate_interleaved", "apply_rotary", "kernel_status"]


def cos_sin(
    positions: PositionsLike,
    inv_freq: Tensor,
    *,
    layout: str = "half_split",
    attention_scaling: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos(m·θ) and sin(m·θ) laid out channel by channel for ``layout`` (05_cache_and_decoding).

    Angles are computed in ``inv_freq``'s dtype (float32 or wider) by
    :func:`ropelab.angles` and laid out by :func:`ropelab.rotary.cos_sin_from_angles`, as in
    transformers.

    Args:
        positions: integer positions ``(..., seq)``.
        inv_freq: ``(dim // 2,)`` frequencies.

    Returns:
        ``(cos, sin)``, each ``(..., seq, dim)`` in ``dtype``.
    """
    layout = check_layout(layout)
    return cos_sin_from_angles(angles(positions, inv_freq), layout=layout, attention_scaling=attention_scaling,
                               dtype=dtype)


def cos_sin_from_angles(
    pair_angles: Tensor,
    *,
    layout: str = "half_split",
    attention_scaling: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin of a table of pair angles, laid out channel by channel for ``layout``.

    Half-split: ``cat(a, a)``, so channel i and i + d/2 share angle a_i.
    Interleaved: ``repeat_interleave(a, 2)``, so channels 2i and 2i+1 share
    a_i. cos and sin are taken in the angles' dtype, multiplied by
    ``attention_scaling`` (YaRN's temperature; 1 otherwise) and only then
    cast to ``dtype``. Used by :func:`ropelab.cos_sin` and for angles that are not
    m·θ_j of one position (2D and multimodal RoPE, 10_multi_axis).

    Args:
        pair_angles: ``(..., seq, dim // 2)``, float32 or float64.

    Returns:
        ``(cos, sin)``, each ``(..., seq, dim)`` in ``dtype``.
    """
    layout = check_layout(layout)
    if not isinstance(pair_angles, Tensor) or pair_angles.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            "pair_angles must be a float32 or float64 tensor, got "
            f"{pair_angles.dtype if isinstance(pair_angles, Tensor) else type(pair_angles).__name__}"
        )
    if pair_angles.ndim < 1 or pair_angles.shape[-1] == 0:
        raise ValueError(f"pair_angles must have shape (..., dim//2), got {tuple(pair_angles.shape)}")
    a = pair_angles
    a = torch.cat((a, a), dim=-1) if layout == "half_split" else a.repeat_interleave(2, dim=-1)
    cos, sin = a.cos(), a.sin()
    if attention_scaling != 1.0:
        cos, sin = cos * attention_scaling, sin * attention_scaling
    return cos.to(dtype), sin.to(dtype)


def rotate_half(x: Tensor) -> Tensor:
    """``cat(-x2, x1)`` where x1, x2 are the two halves of the last axis (03_pairing, eq. ``rotatehalf``).

    For the half-split pairs (x_i, x_{i+d/2}) this is the 90° rotation
    (a, b) -> (-b, a) of every pair at once.

    Shapes: ``(..., dim)`` -> ``(..., dim)``.
    """
    x = check_float_tensor(x, "x")
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(f"x's last axis must be even, got shape {tuple(x.shape)}")
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x: Tensor) -> Tensor:
    """The 90° rotation of every interleaved pair: (x_{2i}, x_{2i+1}) -> (-x_{2i+1}, x_{2i}).

    The interleaved twin of :func:`~ropelab.rotate_half` (03_pairing, eq. ``rotateinterleaved``).

    Shapes: ``(..., dim)`` -> ``(..., dim)``.
    """
    x = check_float_tensor(x, "x")
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(f"x's last axis must be even, got shape {tuple(x.shape)}")
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """True when ``shape`` broadcasts to exactly ``target`` (cheaper than torch.broadcast_shapes)."""
    if len(shape) > len(target):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(target)))


def _check_tables(x: Tensor, cos: Tensor, sin: Tensor, rotary_dim: int) -> None:
    target = tuple(x.shape[:-1]) + (rotary_dim,)
    for name, t in (("cos", cos), ("sin", sin)):
        check_float_tensor(t, name)
        if t.ndim < 2 or t.shape[-2] != x.shape[-2] or t.shape[-1] != rotary_dim:
            raise ValueError(
                f"{name} must have shape (..., seq, rotary_dim) = (..., {x.shape[-2]}, {rotary_dim}) "
                f"to match x of shape {tuple(x.shape)}, got {tuple(t.shape)}"
            )
        if not _broadcasts_to(tuple(t.shape), target):
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} does not broadcast to x of shape {tuple(x.shape)}; "
                "for per-row positions (batch, seq) with x (batch, heads, seq, dim), pass cos[:, None]"
            )
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")


def _check_out(out: object, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"out must match x: shape {tuple(x.shape)}, {x.dtype} on {x.device}; "
            f"got shape {tuple(out.shape)}, {out.dtype} on {out.device}"
        )
    if out.numel():
        storage = out.untyped_storage().data_ptr()
        if storage == x.untyped_storage().data_ptr():
            raise ValueError("out must not share memory with x: each output pair needs both inputs of its pair")
        if storage in (cos.untyped_storage().data_ptr(), sin.untyped_storage().data_ptr()):
            raise ValueError("out must not share memory with cos or sin: the tables are read while out is written")
    return out


def _transformed(*tensors: Tensor) -> bool:
    """Whether a forward-mode AD level is active or torch.func (vmap, grad, jvp) wraps one of ``tensors``."""
    if getattr(_forward_ad, "_current_level", -1) >= 0:
        return True
    return any(_is_functorch_wrapped(t) for t in tensors)


def _complex_view_ok(t: Tensor) -> bool:
    """Whether ``t``'s last axis can be viewed as complex pairs without a copy."""
    return t.stride(-1) == 1 and t.storage_offset() % 2 == 0 and all(st % 2 == 0 for st in t.stride()[:-1])


def kernel_status() -> dict[str, object]:
    """Whether :func:`~ropelab.apply_rotary` uses ropelab's fused CPU kernel here, and why not if it does not (09_performance).

    Builds the kernel on the first call if it has not been built (about a
    second with a C compiler; cached per machine). Returns a dict:
    ``available`` (bool), ``reason`` (``"compiled"``, ``"loaded from cache"``
    or why it is unavailable, e.g. no C compiler), ``compile_s`` (seconds the
    compile took in this process, or None), ``path`` (the shared library),
    ``dtypes`` (the dtypes it handles) and ``openmp`` (whether it splits rows
    between threads). Where it is unavailable, and on a GPU, apply_rotary
    takes its torch path.
    """
    return _native.status()


def _rotate_into(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, *, native: bool = True) -> None:
    """out = x·cos + rot(x)·sin without the temporaries of the plain formula (09_performance).

    The plain formula makes four full-size temporaries (x·cos, rot(x), its
    product with sin, and the sum). On the CPU this is one pass of ropelab's
    fused C kernel (:mod:`ropelab._native`): each output is the plain formula
    term by term: bit-identical to it in float32 and float64, and in
    bfloat16 and float16 the float32 formula with its result rounded to the
    16-bit type.

    Elsewhere (a GPU, no C compiler, ``native=False``, or while torch traces
    the call) it is the torch path. Interleaved pairs are one complex
    multiplication by the phasor table: a single pass over a float32/float64
    x, and for bfloat16/float16 (torch has no complex type for them) an
    upcast into a float32 scratch block, an in-place multiplication and one
    rounding back, block by block on the CPU. Half-split pairs take one
    multiplication that writes x·cos into ``out`` and two fused multiply-adds
    that add ∓x_partner·sin into its two halves in place; on the CPU a large
    x goes through in blocks of rows that stay in cache between those three
    steps.
    """
    if native and _native.rotate(out, x, cos, sin, layout):
        return
    h = x.shape[-1] // 2
    if layout == "interleaved" and _complex_view_ok(x) and _complex_view_ok(out):
        wide_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        phasor = torch.complex(cos[..., 0::2].to(wide_dtype), sin[..., 0::2].to(wide_dtype))
        if x.dtype in (torch.float32, torch.float64):
            torch.mul(torch.view_as_complex(x.unflatten(-1, (h, 2))), phasor,
                      out=torch.view_as_complex(out.unflatten(-1, (h, 2))))
            return
        blocks = _cpu_blocks(out, x, phasor)
        if blocks is None:
            wide = x.float()  # upcast: the 16-bit dtypes have no complex type
            torch.view_as_complex(wide.unflatten(-1, (h, 2))).mul_(phasor)
            out.copy_(wide)  # one rounding back
            return
        scratch = torch.empty(blocks[0][1].numel(), dtype=torch.float32, device=x.device)
        for o, xb, p in blocks:
            wide = scratch[: xb.numel()].view(xb.shape)
            wide.copy_(xb)
            torch.view_as_complex(wide.unflatten(-1, (h, 2))).mul_(p)
            o.copy_(wide)
        return
    blocks = _cpu_blocks(out, x, cos, sin)
    for o, xb, c, sn in blocks if blocks is not None else [(out, x, cos, sin)]:
        _mul_fma(o, xb, c, sn, layout, h)


# Half a block of x and of its result (each of the two threads takes half) fit in one core's L2 (1 MiB on
# common x86 parts), so the fused multiply-adds re-read them from cache, not DRAM.
_BLOCK_BYTES = 1 << 20


def _mul_fma(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, h: int) -> None:
    torch.mul(x, cos, out=out)
    if layout == "half_split":
        first, second = slice(0, h), slice(h, 2 * h)
    else:
        first, second = slice(0, None, 2), slice(1, None, 2)
    out[..., first].addcmul_(x[..., second], sin[..., first], value=-1)
    out[..., second].addcmul_(x[..., first], sin[..., second])


def _cpu_blocks(out: Tensor, x: Tensor, *tables: Tensor) -> list[tuple[Tensor, ...]] | None:
    """Split a large contiguous CPU problem into cache-sized blocks of rows, or None to do it in one go.

    Returns ``(out_block, x_block, *table_blocks)`` tuples; each table is
    ``(..., seq, width)``, broadcast over x's leading axes.
    """
    if x.device.type != "cpu" or x.ndim < 3 or not (x.is_contiguous() and out.is_contiguous()):
        return None
    seq, dim = x.shape[-2], x.shape[-1]
    if x.numel() * x.element_size() <= 2 * _BLOCK_BYTES:
        return None
    lead = tuple(x.shape[:-2])
    try:  # the tables as (rows of x's leading axes, seq, width) views; a copy would defeat the purpose
        views = [t.expand(*lead, seq, t.shape[-1]).view(-1, seq, t.shape[-1]) for t in tables]
    except RuntimeError:
        return None
    xs, outs = x.view(-1, seq, dim), out.view(-1, seq, dim)
    rows = max(1, _BLOCK_BYTES // (dim * x.element_size()))
    if rows >= seq:
        g = rows // seq
        return [(outs[i:i + g], xs[i:i + g], *(v[i:i + g] for v in views)) for i in range(0, xs.shape[0], g)]
    return [
        (outs[i, s:s + rows], xs[i, s:s + rows], *(v[i, s:s + rows] for v in views))
        for i in range(xs.shape[0])
        for s in range(0, seq, rows)
    ]


def apply_rotary(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half_split",
    rotary_dim: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Rotate every channel pair of ``x`` by its angle: ``x·cos + rot(x)·sin`` (03_pairing, eq. ``halfsplit``).

    ``rot`` is :func:`rotate_half` for ``"half_split"`` and
    :func:`~ropelab.rotary.rotate_interleaved` for ``"interleaved"``; ``cos``/``sin`` must be
    laid out for the same ``layout`` (see :func:`cos_sin`). The tables are
    cast to ``x``'s dtype first, as transformers does, so the result has
    ``x``'s dtype and device. ``x`` is not modified.

    The result is computed without the plain formula's temporaries, so it
    moves about the bytes of a copy (09_performance). On the CPU a fused C
    kernel, compiled once per machine on first use, makes one pass and is
    bit-identical to the plain formula in float32 and float64 (in bfloat16
    and float16 it computes the formula in float32 and rounds the result to
    the 16-bit type). On a GPU, without
    a C compiler, or while torch traces the call (``torch.compile``,
    dispatch modes), torch operations do it, within one rounding of each
    output of the plain formula; their interleaved path is one complex
    multiplication, which assumes the two entries of each pair in ``cos``
    and ``sin`` are equal, as :func:`cos_sin` builds them.

    With ``rotary_dim`` < dim only the first ``rotary_dim`` channels are
    rotated and the rest pass through (partial rotary, GPT-NeoX and Phi).

    Args:
        x: ``(..., seq, dim)``, e.g. ``(batch, heads, seq, dim)``.
        cos, sin: ``(..., seq, rotary_dim)``, broadcastable to ``x``.
        layout: ``"half_split"`` or ``"interleaved"``.
        rotary_dim: even number of leading channels to rotate (default: all).
        out: optional preallocated result of ``x``'s shape, dtype and device,
            not overlapping ``x`` (decoding loops reuse one buffer).

    Returns:
        Tensor of ``x``'s shape, dtype and device (``out`` when given).
    """
    x = check_x(x)
    layout = check_layout(layout)
    dim = x.shape[-1]
    if rotary_dim is None:
        rotary_dim = dim
    elif isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(f"rotary_dim must be an int, got {type(rotary_dim).__name__}")
    elif not (0 < rotary_dim <= dim and rotary_dim % 2 == 0):
        raise ValueError(f"rotary_dim must be even and in (0, {dim}] for x of shape {tuple(x.shape)}, got {rotary_dim}")
    _check_tables(x, cos, sin, rotary_dim)
    grad = torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    if grad or _transformed(x, cos, sin):
        # out= kernels record no gradients and a foreign kernel is opaque to torch.func (vmap, jvp) and
        # forward-mode AD: take the plain formula, whose operations autograd and the transforms carry
        # through (training through q, k, or learnable frequencies as in RoPE-Mixed, 10_multi_axis).
        if out is not None and grad:
            raise ValueError("out= cannot be used when x, cos or sin require grad (autograd does not track out=)")
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        rot = rotate_half if layout == "half_split" else rotate_interleaved
        head = x[..., :rotary_dim]
        rotated = head * cos + rot(head) * sin
        result = rotated if rotary_dim == dim else torch.cat((rotated, x[..., rotary_dim:]), dim=-1)
        return result if out is None else _check_out(out, x, cos, sin).copy_(result)
    out = torch.empty_like(x, memory_format=torch.contiguous_format) if out is None else _check_out(out, x, cos, sin)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if rotary_dim == dim:
        _rotate_into(out, x, cos, sin, layout)
    else:
        _rotate_into(out[..., :rotary_dim], x[..., :rotary_dim], cos, sin, layout)
        out[..., rotary_dim:] = x[..., rotary_dim:]
    return out
