"""Rotation frequencies θ_j and the angles m·θ_j (chapter 01_frequencies).

The book writes θ_j = base^(-2(j-1)/d) for j = 1..d/2, as RoFormer does
(eq. ``theta``). Code indexes pairs from 0, so here θ_j = base^(-2j/d) for
j = 0..d/2-1: the same d/2 numbers.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import PositionsLike, as_positions, check_base, check_dim, check_inv_freq

__all__ = ["inv_freq", "base_powers", "wavelengths", "angles", "full_turn_pairs"]


def inv_freq(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    """The rotation frequencies θ_j = base^(-2j/d), j = 0..d/2-1
    (01_frequencies, eq. ``theta``).

    Computed in ``dtype`` with the same operations as Meta's and transformers'
    code, ``1 / base ** (arange(0, d, 2) / d)``, so the float32 result is
    bit-identical to the tables real checkpoints were trained with. Use
    ``dtype=torch.float64`` for a reference or for very long contexts.

    Args:
        dim: head dimension d (positive, even).
        base: the base b > 1 (10,000 in RoFormer and LLaMA, 500,000 in Llama 3).
        dtype: ``torch.float32`` or ``torch.float64``.

    Returns:
        Tensor ``(dim // 2,)``, decreasing from θ_0 = 1.

    Raises:
        TypeError: ``dim`` not an int, ``base`` not a number, ``dtype`` not
            float32/float64.
        ValueError: ``dim`` not positive and even; ``base`` not finite and > 1.
    """
    dim = check_dim(dim)
    base = check_base(base)
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    return 1.0 / base_powers(dim, base, dtype=dtype)


def base_powers(dim: int, base: float, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """b^(2j/d), j = 0..d/2-1, as the reference code computes it (θ_j is its inverse).

    Shared by :func:`inv_freq` and LongRoPE's ``1 / (ext_j · b^(2j/d))``, which
    transformers computes with one division: dividing θ_j by ext_j instead
    would round twice. Shapes: ``(dim // 2,)``; no argument checks (callers
    check).
    """
    exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim
    return base**exponent


def wavelengths(dim: int, base: float = 10000.0) -> Tensor:
    """Wavelengths λ_j = 2π/θ_j in tokens, in float64 (01_frequencies, eq.
    ``wavelength``).

    Pair j returns to its starting angle every λ_j positions; λ_0 = 2π and
    λ_{d/2-1} = 2π·base^((d-2)/d).

    Args:
        dim: head dimension d (positive, even).
        base: the base b > 1.

    Returns:
        Tensor ``(dim // 2,)``, increasing.

    Raises:
        TypeError, ValueError: as :func:`inv_freq` for ``dim`` and ``base``.
    """
    return 2 * math.pi / inv_freq(dim, base, dtype=torch.float64)


def angles(positions: PositionsLike, inv_freq: Tensor) -> Tensor:
    """The rotation angles m·θ_j for each position m and pair j
    (01_frequencies, eq. ``angles``).

    The outer product of positions and frequencies. It is computed in the
    dtype of ``inv_freq`` (float32 or float64), never narrower: positions are
    integers and are converted exactly up to 2^24 in float32 and 2^53 in
    float64.

    Args:
        positions: integer positions ``(..., seq)`` (tensor, int, range or list).
        inv_freq: ``(dim // 2,)`` frequencies, float32 or float64.

    Returns:
        Tensor ``(..., seq, dim // 2)`` in ``inv_freq``'s dtype and on its device
        (positions are moved there, as a list is). No positions give
        ``(0, dim // 2)``.

    Raises:
        TypeError: positions not integers (float, bool, complex) or a sparse
            tensor; inv_freq not a dense float32/float64 tensor.
        ValueError: a negative position (read on the positions' device);
            positions on the meta device with a real inv_freq; inv_freq not 1-D,
            empty, or, on the CPU, holding NaN or ±inf (zero and negative
            frequencies are accepted: a pair that stands still or turns back).
    """
    inv_freq = check_inv_freq(inv_freq)
    pos = as_positions(positions, inv_freq.device)
    return pos.to(inv_freq.dtype).unsqueeze(-1) * inv_freq


def full_turn_pairs(dim: int, base: float, context_len: float) -> int:
    """How many pairs complete a full turn within ``context_len`` tokens
    (01_frequencies, eq. ``freq-fullturn``).

    Counts the pairs j with λ_j ≤ L, where λ_j = 2π·base^(2j/d) (eq.
    ``wavelength``). Since λ_j grows with j, these are the pairs
    j = 0..N-1 with N = min(d/2, ⌊(d/2)·log(L/2π)/log(base)⌋ + 1) for
    L ≥ 2π, and N = 0 for L < 2π. The closed form gives the answer; one
    comparison with λ_N and λ_{N-1} (computed exactly as :func:`wavelengths`
    does) settles an L that lies on a wavelength to within rounding, so the
    result always equals ``int((wavelengths(dim, base) <= context_len).sum())``.

    Args:
        dim: head dimension d (positive, even).
        base: the base b > 1.
        context_len: context length L in tokens (a number ≥ 0).

    Returns:
        An int in 0..dim/2, non-decreasing in ``context_len`` and
        non-increasing in ``base``.
    """
    dim = check_dim(dim)
    base = check_base(base)
    if isinstance(context_len, bool) or not isinstance(context_len, (int, float)):
        raise TypeError(
            f"context_len must be a number, got {type(context_len).__name__} "
            f"{context_len!r}"
        )
    if not context_len >= 0 or context_len == float("inf"):
        raise ValueError(f"context_len must be a finite number >= 0, got {context_len}")
    half = dim // 2
    if context_len < 2 * math.pi:
        return 0
    n = min(
        half,
        math.floor(half * math.log(context_len / (2 * math.pi)) / math.log(base)) + 1,
    )
    lam = wavelengths(dim, base).tolist()
    while n < half and lam[n] <= context_len:
        n += 1
    while n > 0 and lam[n - 1] > context_len:
        n -= 1
    return n
