"""How precisely m·θ_j survives in each floating-point format (chapter 08_numerics).

A format with p significand bits (counting the implicit leading bit) rounds a
real x to fl(x) with |fl(x) − x| ≤ 2^-p·|x| (eq. ``num-bound``): p = 8 for
bfloat16, 11 for float16, 24 for float32, 53 for float64. An angle computed
"in dtype X" rounds three times, the position m, the frequency θ_j and their
product, so |ã − mθ_j| ≤ ((1 + u)^3 − 1)·mθ_j with u = 2^-p (eq.
``num-anglebound``): the error grows linearly with the position, and cos,
being 1-Lipschitz, inherits it (eq. ``num-cosbound``).

The functions here measure that error and its effect on attention. They
compute in the dtype they are asked for on the device of their inputs; the
book runs them on the CPU, since the point is the format, not the device.
Unlike the rest of ropelab they accept float positions and narrow ``inv_freq``
on purpose: reproducing those mistakes is what they are for.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import frequencies  # frequencies.inv_freq: the name inv_freq is a parameter here
from ._checks import check_base, check_dim, check_float_tensor
from .rotary import apply_rotary

__all__ = [
    "SIGNIFICAND_BITS",
    "significand_bits",
    "unit_roundoff",
    "log_positions",
    "angles_in",
    "exact_cos_sin",
    "cos_error",
    "cos_error_bound",
    "attention_logits",
    "attention_errors",
]

F64 = torch.float64

#: significand bits p of each floating dtype, the implicit leading bit included
SIGNIFICAND_BITS: dict[torch.dtype, int] = {
    torch.bfloat16: 8,
    torch.float16: 11,
    torch.float32: 24,
    torch.float64: 53,
}


def significand_bits(dtype: torch.dtype) -> int:
    """The number p of significand bits of ``dtype`` (implicit bit included): 8, 11, 24
    or 53.

    Every integer of magnitude ≤ 2^p is representable in the format; 2^p + 1
    is the first that is not.

    Raises:
        TypeError: ``dtype`` is not one of bfloat16, float16, float32, float64.
    """
    if dtype not in SIGNIFICAND_BITS:
        raise TypeError(f"dtype must be one of {list(SIGNIFICAND_BITS)}, got {dtype}")
    return SIGNIFICAND_BITS[dtype]


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = 2^-p, the largest relative error of one rounding to nearest in ``dtype``
    (08_numerics, eq. ``num-bound``)."""
    return 2.0 ** -significand_bits(dtype)


def log_positions(n: int = 200, max_position: int = 1_000_000) -> Tensor:
    """About ``n`` log-spaced integer positions from 1 to ``max_position``, without
    repeats.

    ``round(logspace(0, log10(max_position), n))`` with duplicates removed (the
    small positions repeat after rounding), so there are at most ``n``.

    Returns:
        int64 tensor ``(≤ n,)``, increasing, starting at 1 and ending at
        ``max_position``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2, got {n!r}")
    if (
        isinstance(max_position, bool)
        or not isinstance(max_position, int)
        or max_position < 1
    ):
        raise ValueError(f"max_position must be a positive int, got {max_position!r}")
    grid = torch.logspace(0.0, math.log10(max_position), n, dtype=F64).round().long()
    grid[-1] = max_position
    return torch.unique(grid)


def angles_in(positions: Tensor, inv_freq: Tensor, dtype: torch.dtype) -> Tensor:
    """The angles m·θ_j computed entirely in ``dtype``: fl(fl(m)·fl(θ_j))
    (08_numerics, eq. ``num-anglebound``).

    Positions and frequencies are cast to ``dtype`` (each cast rounds once)
    and multiplied there (the product rounds once more). This is what a model
    computes when its positions or frequencies live in a narrow dtype.

    Args:
        positions: ``(..., seq)``, integer or float (a float tensor is taken as
            it is: its values may already have been rounded).
        inv_freq: ``(dim // 2,)`` frequencies of any floating dtype.
        dtype: the dtype of the computation.

    Returns:
        Tensor ``(..., seq, dim // 2)`` in ``dtype``.
    """
    if not isinstance(positions, Tensor):
        raise TypeError(
            f"positions must be a torch.Tensor, got {type(positions).__name__}"
        )
    inv_freq = check_float_tensor(inv_freq, "inv_freq")
    if inv_freq.ndim != 1:
        raise ValueError(
            f"inv_freq must be 1-D (dim//2,), got shape {tuple(inv_freq.shape)}"
        )
    significand_bits(dtype)
    return positions.to(dtype).unsqueeze(-1) * inv_freq.to(dtype)


def exact_cos_sin(
    positions: Tensor,
    dim: int,
    base: float,
    *,
    inv_freq: Tensor | None = None,
    digits: int = 40,
) -> tuple[Tensor, Tensor]:
    """cos and sin of the exact angles m·θ_j, rounded once to float64 (08_numerics).

    The reference that float64 cannot be for itself: the angles are computed
    with ``digits`` significant decimal digits (mpmath, which ships with
    torch's dependency sympy), so a float64 angle's own error shows when it
    is compared with this. With ``inv_freq=None`` θ_j is the real number
    b^(-2j/d); with a float tensor θ_j is the exact value of each of its
    elements (e.g. the float32 frequencies a checkpoint was trained with).
    It costs about 10 µs per entry: use it on a few hundred positions.

    Args:
        positions: integer positions ``(n,)``, ≥ 0.
        dim: head dimension d.
        base: frequency base b.
        inv_freq: ``(dim // 2,)`` frequencies taken exactly, or None for the real θ_j.
        digits: working precision in decimal digits.

    Returns:
        ``(cos, sin)``, float64 ``(n, dim // 2)`` on the CPU.
    """
    return _exact(positions, dim, base, inv_freq, digits, with_sin=True)


def _exact(positions, dim, base, inv_freq, digits, *, with_sin):  # noqa: ANN001, ANN202
    """Compute :func:`exact_cos_sin`; with ``with_sin=False`` the sine is skipped
    (returned as None)."""
    import mpmath

    positions = _check_positions(positions)
    dim, base = check_dim(dim), check_base(base)
    if inv_freq is not None:
        inv_freq = check_float_tensor(inv_freq, "inv_freq")
        if inv_freq.shape != (dim // 2,):
            raise ValueError(
                f"inv_freq must have shape ({dim // 2},), got {tuple(inv_freq.shape)}"
            )
    ctx = mpmath.mp.clone()
    ctx.dps = digits
    if inv_freq is None:
        thetas = [
            ctx.power(ctx.mpf(base), ctx.mpf(-2 * j) / dim) for j in range(dim // 2)
        ]
    else:  # a binary float converts to mpf exactly
        thetas = [ctx.mpf(t) for t in inv_freq.double().cpu().tolist()]
    cos_rows, sin_rows = [], []
    for m in positions.cpu().tolist():
        angles = [m * t for t in thetas]
        cos_rows.append([float(ctx.cos(a)) for a in angles])
        if with_sin:
            sin_rows.append([float(ctx.sin(a)) for a in angles])
    shape = (len(cos_rows), dim // 2)
    cos = torch.tensor(cos_rows, dtype=F64).reshape(shape)
    return cos, (torch.tensor(sin_rows, dtype=F64).reshape(shape) if with_sin else None)


def _reference(positions: Tensor, dim: int, base: float) -> tuple[Tensor, Tensor]:
    theta = frequencies.inv_freq(dim, base, dtype=F64).to(positions.device)
    return theta, positions.to(F64).unsqueeze(-1) * theta


def _check_positions(positions: object) -> Tensor:
    if not isinstance(positions, Tensor) or positions.ndim != 1:
        raise ValueError(
            "positions must be a 1-D tensor, got "
            f"{getattr(positions, 'shape', type(positions).__name__)}"
        )
    if (
        positions.is_floating_point()
        or positions.is_complex()
        or positions.dtype == torch.bool
    ):
        raise TypeError(f"positions must have an integer dtype, got {positions.dtype}")
    if positions.numel() and bool((positions < 0).any()):
        raise ValueError("positions must be >= 0")
    return positions


def cos_error(
    positions: Tensor,
    dim: int,
    base: float,
    angle_dtype: torch.dtype,
    *,
    cos_dtype: torch.dtype = F64,
    exact: bool = False,
) -> Tensor:
    """``max_j |cos(ã_j) − cos(m·θ_j)|`` for each position m, ã in ``angle_dtype``
    (08_numerics).

    θ_j is computed in float64 and cast to ``angle_dtype``, the positions are
    cast to ``angle_dtype`` and the product is taken there
    (:func:`ropelab.numerics.angles_in`). The cosine of that angle is taken in float64
    and rounded to ``cos_dtype``. With ``cos_dtype=torch.float64`` (the default) the
    result is the angle's representation error seen through cos; with
    ``cos_dtype=angle_dtype`` the cosine is rounded to the narrow dtype too,
    as a model's would be. That models a correctly rounded cosine in
    ``cos_dtype``, so the numbers do not depend on the machine's cos
    implementation (a real one may be an ulp further off). The reference is
    cos(m·θ_j) with everything in float64, fast but blind to float64's own
    error (``angle_dtype=torch.float64`` gives 0); with ``exact=True`` it is
    :func:`exact_cos_sin` (real θ_j, exact product), which shows it.

    A float16 position above 65,504 overflows to inf and its cos is NaN: the
    result is NaN there.

    Args:
        positions: integer positions ``(n,)``, ≥ 0.
        dim: head dimension d (all d/2 pairs are measured).
        base: frequency base b.
        angle_dtype, cos_dtype: bfloat16, float16, float32 or float64.

    Returns:
        float64 tensor ``(n,)`` on ``positions``' device.
    """
    positions = _check_positions(positions)
    dim, base = check_dim(dim), check_base(base)
    significand_bits(angle_dtype)
    significand_bits(cos_dtype)
    theta, reference = _reference(positions, dim, base)
    a = angles_in(positions, theta, angle_dtype)
    c = a.to(F64).cos().to(cos_dtype)
    ref_cos = (
        _exact(positions, dim, base, None, 40, with_sin=False)[0].to(positions.device)
        if exact
        else reference.cos()
    )
    return (c.to(F64) - ref_cos).abs().amax(-1)


def cos_error_bound(
    positions: Tensor,
    dim: int,
    base: float,
    angle_dtype: torch.dtype,
    *,
    cos_dtype: torch.dtype = F64,
) -> Tensor:
    """The bound on :func:`cos_error`: min(2, γ₃·m·max_j θ_j) + u_cos
    (08_numerics, eq. ``num-cosbound``).

    γ₃ = (1 + u)^3 − 1 for u = 2^-p of ``angle_dtype`` covers the three
    roundings of fl(fl(m)·fl(θ_j)) (eq. ``num-anglebound``); cos is
    1-Lipschitz, so it passes the angle error on unchanged at worst, and a
    difference of two cosines never exceeds 2. Rounding the cosine to
    ``cos_dtype`` adds u_cos (|cos| ≤ 1), and 2^-52 covers the float64
    cosines' own errors. max_j θ_j = θ_0 = 1.

    Positions that overflow ``angle_dtype`` (float16 above 65,504) get NaN: no
    bound holds for an infinite angle.

    Returns:
        float64 tensor ``(n,)``.
    """
    positions = _check_positions(positions)
    dim, base = check_dim(dim), check_base(base)
    u = unit_roundoff(angle_dtype)
    gamma3 = (
        3 * u + 3 * u * u + u**3
    )  # (1 + u)^3 - 1, written so that it does not round to 0 for u = 2^-53
    theta_max = float(frequencies.inv_freq(dim, base, dtype=F64).max())
    m = positions.to(F64)
    bound = (
        (gamma3 * m * theta_max).clamp(max=2.0) + unit_roundoff(cos_dtype) + 2.0**-52
    )
    overflow = torch.isinf(positions.to(angle_dtype).to(F64))
    return bound.masked_fill(overflow, math.nan)


def attention_logits(
    q: Tensor,
    k: Tensor,
    positions: Tensor,
    inv_freq: Tensor,
    angle_dtype: torch.dtype,
    *,
    cos_dtype: torch.dtype = F64,
) -> Tensor:
    """Scores q_m·k_n/√d after half-split RoPE whose angles were computed in
    ``angle_dtype`` (08_numerics).

    The angles are :func:`angles_in` ``(positions, inv_freq, angle_dtype)``;
    cos and sin are taken in ``cos_dtype``; everything after that (the
    rotation and the dot products) is float64, so the scores differ from a
    float64 reference only through the angles (and the tables' rounding).
    Pass the positions and ``inv_freq`` exactly as the code under study has
    them, e.g. a bfloat16 ``arange`` or a bfloat16 buffer.

    Args:
        q, k: ``(..., seq, dim)`` queries and keys (cast to float64).
        positions: ``(seq,)`` positions of both, integer or float.
        inv_freq: ``(dim // 2,)`` frequencies, any floating dtype.
        angle_dtype, cos_dtype: the dtypes of the angle and of cos/sin.

    Returns:
        float64 tensor ``(..., seq, seq)``: row m, column n is q_m·k_n/√d.
    """
    q, k = check_float_tensor(q, "q"), check_float_tensor(k, "k")
    if q.ndim < 2 or q.shape != k.shape:
        raise ValueError(
            f"q and k must have one shape (..., seq, dim), got {tuple(q.shape)} and "
            f"{tuple(k.shape)}"
        )
    seq, dim = q.shape[-2:]
    if not isinstance(positions, Tensor) or positions.shape != (seq,):
        raise ValueError(
            f"positions must be a tensor of shape ({seq},), got "
            f"{getattr(positions, 'shape', positions)}"
        )
    if inv_freq.shape != (dim // 2,):
        raise ValueError(
            f"inv_freq must have shape ({dim // 2},) for head dim {dim}, got "
            f"{tuple(inv_freq.shape)}"
        )
    significand_bits(cos_dtype)
    a = angles_in(positions, inv_freq, angle_dtype).to(cos_dtype)
    a = torch.cat((a, a), dim=-1)
    cos, sin = a.cos().to(F64), a.sin().to(F64)
    qr = apply_rotary(q.to(F64), cos, sin)
    kr = apply_rotary(k.to(F64), cos, sin)
    return qr @ kr.transpose(-1, -2) / math.sqrt(dim)


def attention_errors(logits: Tensor, reference: Tensor) -> tuple[float, float]:
    """(max |Δ logit|, max total-variation distance of the softmax rows) against
    ``reference`` (08_numerics, eq. ``num-tv``).

    The total-variation distance of two attention rows p and p' is
    ½·Σ_n |p_n − p'_n|, between 0 (identical) and 1 (disjoint): the largest
    share of attention that moves. Computed in float64; a NaN anywhere gives
    NaN.

    Args:
        logits, reference: score tensors ``(..., seq_q, seq_k)`` of one shape.
    """
    if logits.shape != reference.shape:
        raise ValueError(
            f"logits and reference must have one shape, got {tuple(logits.shape)} and "
            f"{tuple(reference.shape)}"
        )
    a, b = logits.to(F64), reference.to(F64)
    if a.numel() == 0:
        return 0.0, 0.0
    tv = 0.5 * (a.softmax(-1) - b.softmax(-1)).abs().sum(-1)
    nan = bool(torch.isnan(a).any())
    return (
        (math.nan, math.nan) if nan else (float((a - b).abs().max()), float(tv.max()))
    )
