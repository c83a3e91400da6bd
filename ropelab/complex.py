"""RoPE in Euler form: each channel pair as one complex number (chapter 02_complex_rotation).

Pair (x_{2j}, x_{2j+1}) is read as z_j = x_{2j} + i·x_{2j+1} and rotated by
multiplying with e^{i m θ_j} (02_complex_rotation, eq. ``euler``). This is the
interleaved layout, as in RoFormer and Meta's ``apply_rotary_emb``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import (
    PositionsLike,
    as_positions,
    check_float_tensor,
    check_inv_freq,
    check_x,
)
from .frequencies import angles

__all__ = ["apply_rotary_complex", "as_complex_pairs", "from_complex_pairs", "relative_score"]


def as_complex_pairs(x: Tensor) -> Tensor:
    """View interleaved pairs as complex numbers: ``(..., dim)`` real -> ``(..., dim // 2)`` complex.

    ``x`` is promoted to float32 first when narrower (torch has no bfloat16
    complex type); float64 stays float64 (complex128).
    """
    work = x if x.dtype == torch.float64 else x.float()
    return torch.view_as_complex(work.unflatten(-1, (-1, 2)).contiguous())


def from_complex_pairs(z: Tensor) -> Tensor:
    """Inverse of :func:`as_complex_pairs`: ``(..., dim // 2)`` complex -> ``(..., dim)`` real."""
    return torch.view_as_real(z).flatten(-2)


def apply_rotary_complex(x: Tensor, positions: PositionsLike, inv_freq: Tensor) -> Tensor:
    """Rotate interleaved pairs by complex multiplication: z_j · e^{i m θ_j} (02_complex_rotation, eq. ``euler``).

    The unit phasors e^{i m θ_j} are ``torch.polar(1, m·θ_j)`` with angles from
    :func:`ropelab.angles` (float32 or wider). The product is taken in
    complex64 (complex128 for float64 ``x`` and ``inv_freq``) and cast back to
    ``x``'s dtype, as Meta's ``apply_rotary_emb`` does.

    Args:
        x: ``(..., seq, dim)`` in the interleaved layout.
        positions: integer positions ``(..., seq)`` broadcastable against ``x.shape[:-1]``.
        inv_freq: ``(dim // 2,)``.

    Returns:
        Tensor of ``x``'s shape, dtype and device.
    """
    x = check_x(x)
    inv_freq = check_inv_freq(inv_freq)
    if 2 * inv_freq.shape[0] != x.shape[-1]:
        raise ValueError(
            f"inv_freq has {inv_freq.shape[0]} frequencies but x has dim {x.shape[-1]} "
            f"(needs dim // 2 = {x.shape[-1] // 2})"
        )
    a = angles(positions, inv_freq.to(x.device))
    if a.shape[-2] != x.shape[-2]:
        raise ValueError(f"positions give {a.shape[-2]} positions but x has seq {x.shape[-2]} (shape {tuple(x.shape)})")
    wide = x.dtype == torch.float64 and a.dtype == torch.float64
    phasor = torch.polar(torch.ones_like(a), a)
    z = as_complex_pairs(x.double() if wide else x.float())
    if not wide:
        phasor = phasor.to(torch.complex64)
    return from_complex_pairs(z * phasor).to(x.dtype)


def relative_score(q: Tensor, k: Tensor, distances: PositionsLike, inv_freq: Tensor) -> Tensor:
    """RoPE's score of a head as a function of the distance m − n alone (02_complex_rotation, eqs. ``relative``, ``cplx-head``).

    Computes Re Σ_j q_j · conj(k_j) · e^{i (m−n) θ_j}, where q_j and k_j are the
    interleaved pairs read as complex numbers. By eq. ``relative`` this equals
    the real dot product of ``apply_rotary_complex(q, m)`` and
    ``apply_rotary_complex(k, n)`` for every m, n with m − n = distance, without
    rotating anything. The sum runs in complex64 (complex128 when ``q``, ``k``
    and ``inv_freq`` are all float64); the result has ``q``'s dtype.

    Args:
        q, k: ``(..., dim)`` in the interleaved layout, same dtype, leading axes broadcastable.
        distances: integer distances m − n (may be negative), an int or ``(n,)`` (any shape).
        inv_freq: ``(dim // 2,)``.

    Returns:
        Tensor ``broadcast(q.shape[:-1], k.shape[:-1]) + distances.shape``.
    """
    q = check_float_tensor(q, "q")
    k = check_float_tensor(k, "k")
    inv_freq = check_inv_freq(inv_freq)
    if q.dtype != k.dtype:
        raise TypeError(f"q and k must have the same dtype, got {q.dtype} and {k.dtype}")
    for name, t in (("q", q), ("k", k)):
        if t.ndim < 1 or t.shape[-1] != 2 * inv_freq.shape[0]:
            raise ValueError(
                f"{name} must have shape (..., dim) with dim = 2 * len(inv_freq) = {2 * inv_freq.shape[0]}, "
                f"got {tuple(t.shape)}"
            )
    try:
        lead = torch.broadcast_shapes(q.shape[:-1], k.shape[:-1])
    except RuntimeError:
        raise ValueError(f"q of shape {tuple(q.shape)} and k of shape {tuple(k.shape)} do not broadcast") from None
    dist = as_positions(distances, q.device, name="distances", nonnegative=False)
    inv_freq = inv_freq.to(q.device)
    wide = q.dtype == torch.float64 and inv_freq.dtype == torch.float64
    # (m − n)·θ_j: ropelab.angles would refuse a negative distance
    a = dist.to(inv_freq.dtype).unsqueeze(-1) * inv_freq  # (*dist, dim//2)
    phasor = torch.polar(torch.ones_like(a), a)
    ctype = torch.complex128 if wide else torch.complex64
    zq = as_complex_pairs(q.double() if wide else q.float())
    zk = as_complex_pairs(k.double() if wide else k.float())
    prod = (zq * zk.conj()).expand(*lead, -1)  # (*lead, dim//2)
    prod = prod.reshape(*lead, *([1] * dist.ndim), -1)
    score = (prod * phasor.to(ctype)).real.sum(-1)
    return score.to(q.dtype)
