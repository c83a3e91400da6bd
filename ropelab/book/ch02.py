"""Chapter 02's helpers (complex rotation): the Euler form written in numpy, and the
three bfloat16 code paths the chapter compares.

The numpy functions share no code with ropelab: they evaluate eqs. ``euler``
and ``cplx-head`` directly in complex128, with θ_j = base^(−2j/d) from numpy,
so the chapter can compare ropelab, Meta's code and transformers with them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "numpy_theta", "sinusoid", "euler_rotate", "closed_form_scores", "bfloat16_paths",
]


def numpy_theta(d: int, base: float = 10000.0) -> np.ndarray:
    """θ_j = base^(−2j/d), j = 0..d/2−1, in float64 numpy
    (01_frequencies, eq. ``theta``)."""
    if isinstance(d, bool) or not isinstance(d, int) or d <= 0 or d % 2:
        raise ValueError(f"d must be a positive even int, got {d!r}")
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def sinusoid(m: int, inv_freq: Tensor) -> Tensor:
    """Vaswani's additive encoding p_m laid out in pairs: (sin mθ_j, cos mθ_j) at
    channels (2j, 2j+1) (01_frequencies, eq. ``freq-sinusoidal``).

    Args:
        m: the position.
        inv_freq: the frequencies θ_j, shape (d/2,).

    Returns:
        p_m, shape (d,), on inv_freq's device and in its dtype.
    """
    if inv_freq.ndim != 1:
        raise ValueError(f"inv_freq must be (d/2,), got shape {tuple(inv_freq.shape)}")
    angle = m * inv_freq
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten()


def _pairs(x: Tensor) -> np.ndarray:
    """x (..., d) real -> (..., d/2) complex128, pair (2j, 2j+1) as x_2j + i·x_2j+1."""
    if x.shape[-1] % 2:
        raise ValueError(f"x must have an even last axis, got shape {tuple(x.shape)}")
    a = x.detach().cpu().double().numpy()
    return a[..., 0::2] + 1j * a[..., 1::2]


def euler_rotate(x: Tensor, positions: Sequence[int] | Tensor, base: float = 10000.0,
                 ) -> Tensor:
    """x (..., seq, d) rotated pair by pair to its positions, x̂_j·e^{imθ_j}
    (02_complex_rotation, eq. ``euler``), interleaved pairs, in float64 on the CPU."""
    pos = np.asarray(torch.as_tensor(positions).cpu(), dtype=np.float64)
    z = _pairs(x)
    if pos.shape != z.shape[-2:-1]:
        raise ValueError(f"positions must have shape ({z.shape[-2]},) for x of shape "
                         f"{tuple(x.shape)}, got {pos.shape}")
    rotated = z * np.exp(1j * pos[:, None] * numpy_theta(x.shape[-1], base))
    out = np.stack((rotated.real, rotated.imag), axis=-1).reshape(z.shape[:-1] + (-1,))
    return torch.from_numpy(out)


def closed_form_scores(q: Tensor, k: Tensor, distances: Tensor,
                       base: float = 10000.0) -> Tensor:
    """Re Σ_j q̂_j·conj(k̂_j)·e^{i(m−n)θ_j} for each distance m − n
    (02_complex_rotation, eq. ``cplx-head``); q, k (d,) -> distances' shape, float64."""
    if q.shape != k.shape or q.ndim != 1:
        raise ValueError(f"q and k must be (d,) vectors, got {tuple(q.shape)} and "
                         f"{tuple(k.shape)}")
    dist = np.asarray(distances.cpu(), dtype=np.float64)[..., None]
    phasors = np.exp(1j * dist * numpy_theta(q.numel(), base))
    terms = _pairs(q) * _pairs(k).conj() * phasors
    return torch.from_numpy(terms.sum(-1).real)


def bfloat16_paths(x: Tensor, positions: Sequence[int] | Tensor,
                   base: float = 10000.0) -> dict[str, tuple[int, Tensor]]:
    """A bfloat16 x (batch, heads, seq, d), interleaved, rotated by three code paths:
    {name: (how often it rounds, result)}, all on the CPU.

    * Meta's ``apply_rotary_emb``: float32 complex product, rounded once;
    * ``ropelab.apply_rotary_complex``: the same, ropelab's Euler form;
    * transformers' LLaMA ``apply_rotary_pos_emb`` with the tables its
      ``LlamaRotaryEmbedding`` returns for a bfloat16 x (rounded to bfloat16),
      run on the half-split copy of x and permuted back (exact moves): the
      tables, both products and the sum each round.
    """
    import ropelab
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as llama

    from . import reference

    if x.dtype != torch.bfloat16 or x.ndim != 4:
        raise ValueError(f"x must be bfloat16 (batch, heads, seq, d), got {x.dtype} "
                         f"{tuple(x.shape)}")
    x = x.cpu()
    d = x.shape[-1]
    pos = torch.as_tensor(positions).cpu()
    end = int(pos.max()) + 1
    xm = x.transpose(1, 2)  # Meta's (batch, seq, heads, d)
    freqs_cis = reference.precompute_freqs_cis(d, end, base)[pos]
    meta, _ = reference.apply_rotary_emb(xm, xm, freqs_cis)
    config = LlamaConfig(hidden_size=2 * d, num_attention_heads=2, head_dim=d,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    xh = ropelab.to_half_split(x)
    cos, sin = llama.LlamaRotaryEmbedding(config)(xh, pos[None])  # bfloat16 tables
    hf, _ = llama.apply_rotary_pos_emb(xh, xh, cos, sin)
    return {
        "Meta, complex float32": (1, meta.transpose(1, 2)),
        "ropelab, complex float32": (1, ropelab.apply_rotary_complex(
            x, pos, ropelab.inv_freq(d, base))),
        "transformers, bfloat16": (5, ropelab.to_interleaved(hf)),
    }
