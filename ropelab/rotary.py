"""Applying RoPE with cos/sin tables, in both pair layouts (chapters 02, 03 and 05).

Two layouts pair the d channels of a head differently:

* ``"half_split"``: channel i is paired with i + d/2 (transformers' LLaMA,
  GPT-NeoX): ``x·cos + rotate_half(x)·sin`` (03_pairing, eq. ``halfsplit``).
* ``"interleaved"``: channel 2i is paired with 2i+1 (RoFormer, Meta's LLaMA,
  GPT-J): ``x·cos + rotate_interleaved(x)·sin`` with cos and sin repeated
  element-wise (03_pairing, eq. ``interleaved``).

Both rotate pair j by the angle m·θ_j (02_complex_rotation, eq. ``rot2x2``).
:func:`rotate` is that formula, written once in Python: the reference that
the fast paths in :mod:`ropelab.kernels` are tested against.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import kernels
from ._checks import (
    PositionsLike,
    check_apply,
    check_float_tensor,
    check_layout,
    check_number,
    check_table_dtype,
)
from .frequencies import angles
from .kernels import kernel_status  # noqa: F401  (former home of ropelab.kernel_status)

__all__ = ["cos_sin", "cos_sin_from_angles", "rotate_half", "rotate_interleaved",
           "rotate", "apply_rotary"]


def cos_sin(
    positions: PositionsLike,
    inv_freq: Tensor,
    *,
    layout: str = "half_split",
    attention_scaling: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos(m·θ) and sin(m·θ), channel by channel for ``layout`` (05_cache_and_decoding).

    The angles :func:`ropelab.angles` computes in ``inv_freq``'s dtype
    (float32 or wider), laid out by :func:`~ropelab.rotary.cos_sin_from_angles`.

    Shapes: positions ``(..., seq)``, inv_freq ``(dim // 2,)`` ->
    ``(cos, sin)``, each ``(..., seq, dim)`` in ``dtype``.

    Raises:
        TypeError: positions not integers; inv_freq not a dense float32/float64
            tensor; ``dtype`` not a floating-point dtype (an integer dtype
            would round the tables to 0); ``attention_scaling`` not a number.
        ValueError: a negative position; inv_freq not 1-D, empty, or (on the
            CPU) not finite; positions on the meta device with a real inv_freq
            (others are moved to inv_freq's device); ``attention_scaling`` not
            finite and > 0; an unknown ``layout``. No positions give empty
            tables.
    """
    return cos_sin_from_angles(angles(positions, inv_freq), layout=check_layout(layout),
                               attention_scaling=attention_scaling, dtype=dtype)


def cos_sin_from_angles(
    pair_angles: Tensor,
    *,
    layout: str = "half_split",
    attention_scaling: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin of a table of pair angles, channel by channel for ``layout``.

    Half-split: ``cat(a, a)`` (channels i and i + d/2 share a_i); interleaved:
    ``repeat_interleave(a, 2)`` (channels 2i and 2i+1 share a_i). cos and sin
    are taken in the angles' dtype, multiplied by ``attention_scaling``
    (YaRN's temperature) and only then cast to ``dtype``. Also for angles
    that are not m·θ_j of one position (10_multi_axis).

    Shapes: ``(..., seq, dim // 2)`` float32/float64 -> each ``(..., seq, dim)``.
    Raises as :func:`ropelab.cos_sin` does for ``layout``, ``attention_scaling`` and
    ``dtype``.
    """
    layout = check_layout(layout)
    dtype = check_table_dtype(dtype)
    attention_scaling = check_number(attention_scaling, "attention_scaling",
                                     minimum=0.0, above=True)
    if not isinstance(pair_angles, Tensor) or pair_angles.dtype not in (torch.float32,
                                                                         torch.float64):
        got = getattr(pair_angles, "dtype", type(pair_angles).__name__)
        raise TypeError(f"pair_angles must be a float32 or float64 tensor, got {got}")
    if pair_angles.ndim < 1 or pair_angles.shape[-1] == 0:
        raise ValueError(f"pair_angles must have shape (..., dim//2), "
                         f"got {tuple(pair_angles.shape)}")
    a = pair_angles
    a = torch.cat((a, a), -1) if layout == "half_split" else a.repeat_interleave(2, -1)
    cos, sin = a.cos(), a.sin()
    if attention_scaling != 1.0:
        cos, sin = cos * attention_scaling, sin * attention_scaling
    return cos.to(dtype), sin.to(dtype)


def _check_even(x: object) -> Tensor:
    x = check_float_tensor(x, "x")
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(f"x's last axis must be even, got shape {tuple(x.shape)}")
    if not x.shape[-1]:
        raise ValueError(f"x's last axis must be positive, got shape {tuple(x.shape)}")
    return x


def rotate_half(x: Tensor) -> Tensor:
    """``cat(-x2, x1)`` for the halves x1, x2 of x (03_pairing, eq. ``rotatehalf``).

    The 90° turn (a, b) -> (-b, a) of every half-split pair (x_i, x_{i+d/2}).
    Shapes: ``(..., dim)`` -> ``(..., dim)``. Raises ``TypeError`` for an x that
    is not a dense real floating tensor, ``ValueError`` for a last axis that is
    missing, odd or empty.
    """
    x1, x2 = _check_even(x).chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x: Tensor) -> Tensor:
    """The 90° turn of every interleaved pair: (x_2i, x_2i+1) -> (-x_2i+1, x_2i).

    The twin of :func:`rotate_half` (03_pairing, eq. ``rotateinterleaved``).
    Shapes: ``(..., dim)`` -> ``(..., dim)``. Raises as :func:`rotate_half`.
    """
    pairs = _check_even(x).unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half_split") -> Tensor:
    """The plain formula ``x·cos + rot(x)·sin`` (03_pairing, eq. ``halfsplit``).

    The reference every fast path is tested against, and what autograd,
    forward-mode AD and torch.func differentiate. No checks: the public
    entry is :func:`~ropelab.apply_rotary`. Shapes: x ``(..., dim)``; cos, sin
    broadcast to it.
    """
    rot = rotate_half if layout == "half_split" else rotate_interleaved
    return x * cos + rot(x) * sin


def apply_rotary(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str = "half_split",
    rotary_dim: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """Rotate each channel pair of ``x`` by its angle: ``x·cos + rot(x)·sin``.

    ``rot`` (03_pairing) is :func:`rotate_half` (``"half_split"``) or
    :func:`rotate_interleaved` (``"interleaved"``), and the tables are laid
    out for the same ``layout`` (:func:`cos_sin`). They are cast to ``x``'s
    dtype first, as transformers does; the result has ``x``'s dtype and
    device, and ``x`` is not modified. With ``rotary_dim`` < dim only the
    first ``rotary_dim`` channels turn; the rest pass through (partial
    rotary: GPT-NeoX, Phi).

    The tables broadcast against ``x`` with the position axis where the
    caller keeps it (05_cache_and_decoding), as transformers'
    ``apply_rotary_pos_emb`` does with ``unsqueeze_dim``:

    ================================  =========================================
    x                                 cos, sin
    ================================  =========================================
    (batch, heads, seq, dim)          (seq, dim) or (batch, 1, seq, dim)
    (batch, seq, heads, dim)          (seq, 1, dim) or (batch, seq, 1, dim)
    (tokens, heads, dim), packed      (tokens, 1, dim)
    ================================  =========================================

    One dispatch (``ropelab.kernels``) computes it without the plain
    formula's temporaries (09_performance): the fused C kernel on the CPU, the
    Triton kernel on a CUDA GPU where Triton imports (14_triton_kernel), and
    elsewhere the torch path. Every backend reads every table entry where the
    plain formula reads it, so interleaved tables whose two entries in a pair
    differ (half-split tables passed with ``layout="interleaved"``, say) give
    the plain formula's result everywhere: a table is data, and telling equal
    pairs from unequal ones would mean reading it, a device synchronisation
    on a GPU. The kernels compute in float32 (float64 for float64 inputs) and
    round once: bit-identical to :func:`~ropelab.rotary.rotate` in float32 and
    float64, its float32 result rounded once in bfloat16 and float16; the
    torch path is within one rounding. Under autograd the backward pass takes
    the same kernels (the rotation by −θ); under forward-mode AD or
    torch.func it is the plain formula, which they see through; under
    ``torch.compile`` it is one operator, ``torch.ops.ropelab.rotary``. A call
    like one already checked (the same types, devices, shapes, strides,
    dtypes and arguments) goes straight to its kernel, after the checks a
    signature cannot settle. No step reads a tensor's values, so a decoding
    step can be captured in a CUDA graph.

    Args:
        x: ``(..., dim)``. cos, sin: ``(..., rotary_dim)``, as above.
        layout: ``"half_split"`` or ``"interleaved"``.
        rotary_dim: even number of leading channels to rotate (default: all).
        out: a preallocated result (x's shape, dtype, device) that shares no
            memory with ``cos`` or ``sin``, and none with ``x`` unless it is
            ``x`` itself (in place): decoding loops reuse one.

    Returns:
        Tensor of ``x``'s shape, dtype and device (``out`` when given). Empty
        batches and sequences give empty results; NaN in ``x`` or the tables is
        data and passes through.

    Raises:
        TypeError: x, cos, sin or out not a dense real floating tensor (x may
            not be complex or sparse); ``rotary_dim`` not an int.
        ValueError: x without a ``(seq, dim)`` pair of axes, or with an odd or
            empty ``dim``; cos, sin or out on another device than x; tables
            whose last axis is not ``rotary_dim``, that do not broadcast to x, or
            whose shapes differ; an unknown ``layout``; ``rotary_dim`` odd or
            outside (0, dim]; out not of x's shape and dtype, overlapping x (other
            than in place) or the tables, broadcast, or used under autograd.
    """
    done = kernels._replay(x, cos, sin, layout, rotary_dim, out)
    if done is not None:  # a call like one already checked (a decoding loop's)
        return done
    x, layout, rotary_dim, out = check_apply(x, cos, sin, layout, rotary_dim, out)
    return kernels.apply(x, cos, sin, layout, rotary_dim, out)
