"""ropelab.book.reference, Meta's rotary code, against the rotation written out pair by pair.

The transcription is the independent side of many comparisons in the book,
so it is itself checked against the definition (eq. ``interleaved``: pair
(2j, 2j+1) turned by m·θ_j) computed here in float64 with Python's math,
and against transformers' half-split code after the layout permutation.
"""

from __future__ import annotations

import math

import pytest
import torch

from ropelab import to_half_split
from ropelab.book import reference

transformers = pytest.importorskip("transformers")
from transformers.models.llama import modeling_llama as llama  # noqa: E402


def rotate_by_definition(x, start, base=10000.0):
    """x (batch, seq, heads, d), pair (2j, 2j+1) turned by (start + s)·θ_j, in float64."""
    out = x.double().clone()
    d = x.shape[-1]
    for s in range(x.shape[1]):
        for j in range(d // 2):
            a = (start + s) * base ** (-2 * j / d)
            c, si = math.cos(a), math.sin(a)
            x0, x1 = x[:, s, :, 2 * j].double(), x[:, s, :, 2 * j + 1].double()
            out[:, s, :, 2 * j] = x0 * c - x1 * si
            out[:, s, :, 2 * j + 1] = x1 * c + x0 * si
    return out


@pytest.mark.parametrize("start", [0, 7, 300])
def test_apply_rotary_emb_is_the_interleaved_rotation(start):
    g = torch.Generator().manual_seed(start)
    xq, xk = torch.randn(2, 5, 3, 16, generator=g), torch.randn(2, 5, 3, 16,
                                                                generator=g)
    freqs_cis = reference.precompute_freqs_cis(16, 512)[start : start + 5]
    q, k = reference.apply_rotary_emb(xq, xk, freqs_cis)
    assert q.dtype == xq.dtype and q.shape == xq.shape
    # float32 angles m·θ_j up to ~300 rad: rounding up to ~300·2^-24 per angle
    torch.testing.assert_close(q.double(), rotate_by_definition(xq, start), rtol=0,
                               atol=5e-5)
    torch.testing.assert_close(k.double(), rotate_by_definition(xk, start), rtol=0,
                               atol=5e-5)


def test_precompute_freqs_cis_shape_dtype_and_unit_modulus():
    f = reference.precompute_freqs_cis(8, 10)
    assert f.shape == (10, 4) and f.dtype == torch.complex64
    torch.testing.assert_close(f.abs(), torch.ones(10, 4), rtol=0, atol=1e-6)
    assert torch.equal(f[0], torch.ones(4, dtype=torch.complex64))


def test_apply_scaling_keeps_fast_divides_slow():
    freqs = 1.0 / (500000.0 ** (torch.arange(0, 32, 2)[:16].float() / 32))
    scaled = reference.apply_scaling(freqs)
    wavelen = 2 * math.pi / freqs
    assert torch.equal(scaled[wavelen < 2048], freqs[wavelen < 2048])
    torch.testing.assert_close(scaled[wavelen > 8192], freqs[wavelen > 8192] / 8)


def test_meta_equals_transformers_after_the_layout_permutation():
    g = torch.Generator().manual_seed(0)
    xq, xk = torch.randn(1, 6, 2, 32, generator=g), torch.randn(1, 6, 2, 32,
                                                                generator=g)
    freqs_cis = reference.precompute_freqs_cis(32, 64)[10:16]
    mq, mk = reference.apply_rotary_emb(xq, xk, freqs_cis)
    config = llama.LlamaConfig(hidden_size=64, num_attention_heads=2, head_dim=32)
    cos, sin = llama.LlamaRotaryEmbedding(config)(xq, torch.arange(10, 16)[None])
    hq, hk = llama.apply_rotary_pos_emb(
        to_half_split(xq.transpose(1, 2)), to_half_split(xk.transpose(1, 2)), cos, sin
    )
    torch.testing.assert_close(hq, to_half_split(mq.transpose(1, 2)), rtol=0, atol=1e-5)
    torch.testing.assert_close(hk, to_half_split(mk.transpose(1, 2)), rtol=0, atol=1e-5)
    # without the permutation the two codes rotate different pairs
    wrong, _ = llama.apply_rotary_pos_emb(xq.transpose(1, 2), xk.transpose(1, 2), cos,
                                          sin)
    assert (wrong - mq.transpose(1, 2)).abs().max() > 0.1


def test_reshape_for_broadcast_rejects_a_wrong_table():
    with pytest.raises(AssertionError):
        reference.reshape_for_broadcast(torch.ones(5, 4), torch.ones(1, 6, 2, 4))
