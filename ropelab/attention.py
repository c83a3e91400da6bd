"""Attention scores under RoPE and RoFormer's long-term decay bound
(chapter 06_attention_and_decay).

After RoPE the score of a query q at position m and a key k at position n is

    ⟨R_m q, R_n k⟩ = Re Σ_j h_j e^{i(m-n)θ_j},   h_j = q_j · conj(k_j)

where q_j, k_j are the channel pairs read as complex numbers
(06_attention_and_decay, eq. ``attn-complex-score``). It depends on m - n only,
so for the same q and k at every position the score matrix is Toeplitz
(eq. ``attn-toeplitz``).

RoFormer (section 3.4.3) bounds that sum by Abel summation with the partial
sums S_j = Σ_{l<j} e^{iδθ_l} (eq. ``attn-partial-sums``) and calls
(1/(d/2)) Σ_{j=1}^{d/2} |S_j| the relative upper bound (eq. ``attn-decay-bound``).

Indexing: pairs and frequencies are indexed from 0 (θ_0 = 1, as in the code of
every other module); S_j sums the first j phasors, so S_0 = 0, S_1 = e^{iδθ_0}
and the bound averages |S_1| ... |S_{d/2}|. These are the paper's own indices
in section 3.4.3.
"""

from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import Tensor

from ._checks import (
    PositionsLike,
    as_positions,
    check_base,
    check_dim,
    check_float_tensor,
    check_layout,
    check_x,
)
from .complex import pair_products
from .complex import relative_score as complex_relative_score
from .frequencies import inv_freq
from .rotary import apply_rotary, cos_sin

__all__ = [
    "rope_scores",
    "pair_products",
    "score_at_distance",
    "partial_phasor_sums",
    "decay_bound",
    "is_toeplitz",
]


def _float64_device(device: torch.device) -> torch.device:
    """``device`` if it has float64 arithmetic, else the CPU (MPS has no float64)."""
    return torch.device("cpu") if device.type == "mps" else device


def _frequencies_for(*tensors: Tensor, dim: int, base: float) -> Tensor:
    """θ in float64 when every tensor is float64, else float32, on the first tensor's
    device."""
    wide = all(t.dtype == torch.float64 for t in tensors)
    return inv_freq(dim, base, dtype=torch.float64 if wide else torch.float32).to(
        tensors[0].device
    )


def rope_scores(
    q: Tensor,
    k: Tensor,
    positions_q: Union[Tensor, Sequence[int], range, None] = None,
    positions_k: Union[Tensor, Sequence[int], range, None] = None,
    *,
    base: float = 10000.0,
    layout: str = "half_split",
) -> Tensor:
    """Raw attention scores after RoPE: S[m, n] = ⟨R_{p_m} q_m, R_{p_n} k_n⟩
    (06_attention_and_decay, eq. ``attn-toeplitz``).

    Rotates ``q`` by ``positions_q`` and ``k`` by ``positions_k`` with
    :func:`ropelab.apply_rotary` and returns ``q_rot @ k_rotᵀ``, without the
    1/√d scale and softmax. Angles are in float64 for float64 inputs,
    float32 otherwise.

    Args:
        q: ``(..., Lq, dim)`` queries.
        k: ``(..., Lk, dim)`` keys; leading axes broadcast against ``q``'s.
        positions_q: integer positions ``(Lq,)`` (default ``0..Lq-1``).
        positions_k: integer positions ``(Lk,)`` (default ``0..Lk-1``).
        base: the RoPE base b > 1.
        layout: ``"half_split"`` or ``"interleaved"``: how q and k pair their channels.

    Returns:
        Tensor ``(..., Lq, Lk)`` in the promoted dtype of ``q`` and ``k``, on their
        device.

    Raises:
        TypeError: q or k not a dense real floating tensor; positions not
            integers; ``base`` not a number.
        ValueError: q or k as :func:`ropelab.apply_rotary` refuses x, of
            different dims, on different devices, or with leading axes that do
            not broadcast; positions negative or not ``(Lq,)`` / ``(Lk,)``;
            ``base`` not finite and > 1; an unknown ``layout``.
    """
    q = check_x(q, "q")
    k = check_x(k, "k")
    layout = check_layout(layout)
    base = check_base(base)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same dim (last axis), got q {tuple(q.shape)} and k "
            f"{tuple(k.shape)}"
        )
    if q.device != k.device:
        raise ValueError(f"q is on {q.device} but k is on {k.device}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading axes of q {tuple(q.shape)} and k {tuple(k.shape)} do not "
            "broadcast"
        ) from None
    theta = _frequencies_for(q, k, dim=q.shape[-1], base=base)
    rotated = []
    for name, x, pos in (("q", q, positions_q), ("k", k, positions_k)):
        pos = (
            torch.arange(x.shape[-2], device=x.device)
            if pos is None
            else as_positions(pos, x.device, name=f"positions_{name}")
        )
        if pos.ndim != 1 or pos.shape[0] != x.shape[-2]:
            raise ValueError(
                f"positions_{name} must have shape ({x.shape[-2]},) to match {name} of "
                f"shape {tuple(x.shape)}, got {tuple(pos.shape)}"
            )
        cos, sin = cos_sin(pos, theta, layout=layout, dtype=theta.dtype)
        rotated.append(apply_rotary(x, cos, sin, layout=layout))
    q_rot, k_rot = rotated
    dtype = torch.promote_types(q.dtype, k.dtype)
    return q_rot.to(dtype) @ k_rot.to(dtype).transpose(-1, -2)


def score_at_distance(
    q: Tensor,
    k: Tensor,
    distances: PositionsLike,
    *,
    base: float = 10000.0,
    layout: str = "half_split",
) -> Tensor:
    """The score as a function of the distance δ = m - n: g(δ) = Re Σ_j h_j
    e^{iδθ_j} (06_attention_and_decay, eq. ``attn-complex-score``).

    The closed form of :func:`~ropelab.rope_scores`: for the same q at every query
    position and the same k at every key position, S[m, n] = g(m - n).
    :func:`ropelab.complex.relative_score` (which takes any frequencies and
    defaults to the interleaved pairs of the Euler form) with the standard
    θ = ``inv_freq(dim, base)``, in float64 when q and k are float64, and
    the half-split pairs of transformers' LLaMA by default.

    Args:
        q, k: ``(..., dim)`` unrotated vectors with broadcastable leading axes, one
            dtype.
        distances: integer distances m - n of any sign, shape ``D``.
        base: the RoPE base b > 1.
        layout: the pairing of q's and k's channels.

    Returns:
        Tensor ``(..., *D)``, float64 for float64 inputs else float32.
    """
    q, k = check_float_tensor(q, "q"), check_float_tensor(k, "k")
    theta = _frequencies_for(
        q, k, dim=check_dim(q.shape[-1], "q's last axis (dim)"), base=check_base(base)
    )
    return complex_relative_score(q, k, distances, theta, layout=layout)


def partial_phasor_sums(
    distances: PositionsLike, dim: int, base: float = 10000.0
) -> Tensor:
    """RoFormer's partial sums S_j = Σ_{l=0}^{j-1} e^{iδθ_l}, j = 0..d/2
    (06_attention_and_decay, eq. ``attn-partial-sums``).

    Column j holds S_j, so column 0 is S_0 = 0 and consecutive differences
    are the phasors: S_{j+1} - S_j = e^{iδθ_j}. Computed in complex128 (on
    the CPU when ``distances`` lives on MPS, which has no float64).

    Args:
        distances: integer distances δ = m - n of any sign, shape ``D``.
        dim: head dimension d (positive, even).
        base: the RoPE base b > 1.

    Returns:
        complex128 tensor ``(*D, dim // 2 + 1)``.
    """
    dim = check_dim(dim)
    base = check_base(base)
    delta = as_positions(distances, name="distances", nonnegative=False)
    delta = delta.to(_float64_device(delta.device))
    theta = inv_freq(dim, base, dtype=torch.float64).to(delta.device)
    phasors = torch.polar(
        torch.ones((), dtype=torch.float64, device=delta.device),
        delta.double().unsqueeze(-1) * theta,
    )
    zero = torch.zeros(delta.shape + (1,), dtype=phasors.dtype, device=delta.device)
    return torch.cat((zero, phasors.cumsum(-1)), dim=-1)


def decay_bound(distances: PositionsLike, dim: int, base: float = 10000.0) -> Tensor:
    """RoFormer's relative upper bound ``(1/(d/2)) Σ_{j=1}^{d/2} |S_j(δ)|``
    (06_attention_and_decay, eq. ``attn-decay-bound``).

    With ``S_j`` the sum of the first j phasors ``e^{iδθ_l}``
    (:func:`~ropelab.attention.partial_phasor_sums`),
    ``|score at distance δ| ≤ (max_j |h_{j+1} - h_j|) · (d/2) · decay_bound(δ)``
    (eq. ``attn-abel-bound``). Since ``|S_j| ≤ j``, the bound is largest at δ = 0,
    where it equals (d/2 + 1)/2; it is even in δ and non-negative.

    Args:
        distances: integer distances δ = m - n of any sign, shape ``D`` (an int,
            a sequence or an integer tensor).
        dim: head dimension d (positive, even).
        base: the RoPE base b > 1.

    Returns:
        float64 tensor of shape ``D``, on ``distances``' device (the CPU for
        ints and sequences, and for MPS tensors).

    Raises:
        TypeError: distances not integers (or a sparse tensor); ``dim`` not an
            int; ``base`` not a number.
        ValueError: ``dim`` not positive and even; ``base`` not finite and > 1.
    """
    return partial_phasor_sums(distances, dim, base)[..., 1:].abs().mean(-1)


def is_toeplitz(matrix: Tensor, *, tol: float = 0.0) -> bool:
    """True when ``matrix`` is constant along every diagonal: |M[m+1, n+1] - M[m, n]|
    ≤ tol (eq. ``attn-toeplitz``).

    Args:
        matrix: ``(..., M, N)`` real or complex; every matrix in the batch is checked.
        tol: absolute tolerance (0 asks for exact equality).

    Returns:
        A Python bool.
    """
    if not isinstance(matrix, Tensor):
        raise TypeError(f"matrix must be a torch.Tensor, got {type(matrix).__name__}")
    if matrix.ndim < 2:
        raise ValueError(
            f"matrix must have shape (..., M, N), got shape {tuple(matrix.shape)}"
        )
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    if matrix.shape[-2] < 2 or matrix.shape[-1] < 2:
        return True
    return bool(((matrix[..., 1:, 1:] - matrix[..., :-1, :-1]).abs() <= tol).all())


# The former name, which clashed with ropelab.complex.relative_score (other arguments,
# other default layout); kept so that existing notebooks and code run unchanged.
relative_score = score_at_distance
