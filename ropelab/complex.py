"""RoPE in Euler form: each channel pair as one complex number (chapter
02_complex_rotation).

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
    check_layout,
    check_x,
)
from .frequencies import angles

__all__ = [
    "apply_rotary_complex",
    "as_complex_pairs",
    "from_complex_pairs",
    "pair_products",
    "relative_score",
]


def as_complex_pairs(x: Tensor) -> Tensor:
    """View interleaved pairs as complex numbers: ``(..., dim)`` real ->
    ``(..., dim // 2)`` complex.

    ``x`` is promoted to float32 first when narrower (torch has no bfloat16
    complex type); float64 stays float64 (complex128).
    """
    work = x if x.dtype == torch.float64 else x.float()
    return torch.view_as_complex(work.unflatten(-1, (-1, 2)).contiguous())


def from_complex_pairs(z: Tensor) -> Tensor:
    """Inverse of :func:`as_complex_pairs`: ``(..., dim // 2)`` complex ->
    ``(..., dim)`` real."""
    return torch.view_as_real(z).flatten(-2)


def apply_rotary_complex(
    x: Tensor, positions: PositionsLike, inv_freq: Tensor
) -> Tensor:
    """Rotate interleaved pairs by complex multiplication: z_j · e^{i m θ_j}
    (02_complex_rotation, eq. ``euler``).

    The unit phasors e^{i m θ_j} are ``torch.polar(1, m·θ_j)`` with angles from
    :func:`ropelab.angles` (float32 or wider). The product is taken in
    complex64 (complex128 for float64 ``x`` and ``inv_freq``) and cast back to
    ``x``'s dtype, as Meta's ``apply_rotary_emb`` does.

    Args:
        x: ``(..., seq, dim)`` in the interleaved layout.
        positions: integer positions ``(..., seq)`` broadcastable against
            ``x.shape[:-1]``.
        inv_freq: ``(dim // 2,)``.

    Returns:
        Tensor of ``x``'s shape, dtype and device (``inv_freq`` and the positions
        are moved there: d/2 numbers and a few integers).

    Raises:
        TypeError, ValueError: as :func:`ropelab.apply_rotary` for ``x`` and
            :func:`ropelab.angles` for ``positions`` and ``inv_freq``; a
            ``ValueError`` too when ``inv_freq`` has not dim // 2 entries or the
            positions are not x's seq.
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
        raise ValueError(
            f"positions give {a.shape[-2]} positions but x has seq {x.shape[-2]} "
            f"(shape {tuple(x.shape)})"
        )
    wide = x.dtype == torch.float64 and a.dtype == torch.float64
    phasor = torch.polar(torch.ones_like(a), a)
    z = as_complex_pairs(x.double() if wide else x.float())
    if not wide:
        phasor = phasor.to(torch.complex64)
    return from_complex_pairs(z * phasor).to(x.dtype)


def pair_products(q: Tensor, k: Tensor, *, layout: str = "half_split") -> Tensor:
    """h_j = q_j · conj(k_j) for every channel pair j (02_complex_rotation, eq.
    ``cplx-head``; 06_attention_and_decay, eq. ``attn-complex-score``).

    Pair j is read as the complex number q_j = q_{2j} + i·q_{2j+1}
    (``"interleaved"``) or q_j = q_j + i·q_{j+d/2} (``"half_split"``), the
    number RoPE multiplies by e^{imθ_j} in either layout. Then
    ⟨q, k⟩ = Re Σ_j h_j.

    Args:
        q, k: ``(..., dim)`` real vectors with broadcastable leading axes.
        layout: ``"half_split"`` or ``"interleaved"``.

    Returns:
        Complex tensor ``(..., dim // 2)``: complex128 when both are float64, else
        complex64.
    """
    layout = check_layout(layout)
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor, got dtype {t.dtype}"
            )
        if t.ndim < 1 or t.shape[-1] == 0 or t.shape[-1] % 2:
            raise ValueError(
                f"{name}'s last axis (dim) must be even and non-empty, got shape "
                f"{tuple(t.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same dim (last axis), got q {tuple(q.shape)} and k "
            f"{tuple(k.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-1], k.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"q of shape {tuple(q.shape)} and k of shape {tuple(k.shape)} do not "
            "broadcast"
        ) from None
    work = torch.float64 if q.dtype == k.dtype == torch.float64 else torch.float32

    def as_complex(x: Tensor) -> Tensor:
        x = x.to(work)
        if layout == "interleaved":
            re, im = x[..., 0::2], x[..., 1::2]
        else:
            re, im = x.chunk(2, dim=-1)
        return torch.complex(re.contiguous(), im.contiguous())

    return as_complex(q) * as_complex(k).conj()


def relative_score(
    q: Tensor,
    k: Tensor,
    distances: PositionsLike,
    inv_freq: Tensor,
    *,
    layout: str = "interleaved",
) -> Tensor:
    """RoPE's score of a head as a function of the distance m − n alone
    (02_complex_rotation, eqs. ``relative``, ``cplx-head``).

    Computes Re Σ_j h_j · e^{i (m−n) θ_j} with h_j = q_j · conj(k_j)
    (:func:`pair_products`). By eq. ``relative`` this equals the real dot
    product of q rotated to position m and k rotated to position n for every
    m, n with m − n = distance, without rotating anything. The sum over pairs
    is one matrix product of the pair products with the phasors, in
    complex128 when ``q``, ``k`` and ``inv_freq`` are all float64 and in
    complex64 otherwise. ``inv_freq`` may be any frequencies, scaled ones
    included (07_context_extension).

    Args:
        q, k: ``(..., dim)``, one dtype, leading axes broadcastable.
        distances: integer distances m − n (may be negative), an int or any shape
            ``D``.
        inv_freq: ``(dim // 2,)``.
        layout: the pairing of q's and k's channels (default: interleaved, the Euler
            form).

    Returns:
        Tensor ``broadcast(q.shape[:-1], k.shape[:-1]) + D``, float64 when
        computed in complex128, else float32.
    """
    q = check_float_tensor(q, "q")
    k = check_float_tensor(k, "k")
    inv_freq = check_inv_freq(inv_freq)
    if q.dtype != k.dtype:
        raise TypeError(
            f"q and k must have the same dtype, got {q.dtype} and {k.dtype}"
        )
    if q.ndim < 1 or q.shape[-1] != 2 * inv_freq.shape[0]:
        raise ValueError(
            "q must have shape (..., dim) with dim = 2 * len(inv_freq) = "
            f"{2 * inv_freq.shape[0]}, got {tuple(q.shape)}"
        )
    h = pair_products(q, k, layout=layout)  # (*lead, dim//2)
    wide = h.dtype == torch.complex128 and inv_freq.dtype == torch.float64
    if not wide:
        h = h.to(torch.complex64)
    dist = as_positions(distances, h.device, name="distances", nonnegative=False)
    theta = inv_freq.to(device=h.device, dtype=torch.float64 if wide else torch.float32)
    # (m − n)·θ_j: ropelab.angles would refuse a negative distance
    phasor = torch.polar(
        torch.ones((), dtype=theta.dtype, device=h.device),
        dist.to(theta.dtype).unsqueeze(-1) * theta,
    )
    # Σ_j h_j e^{iδθ_j} for every δ at once: (*lead, d/2) @ (d/2, |D|), no
    # (*lead, *D, d/2) temporary
    score = h @ phasor.reshape(-1, h.shape[-1]).transpose(0, 1)
    return score.real.reshape(h.shape[:-1] + dist.shape)
