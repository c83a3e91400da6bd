"""Reference solutions to chapter 3's exercises (03_pairing)."""

from __future__ import annotations

__all__ = ["half_split_index"]


def half_split_index(d: int) -> list[int]:
    """Exercise 1: the index list perm with to_half_split(x) == x[..., perm]."""
    return [2 * i for i in range(d // 2)] + [2 * i + 1 for i in range(d // 2)]
