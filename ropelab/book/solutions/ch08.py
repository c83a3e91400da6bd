"""Reference solutions to chapter 08 (numerics): the exercise ``num-ex1``."""

from __future__ import annotations

import torch

__all__ = ["first_lost"]


def first_lost(dtype: torch.dtype = torch.bfloat16, search_up_to: int = 1 << 16) -> int:
    """The first integer ≥ 0 that ``dtype`` cannot hold, found by casting (num-ex1).

    Casts 0..search_up_to-1 to ``dtype`` and back and returns the first
    integer that does not survive; compare with 2^p + 1 for p significand bits.
    """
    ints = torch.arange(0, search_up_to)
    lost = ints[ints.to(dtype).long() != ints]
    if not lost.numel():
        raise ValueError(f"every integer below {search_up_to} survives in {dtype}")
    return int(lost[0])
