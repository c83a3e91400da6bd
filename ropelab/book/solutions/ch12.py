"""Reference solutions to chapter 12's exercises (positions in practice)."""

from __future__ import annotations

import torch
from torch import Tensor

from ropelab import rerotate_keys


def next_positions(attention_mask: Tensor) -> Tensor:
    """The position of the token each row generates next: its count of real tokens.

    attention_mask ``(batch, seq)`` of 0/1 -> int64 ``(batch, 1)``, the
    ``position_ids`` of one decoding step after a left-padded prompt.
    """
    return attention_mask.long().sum(-1, keepdim=True)


def cu_seqlens_from_positions(position_ids: Tensor) -> Tensor:
    """Recover ``cu_seqlens`` from the positions of packed documents.

    The inverse of :func:`ropelab.packed_positions`.

    A document starts wherever the position is 0. position_ids ``(total,)``
    -> int64 ``(n_docs + 1,)``.
    """
    starts = (position_ids == 0).nonzero().flatten()
    total = torch.tensor([position_ids.numel()], device=position_ids.device)
    return torch.cat((starts, total)).long()


def evict(keys: Tensor, n_sink: int, window: int, inv_freq: Tensor) -> Tensor:
    """A StreamingLLM cache step: keep the sinks and the last ``window`` keys.

    keys ``(..., n, dim)`` encoded at cache positions 0..n-1 (half-split) ->
    ``(..., n_sink + window, dim)`` encoded at 0..n_sink+window-1: the kept
    window moves back by the number of evicted keys.
    """
    n = keys.shape[-2]
    if n <= n_sink + window:
        return keys
    gone = n - n_sink - window
    kept = rerotate_keys(keys[..., n - window:, :], -gone, inv_freq)
    return torch.cat((keys[..., :n_sink, :], kept), dim=-2)
