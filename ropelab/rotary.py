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

from .kernels import kernel_status, rotate_into
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
        rotate_into(out, x, cos, sin, layout)
    else:
        rotate_into(out[..., :rotary_dim], x[..., :rotary_dim], cos, sin, layout)
        out[..., rotary_dim:] = x[..., rotary_dim:]
    return out
