"""Reference solutions to chapter 13's exercises (13_current_architectures)."""

from __future__ import annotations

import torch
from torch import Tensor


def leaky_rerope_positions(seq: int, window: int, leak: float) -> Tensor:
    """Leaky ReRoPE's ρ(m, n): m - n below ``window``, w + (m - n - w)/leak above.

    Returns ``(seq, seq)`` float64 (entries above the diagonal: m - n, masked anyway).
    """
    delta = (torch.arange(seq)[:, None] - torch.arange(seq)[None]).double()
    return torch.where(delta < window, delta, window + (delta - window) / leak)


def mla_cache_ratio(n_heads: int, qk_head_dim: int, v_head_dim: int, kv_lora_rank: int,
                    qk_rope_head_dim: int) -> float:
    """Numbers an MHA layer of the same shape caches per token over what MLA caches.

    MHA keeps every head's key and value, n_h (d_qk + d_v); MLA keeps the
    latent and the one shared RoPE key, d_c + d_R.
    """
    return n_heads * (qk_head_dim + v_head_dim) / (kv_lora_rank + qk_rope_head_dim)
