"""Meta's LLaMA rotary code, written out once so that the book and the tests can run it.

A faithful transcription of the rotary functions in Meta's reference
implementations (the book's references ``meta2023llamacode`` and
``meta2024llamamodels``):

* ``precompute_freqs_cis``, ``reshape_for_broadcast`` and ``apply_rotary_emb``
  from meta-llama/llama, ``llama/model.py`` (LLaMA 1 and 2);
* ``apply_scaling`` and the ``use_scaled`` variant of ``precompute_freqs_cis``
  from meta-llama/llama-models, ``models/llama3/reference_impl/model.py``
  (Llama 3.1).

The operations, their order and their dtypes are Meta's: float32 frequencies
from ``arange(0, dim, 2)``, a float32 outer product with the positions,
unit phasors from ``torch.polar`` (complex64), neighbouring channels
``(2j, 2j+1)`` read as one complex number (the interleaved layout), and a
cast back to the input's dtype. Only the type annotations, the docstrings
and the keyword ``use_scaled`` on one shared ``precompute_freqs_cis`` are
ours. Meta's tensors are ``(batch, seq, heads, head_dim)``; ropelab's are
``(..., seq, dim)``, so callers transpose. Nothing here is used by ropelab
itself: it is the independent implementation the chapters compare with.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["apply_rotary_emb", "apply_scaling", "precompute_freqs_cis",
           "reshape_for_broadcast"]


def apply_scaling(freqs: Tensor) -> Tensor:
    """Llama 3.1's frequency scaling: factor 8, bands 1 and 4, context 8192."""
    # Values obtained from grid search
    scale_factor = 8
    low_freq_factor = 1
    high_freq_factor = 4
    old_context_len = 8192  # original llama3 length
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / scale_factor)
        else:
            assert low_freq_wavelen != high_freq_wavelen
            smooth = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            new_freqs.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return torch.tensor(new_freqs, dtype=freqs.dtype, device=freqs.device)


def precompute_freqs_cis(
    dim: int, end: int, theta: float = 10000.0, use_scaled: bool = False
) -> Tensor:
    """The phasors e^{i m θ_j}, m = 0..end-1 (eq. ``euler``); (end, dim/2) complex64."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    if use_scaled:
        freqs = apply_scaling(freqs)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis


def reshape_for_broadcast(freqs_cis: Tensor, x: Tensor) -> Tensor:
    """View ``freqs_cis`` (seq, dim/2) as (1, seq, 1, ..., dim/2), like ``x``."""
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq: Tensor, xk: Tensor, freqs_cis: Tensor) -> tuple[Tensor,
                                                                         Tensor]:
    """Rotate q, k (batch, seq, heads, d) by ``freqs_cis`` (seq, d/2), interleaved."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)
