"""Chapter 03's helpers (pairing): Meta's and transformers' RoPE on ropelab's tensor
layout, the matrix of a rotation, and the traffic of three formulas.

The two rotations run the reference code itself (Meta's transcription in
:mod:`ropelab.book.reference`, transformers' LLaMA), on the CPU and in float32
as those implementations compute, so that the chapter compares ropelab and its
own derivations with code that shares nothing with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from . import reference

__all__ = ["meta_rope", "hf_rope", "rotation_matrix_of", "traffic_rows"]

Rope = Callable[[Tensor, Sequence[int] | Tensor], Tensor]


def _positions(positions: Sequence[int] | Tensor, x: Tensor) -> Tensor:
    pos = torch.as_tensor(positions).cpu()
    if pos.shape != (x.shape[-2],):
        raise ValueError(f"positions must have shape ({x.shape[-2]},) for x of shape "
                         f"{tuple(x.shape)}, got {tuple(pos.shape)}")
    return pos


def meta_rope(x: Tensor, positions: Sequence[int] | Tensor, base: float = 10000.0,
              ) -> Tensor:
    """Meta's ``apply_rotary_emb`` on x (..., seq, d) at integer positions: interleaved
    pairs (03_pairing, eq. ``interleaved``); float32 arithmetic, x's dtype, the CPU."""
    x = x.cpu()
    pos = _positions(positions, x)
    end = int(pos.max()) + 1
    freqs_cis = reference.precompute_freqs_cis(x.shape[-1], end, base)[pos]
    xm = x.reshape(-1, *x.shape[-2:]).transpose(0, 1)[None]  # (1, seq, rows, d)
    out, _ = reference.apply_rotary_emb(xm, xm, freqs_cis)
    return out[0].transpose(0, 1).reshape(x.shape)


def hf_rope(x: Tensor, positions: Sequence[int] | Tensor, base: float = 10000.0,
            ) -> Tensor:
    """transformers' ``LlamaRotaryEmbedding`` and ``apply_rotary_pos_emb`` on x
    (..., seq, d): half-split pairs (03_pairing, eq. ``halfsplit``); tables in x's
    dtype, on the CPU."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as llama

    x = x.cpu()
    pos = _positions(positions, x)
    d = x.shape[-1]
    config = LlamaConfig(hidden_size=2 * d, num_attention_heads=2, head_dim=d,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, pos[None])
    out, _ = llama.apply_rotary_pos_emb(x, x, cos[0], sin[0], unsqueeze_dim=0)
    return out.reshape(x.shape)  # (seq, d) inputs come back with a leading 1


def rotation_matrix_of(rope: Rope, d: int, position: int) -> Tensor:
    """The d×d matrix R with rope(x) = R x at ``position``: column c is the rotation of
    the basis vector e_c (04_rotation_matrix, eq. ``rmatrix``); float32."""
    basis = torch.eye(d)[:, None, :]  # d vectors, one position each: (d, 1, d)
    return rope(basis, [position])[:, 0, :].T


def traffic_rows(seq: int = 256, heads: int = 8, d: int = 128,
                 ) -> list[tuple[str, float, str]]:
    """Bytes moved by three ways to rotate a float32 query (1, heads, seq, d), in floors
    (read x once, write once): [(formula, floors, operations)] (03_pairing)."""
    import ropelab
    from transformers.models.llama import modeling_llama as llama

    from .cost import trace_traffic

    qx = torch.randn(1, heads, seq, d, generator=torch.Generator().manual_seed(0))
    inv = ropelab.inv_freq(d)
    cos, sin = ropelab.cos_sin(torch.arange(seq), inv)
    ci, si = ropelab.cos_sin(torch.arange(seq), inv, layout="interleaved")
    qm = qx.transpose(1, 2).contiguous()  # Meta's (batch, seq, heads, d)
    km = qm.clone()  # a key: Meta's function rotates both, the count follows q
    fc = reference.precompute_freqs_cis(d, seq)
    runs = {
        "transformers, x*cos + rotate_half(x)*sin":
            (lambda: qx * cos + llama.rotate_half(qx) * sin, qx),
        "interleaved, x*cos + rot_int(x)*sin":
            (lambda: qx * ci + ropelab.rotary.rotate_interleaved(qx) * si, qx),
        "Meta, complex product": (lambda: reference.apply_rotary_emb(qm, km, fc), qm),
    }
    floor = 2 * qx.numel() * qx.element_size()
    rows = []
    for name, (fn, inp) in runs.items():
        t = trace_traffic(fn, inp)
        rows.append((name, (t.bytes_read + t.bytes_written) / floor, " ".join(t.ops)))
    return rows
