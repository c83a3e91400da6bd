"""Perplexity by position block, with bootstrap intervals, from per-chunk sums.

Chapter 15's results file stores, per run and window, the summed next-token NLL
of each chunk of ``CHUNK`` targets. These functions turn those sums into
perplexity per block (:func:`block_ppl`, :func:`window_blocks`), agreement with
the unscaled model (:func:`window_agreement`) and perplexity or perplexity
ratios with intervals (:func:`ppl_interval`, :func:`window_interval`).
:mod:`ropelab.book.real_model` re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Mapping

import torch
from torch import Tensor

__all__ = [
    "CHUNK",
    "chunk_sums",
    "block_ppl",
    "ppl_interval",
    "window_blocks",
    "window_agreement",
    "window_interval",
]

CHUNK = 128  # tokens per resampling unit of the bootstrap


def chunk_sums(nll: Tensor, chunk: int = CHUNK) -> list[float]:
    """Sums of the per-token NLL over consecutive chunks of ``chunk`` targets."""
    return [float(c.double().sum()) for c in nll.split(chunk)]


def block_ppl(
    sums: Sequence[float], counts: Sequence[int], per_block: int
) -> list[float]:
    """Perplexity exp(Σ nll / tokens) over groups of ``per_block`` chunks."""
    out = []
    for i in range(0, len(sums), per_block):
        out.append(
            math.exp(sum(sums[i : i + per_block]) / sum(counts[i : i + per_block]))
        )
    return out


def ppl_interval(
    sums: Sequence[float],
    counts: Sequence[int],
    baseline: Sequence[float] | None = None,
    *,
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Perplexity over chunks, or its ratio to ``baseline`` on the same chunks, with a
    bootstrap interval: the chunks are resampled with replacement (paired when
    there is a baseline).

    Returns ``(value, low, high)``.
    """
    s = torch.tensor(sums, dtype=torch.float64)
    if baseline is not None:
        s = s - torch.tensor(baseline, dtype=torch.float64)
    c = torch.tensor(counts, dtype=torch.float64)
    idx = torch.randint(
        0, len(s), (reps, len(s)), generator=torch.Generator().manual_seed(seed)
    )
    boot = (s[idx].sum(1) / c[idx].sum(1)).exp()
    tail = (1 - level) / 2
    lo, hi = torch.quantile(boot, torch.tensor([tail, 1 - tail], dtype=torch.float64))
    return math.exp(float(s.sum() / c.sum())), float(lo), float(hi)


def window_blocks(
    extend: Mapping[str, Any], name: str, window: int = 0, *, block: int | None = None
) -> list[float]:
    """Perplexity per block (default: the results' block) of one run and window of
    ``extend`` or ``rebuild`` results."""
    w = extend["runs"][name]["windows"][window]
    per = (block or extend["block"]) // extend["chunk"]
    return block_ppl(w["chunk_nll"], w["chunk_tokens"], per)


def window_agreement(
    extend: Mapping[str, Any], name: str, window: int = 0, *, block: int | None = None
) -> list[float]:
    """Per block, the fraction of next tokens that run ``name`` predicts as no
    scaling does."""
    w = extend["runs"][name]["windows"][window]
    per = (block or extend["block"]) // extend["chunk"]
    agree, count = w["chunk_agree_none"], w["chunk_tokens"]
    return [
        sum(agree[i : i + per]) / sum(count[i : i + per])
        for i in range(0, len(agree), per)
    ]


def window_interval(
    extend: Mapping[str, Any],
    name: str,
    start: int,
    stop: int,
    *,
    baseline: str | None = None,
    window: int = 0,
) -> tuple[float, float, float]:
    """Perplexity of run ``name`` over the targets at positions ``[start, stop)`` of a
    window (or its ratio to run ``baseline`` there), with a 95 % bootstrap interval
    over the chunks (:func:`ppl_interval`)."""
    chunk = extend["chunk"]
    part = slice(start // chunk, (stop + chunk - 1) // chunk)
    w = extend["runs"][name]["windows"][window]
    base = (
        None
        if baseline is None
        else extend["runs"][baseline]["windows"][window]["chunk_nll"][part]
    )
    return ppl_interval(w["chunk_nll"][part], w["chunk_tokens"][part], base)
