"""Reference solutions to chapter 5's exercises (05_cache_and_decoding)."""

from __future__ import annotations

from torch import Tensor

__all__ = ["decode_scores"]


def decode_scores(q: Tensor, k: Tensor, rope, prompt_len: int) -> Tensor:
    """Exercise 1: prefill ``prompt_len`` tokens, then decode one at a time, KV-cached.

    ``q``, ``k``: (..., T, d); ``rope``: a :class:`ropelab.RotaryEmbedding`.
    Returns the (..., T, T) scores, row t holding query t against keys 0..t
    and zeros above the diagonal (eq. ``cache-decode``).
    """
    import torch

    T = q.shape[-2]
    scores = q.new_zeros(q.shape[:-2] + (T, T))
    pre_q, k_cache = rope(q[..., :prompt_len, :], k[..., :prompt_len, :])
    scores[..., :prompt_len, :prompt_len] = (pre_q @ k_cache.transpose(-1, -2)).tril()
    for t in range(prompt_len, T):
        q_t, k_t = rope(q[..., t : t + 1, :], k[..., t : t + 1, :],
                        offset=k_cache.shape[-2])
        k_cache = torch.cat((k_cache, k_t), dim=-2)
        scores[..., t, : t + 1] = (q_t @ k_cache.transpose(-1, -2))[..., 0, :]
    return scores
