"""Reference solutions to chapter 15's exercises (15_real_model)."""

from __future__ import annotations

import math

from torch import Tensor

__all__ = ["gguf_to_half_split", "slow_pairs"]


def gguf_to_half_split(weight: Tensor, n_heads: int) -> Tensor:
    """A q or k projection as GGUF stores it (interleaved pairs per head) in
    transformers' half-split order (eq. ``real-convert``).

    Within each head, output row 2i goes to row i and row 2i+1 to row i + d/2.
    Shapes: ``(n_heads · d, dim_in)`` -> the same.
    """
    rows, dim_in = weight.shape
    d = rows // n_heads
    return weight.view(n_heads, d // 2, 2, dim_in).transpose(1, 2).reshape(rows, dim_in)


def slow_pairs(dim: int, base: float, context: int) -> int:
    """How many pairs turn less than once within ``context`` tokens: λ_j > L, with
    λ_j = 2π·base^(2j/d) (01_frequencies)."""
    return sum(2 * math.pi * base ** (2 * j / dim) > context for j in range(dim // 2))
