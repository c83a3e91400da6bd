"""Tests for ropelab.pairing: layout permutations and checkpoint conversion (chapter 03)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ropelab
from ropelab import (
    apply_rotary,
    cos_sin,
    inv_freq,
    permute_qk_weight,
    to_half_split,
    to_interleaved,
    unpermute_qk_weight,
)
from ropelab.pairing import half_split_permutation

F64 = torch.float64


def test_by_hand():
    x = torch.tensor([0.0, 1, 2, 3, 4, 5, 6, 7])
    assert to_half_split(x).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert to_interleaved(x).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert half_split_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert half_split_permutation(8).argsort().tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_permute_weight_by_hand():
    # one head of dim 4: Meta rows (r0, r1, r2, r3) pair (r0, r1), (r2, r3) -> HF order (r0, r2, r1, r3)
    w = torch.arange(8.0).reshape(4, 2)
    assert permute_qk_weight(w, 1).tolist() == [[0, 1], [4, 5], [2, 3], [6, 7]]
    assert permute_qk_weight(torch.arange(8.0), 2, bias=True).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


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
    # a 1-D tensor is a bias only when the caller says so: a flattened matrix is refused
    with pytest.raises(ValueError, match=r"2-D projection .* got shape \(64,\); to permute a bias, pass bias=True"):
        permute_qk_weight(torch.randn(64), 2)
    with pytest.raises(ValueError, match=r"got shape \(64,\); to permute a bias"):
        unpermute_qk_weight(torch.randn(64), 2)
    with pytest.raises(ValueError, match=r"with bias=True, weight must be a 1-D bias .* got shape \(8, 8\)"):
        permute_qk_weight(torch.randn(8, 8), 2, bias=True)
    b = torch.randn(16)
    assert torch.equal(unpermute_qk_weight(permute_qk_weight(b, 2, bias=True), 2, bias=True), b)
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


def _transformers_permute(w, n_heads, dim1, dim2):
    # transformers' convert_llama_weights_to_hf.py permute, verbatim
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


@pytest.mark.parametrize("n_heads,head_dim,hidden", [(1, 2, 3), (4, 16, 64), (8, 128, 32)])
def test_permute_qk_weight_matches_transformers_conversion(n_heads, head_dim, hidden):
    w = torch.randn(n_heads * head_dim, hidden, generator=torch.Generator().manual_seed(1))
    expected = _transformers_permute(w, n_heads, n_heads * head_dim, hidden)
    assert torch.equal(ropelab.permute_qk_weight(w, n_heads), expected)


@given(half=st.integers(1, 32), seq=st.integers(1, 6), offset=st.integers(0, 5000), seed=st.integers(0, 2**16))
def test_rope_commutes_with_the_layout_permutation(half, seq, offset, seed):
    """to_half_split(RoPE_int(x)) == RoPE_hs(to_half_split(x))  (eq. pair-equivariance)."""
    dim = 2 * half
    x = torch.randn(2, seq, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    pos = torch.arange(offset, offset + seq)
    freqs = ropelab.inv_freq(dim, dtype=torch.float64)
    ci, si = ropelab.cos_sin(pos, freqs, layout="interleaved", dtype=torch.float64)
    ch, sh = ropelab.cos_sin(pos, freqs, layout="half_split", dtype=torch.float64)
    lhs = ropelab.to_half_split(ropelab.apply_rotary(x, ci, si, layout="interleaved"))
    rhs = ropelab.apply_rotary(ropelab.to_half_split(x), ch, sh, layout="half_split")
    torch.testing.assert_close(lhs, rhs, rtol=0, atol=1e-12)


def _scores(x, wq, wk, n_q, n_kv, head_dim, rope):
    q = (x @ wq.T).unflatten(-1, (n_q, head_dim)).transpose(0, 1)
    k = (x @ wk.T).unflatten(-1, (n_kv, head_dim)).transpose(0, 1)
    q, k = rope(q), rope(k)
    k = k.repeat_interleave(n_q // n_kv, dim=0)  # grouped-query attention
    return q @ k.transpose(-1, -2)


def _meta_and_hf_setup(n_q=4, n_kv=2, head_dim=16, hidden=32, seq=9):
    g = torch.Generator().manual_seed(3)
    wq = torch.randn(n_q * head_dim, hidden, generator=g, dtype=torch.float64)
    wk = torch.randn(n_kv * head_dim, hidden, generator=g, dtype=torch.float64)
    x = torch.randn(seq, hidden, generator=g, dtype=torch.float64)
    pos = torch.arange(seq)
    freqs = ropelab.inv_freq(head_dim, dtype=torch.float64)
    meta = lambda t: ropelab.apply_rotary_complex(t, pos, freqs)  # noqa: E731  Meta's Euler form
    ref = _scores(x, wq, wk, n_q, n_kv, head_dim, meta)
    return wq, wk, x, pos, freqs, ref


def test_converted_gqa_checkpoint_gives_meta_scores():
    n_q, n_kv, head_dim = 4, 2, 16
    wq, wk, x, pos, freqs, ref = _meta_and_hf_setup(n_q, n_kv, head_dim)
    cos, sin = ropelab.cos_sin(pos, freqs, dtype=torch.float64)
    hs = lambda t: ropelab.apply_rotary(t, cos, sin)  # noqa: E731
    got = _scores(x, ropelab.permute_qk_weight(wq, n_q), ropelab.permute_qk_weight(wk, n_kv), n_q, n_kv, head_dim, hs)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-10)
    # k permuted with the number of query heads instead: accepted, and wrong
    bad = _scores(x, ropelab.permute_qk_weight(wq, n_q), ropelab.permute_qk_weight(wk, n_q), n_q, n_kv, head_dim, hs)
    assert (bad - ref).abs().max() > 1e-3


def test_converted_checkpoint_matches_transformers_rotary():
    modeling = pytest.importorskip("transformers.models.llama.modeling_llama")
    n_q, n_kv, head_dim = 4, 2, 16
    wq, wk, x, pos, freqs, ref = _meta_and_hf_setup(n_q, n_kv, head_dim)
    emb = torch.cat((pos[:, None] * freqs, pos[:, None] * freqs), dim=-1)  # transformers' LlamaRotaryEmbedding
    cos, sin = emb.cos()[None], emb.sin()[None]

    def hf(t):
        out, _ = modeling.apply_rotary_pos_emb(t[None], t[None], cos, sin)
        return out[0]

    got = _scores(x, ropelab.permute_qk_weight(wq, n_q), ropelab.permute_qk_weight(wk, n_kv), n_q, n_kv, head_dim, hf)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-10)
    v = torch.randn(3, 8, dtype=torch.float64)
    assert torch.equal(modeling.rotate_half(v), ropelab.rotate_half(v))


def test_unconverted_checkpoint_differs_off_the_diagonal_only():
    n_q, n_kv, head_dim = 4, 2, 16
    wq, wk, x, pos, freqs, ref = _meta_and_hf_setup(n_q, n_kv, head_dim)
    cos, sin = ropelab.cos_sin(pos, freqs, dtype=torch.float64)
    wrong = _scores(x, wq, wk, n_q, n_kv, head_dim, lambda t: ropelab.apply_rotary(t, cos, sin))
    delta = wrong - ref
    torch.testing.assert_close(delta.diagonal(dim1=-2, dim2=-1), torch.zeros(n_q, x.shape[0], dtype=torch.float64), rtol=0, atol=1e-10)
    off = delta.masked_select(~torch.eye(x.shape[0], dtype=torch.bool))
    assert off.abs().max() > 0.1 * ref.abs().max()


def test_rotate_half_and_interleaved_twin_written_out():
    v = torch.arange(8.0)
    assert ropelab.rotate_interleaved(v).tolist() == [-1, 0, -3, 2, -5, 4, -7, 6]
    assert ropelab.rotate_half(v).tolist() == [-4, -5, -6, -7, 0, 1, 2, 3]
    # rotate_half is rotate_interleaved seen through P
    assert torch.equal(ropelab.to_half_split(ropelab.rotate_interleaved(v)), ropelab.rotate_half(ropelab.to_half_split(v)))
