"""Reference solutions to chapter 9's exercises (09_performance)."""

from __future__ import annotations

import math

import torch

__all__ = ["hf_bytes"]


def hf_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Exercise 1: bytes the transformers formula moves on one x (shape, dtype).

    Per token-head its five operations read and write 2d, d, 2d, 2d and 3d elements
    (x·cos, −x₂, cat, ·sin, the sum): 10d elements of s bytes each.
    """
    d = shape[-1]
    token_heads = math.prod(shape[:-1])
    s = torch.empty((), dtype=dtype).element_size()
    per_token_head = (d + d) + (d // 2 + d // 2) + (d + d) + (d + d) + (2 * d + d)
    return token_heads * per_token_head * s
