"""Tests for ropelab.pairing: layout permutations and checkpoint conversion (chapter 03)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import (apply_rotary, cos_sin, inv_freq, permute_qk_weight, to_half_split, to_interleaved,
                     unpermute_qk_weight)
from ropelab.pairing import half_split_permutation

F64 = torch.float64


def test_by_hand():
    x = torch.tensor([0.0, 1, 2, 3, 4, 5, 6, 7])
    assert to_half_split(x).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert to_interleaved(x).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert half_split_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_permute_weight_by_hand():
    # one head of dim 4: Meta rows (r0, r1, r2, r3) pair (r0, r1), (r2, r3) -> HF order (r0, r2, r1, r3)
    w = torch.arange(8.0).reshape(4, 2)
    assert permute_qk_weight(w, 1).tolist() == [[0, 1], [4, 5], [2, 3], [6, 7]]
    assert permute_qk_weight(torch.arange(8.0), 2).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_permute_matches_the_transformers_conversion_formula():
    # convert_llama_weights_to_hf.permute, as written in transformers 4.x
    n_heads, dim1, dim2 = 4, 64, 48
    w = torch.randn(dim1, dim2)
    reference = w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)
    assert torch.equal(permute_qk_weight(w, n_heads), reference)


@pytest.mark.parametrize("rows, n_heads, text", [(30, 4, "rows / n_heads = 7.5"), (12, 4, "rows / n_heads = 3")])
def test_weight_not_divisible(rows, n_heads, text):
    with pytest.raises(ValueError, match=f"weight has {rows} rows.*n_heads={n_heads}.*{text}"):
        permute_qk_weight(torch.randn(rows, 8), n_heads)
    with pytest.raises(ValueError, match=f"weight has {rows} rows"):
        unpermute_qk_weight(torch.randn(rows, 8), n_heads)


def test_other_weight_errors():
    with pytest.raises(ValueError, match="n_heads must be positive, got 0"):
        permute_qk_weight(torch.randn(8, 8), 0)
    with pytest.raises(ValueError, match=r"got shape \(2, 8, 8\)"):
        permute_qk_weight(torch.randn(2, 8, 8), 2)
    with pytest.raises(ValueError, match=r"last axis must be even.*\(3, 5\)"):
        to_half_split(torch.randn(3, 5))
    with pytest.raises(ValueError, match="dim must be even"):
        half_split_permutation(5)


dims = st.integers(1, 64).map(lambda h: 2 * h)


@given(dim=dims, seed=st.integers(0, 2**31 - 1))
def test_round_trips(dim, seed):
    x = torch.randn(3, dim, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(to_interleaved(to_half_split(x)), x)
    assert torch.equal(to_half_split(to_interleaved(x)), x)
    assert torch.equal(to_half_split(x), x[..., half_split_permutation(dim)])


@given(n_heads=st.integers(1, 8), half=st.integers(1, 16), n_in=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
def test_weight_round_trip(n_heads, half, n_in, seed):
    w = torch.randn(n_heads * 2 * half, n_in, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(unpermute_qk_weight(permute_qk_weight(w, n_heads), n_heads), w)
    assert torch.equal(permute_qk_weight(unpermute_qk_weight(w, n_heads), n_heads), w)


def scores(x, wq, wk, n_heads, n_kv, layout):
    """(heads, seq, seq) attention logits of a tiny Meta-style attention with RoPE."""
    seq = x.shape[0]
    q = (x @ wq.T).view(seq, n_heads, -1).transpose(0, 1)
    k = (x @ wk.T).view(seq, n_kv, -1).transpose(0, 1).repeat_interleave(n_heads // n_kv, dim=0)
    cos, sin = cos_sin(torch.arange(seq), inv_freq(q.shape[-1], dtype=F64), layout=layout, dtype=F64)
    q, k = apply_rotary(q, cos, sin, layout=layout), apply_rotary(k, cos, sin, layout=layout)
    return q @ k.transpose(-1, -2)


@given(n_kv=st.sampled_from([1, 2, 4]), half=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_permuted_checkpoint_gives_the_same_scores(n_kv, half, seed):
    n_heads, hidden, seq = 4, 24, 6
    head_dim = 2 * half
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(seq, hidden, generator=g, dtype=F64)
    wq = torch.randn(n_heads * head_dim, hidden, generator=g, dtype=F64)
    wk = torch.randn(n_kv * head_dim, hidden, generator=g, dtype=F64)
    meta = scores(x, wq, wk, n_heads, n_kv, "interleaved")
    hf = scores(x, permute_qk_weight(wq, n_heads), permute_qk_weight(wk, n_kv), n_heads, n_kv, "half_split")
    torch.testing.assert_close(hf, meta, rtol=1e-10, atol=1e-10)


def test_unpermuted_checkpoint_gives_other_scores():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 64, generator=g, dtype=F64)
    wq, wk = torch.randn(64, 64, generator=g, dtype=F64), torch.randn(64, 64, generator=g, dtype=F64)
    meta = scores(x, wq, wk, 4, 4, "interleaved")
    wrong = scores(x, wq, wk, 4, 4, "half_split")
    assert float((wrong - meta).norm() / meta.norm()) > 0.1
