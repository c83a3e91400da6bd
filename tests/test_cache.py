"""Tests for ropelab.cache.RotaryEmbedding: the cached module, offsets, per-row positions, dtype."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import RotaryEmbedding, apply_rotary, cos_sin, inv_freq

F64 = torch.float64
LAYOUTS = ["half_split", "interleaved"]


def qk(batch=2, heads=4, seq=7, dim=16, dtype=torch.float32, seed=0, kv_heads=None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq, dim, generator=g).to(dtype)
    k = torch.randn(batch, kv_heads or heads, seq, dim, generator=g).to(dtype)
    return q, k


@pytest.mark.parametrize("layout", LAYOUTS)
def test_default_positions_equal_the_functional_path(layout):
    rope = RotaryEmbedding(16, layout=layout)
    q, k = qk()
    cos, sin = cos_sin(torch.arange(7), inv_freq(16).double(), layout=layout)
    rq, rk = rope(q, k)
    assert torch.equal(rq, apply_rotary(q, cos, sin, layout=layout))
    assert torch.equal(rk, apply_rotary(k, cos, sin, layout=layout))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_offset_equals_slice_of_the_full_sequence(layout):
    rope = RotaryEmbedding(16, layout=layout)
    q, k = qk(seq=10)
    full_q, full_k = rope(q, k)
    step_q, step_k = rope(q[..., 7:, :], k[..., 7:, :], offset=7)
    assert torch.equal(step_q, full_q[..., 7:, :]) and torch.equal(step_k, full_k[..., 7:, :])


def test_kv_cache_decoding_gives_the_prefill_scores():
    rope = RotaryEmbedding(16)
    q, k = qk(seq=9, dtype=F64)
    full_q, full_k = rope(q, k)
    full = full_q @ full_k.transpose(-1, -2)
    cache = []
    for t in range(9):  # keys rotated once when they enter the cache
        step_q, step_k = rope(q[..., t:t + 1, :], k[..., t:t + 1, :], offset=t)
        cache.append(step_k)
        row = step_q @ torch.cat(cache, dim=-2).transpose(-1, -2)
        torch.testing.assert_close(row[..., 0, :], full[..., t, : t + 1], rtol=0, atol=1e-12)
    # the offset mistake: restarting at position 0 each step changes the scores
    wrong_q, _ = rope(q[..., 8:, :], k[..., 8:, :])
    assert (wrong_q @ full_k.transpose(-1, -2) - full[..., 8:, :]).abs().max() > 0.1


def test_per_row_positions_for_a_left_padded_batch():
    rope = RotaryEmbedding(16)
    q, k = qk(batch=2)
    positions = torch.tensor([[0, 0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6]])
    rq, rk = rope(q, k, positions)
    for b in range(2):
        eq, ek = rope(q[b:b + 1], k[b:b + 1], positions[b])
        assert torch.equal(rq[b:b + 1], eq) and torch.equal(rk[b:b + 1], ek)


def test_grouped_query_attention_shapes():
    rope = RotaryEmbedding(16)
    q, k = qk(heads=8, kv_heads=2)
    rq, rk = rope(q, k, offset=3)
    assert rq.shape == q.shape and rk.shape == k.shape


def test_grows_on_demand_and_never_recomputes():
    rope = RotaryEmbedding(16, max_position=8)
    assert rope.capacity == 8
    table = rope.cos_cached
    q, k = qk(seq=8)
    rope(q, k)
    assert rope.cos_cached is table  # within capacity: nothing rebuilt
    rope(q, k, offset=5)  # needs positions up to 12
    assert rope.capacity == 16
    grown = rope.cos_cached
    torch.testing.assert_close(grown[:8], table, rtol=0, atol=0)
    rope(q[..., :1, :], k[..., :1, :], offset=15)
    assert rope.cos_cached is grown
    rope(q[..., :1, :], k[..., :1, :], offset=1000)
    assert rope.capacity == 1024


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, F64])
def test_returns_input_dtype_and_keeps_float32_tables(dtype):
    rope = RotaryEmbedding(16)
    q, k = qk(dtype=dtype)
    rq, rk = rope(q, k)
    assert rq.dtype == dtype and rk.dtype == dtype
    assert rope.cos_cached.dtype == torch.float32
    rope = rope.to(torch.bfloat16)
    assert rope.cos_cached.dtype == torch.float32 and rope.inv_freq.dtype == torch.float32


def _exact_cos_sin(pos, theta32):
    """cos and sin of the exact angles m·θ32, with mpmath at 50 digits (an independent reference)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    rows_c, rows_s = [], []
    for m in pos.tolist():
        angles = [mpmath.mpf(m) * mpmath.mpf(float(t)) for t in theta32.tolist()]
        rows_c.append([float(mpmath.cos(a)) for a in angles])
        rows_s.append([float(mpmath.sin(a)) for a in angles])
    return torch.tensor(rows_c, dtype=F64), torch.tensor(rows_s, dtype=F64)


@pytest.mark.parametrize("base, positions", [
    (10000.0, [0, 1, 2047, 32767]),
    (500000.0, [100_000, 100_001, 999_999]),
])
def test_tables_are_cos_sin_of_the_exact_product_of_the_float32_frequencies(base, positions):
    dim = 64
    pos = torch.tensor(positions)
    rope = RotaryEmbedding(dim, base, max_position=1)
    cos, sin = rope.tables(pos)
    theta32 = inv_freq(dim, base)
    ref_cos, ref_sin = _exact_cos_sin(pos, theta32)
    for got, ref in ((cos, ref_cos), (sin, ref_sin)):
        ref = torch.cat((ref, ref), dim=-1)
        # one float32 rounding of a value in [-1, 1]: |err| <= 2^-25 (+ float64 cos/sin error)
        assert float((got.double() - ref).abs().max()) <= 2.0**-25 + 1e-15
    # float64 θ is another frequency: its angles are off by m·(θ64 - θ32), far above the
    # tables' rounding at large positions, so a table built from it fails the bound above
    far_cos64, _ = cos_sin(pos[-1:], inv_freq(dim, base, dtype=F64), dtype=F64)
    assert float((far_cos64 - torch.cat((ref_cos, ref_cos), -1)[-1:]).abs().max()) > 1e-5


def test_bfloat16_tables_at_position_100000_are_within_bfloat16_rounding():
    dim, base = 128, 500000.0
    rope = RotaryEmbedding(dim, base)
    pos = torch.arange(100_000, 100_016)
    cos, sin = rope.tables(pos)
    ref_cos, ref_sin = _exact_cos_sin(pos, inv_freq(dim, base))
    for got, ref in ((cos, ref_cos), (sin, ref_sin)):
        ref = torch.cat((ref, ref), dim=-1)
        got16 = got.bfloat16().double()
        # round-to-nearest in bfloat16 (8 significant bits): |err| <= 2^-9 * 2^floor(log2|ref|)
        half_ulp = 2.0 ** (torch.floor(torch.log2(ref.abs().clamp_min(2**-60))) - 8)
        assert bool(((got16 - ref).abs() <= half_ulp + 2**-24).all())
    # float32 angles, as transformers computes them, are not that precise at this position
    cos32, _ = cos_sin(pos, inv_freq(dim, base), dtype=torch.float32)
    assert float((cos32.double() - torch.cat((ref_cos, ref_cos), -1)).abs().max()) > 1e-3


def test_scaling_dict_is_checked():
    with pytest.raises(ValueError, match="unknown rope_type 'ntk'"):
        RotaryEmbedding(16, scaling={"rope_type": "ntk", "factor": 2.0})
    with pytest.raises(ValueError, match=r"'linear' needs \['factor'\]"):
        RotaryEmbedding(16, scaling={"rope_type": "linear"})
    plain, default = RotaryEmbedding(16), RotaryEmbedding(16, scaling={"rope_type": "default"})
    assert torch.equal(plain.cos_cached, default.cos_cached)


def test_partial_rotary():
    rope = RotaryEmbedding(8)
    q, k = qk(dim=12)
    rq, rk = rope(q, k)
    assert torch.equal(rq[..., 8:], q[..., 8:])
    full_q, _ = RotaryEmbedding(8)(q[..., :8].contiguous(), k[..., :8].contiguous())
    assert torch.equal(rq[..., :8], full_q)


def test_errors():
    rope = RotaryEmbedding(16)
    q, k = qk()
    with pytest.raises(ValueError, match=r"positions must have shape \(seq,\) or \(batch, seq\) with seq=7, got \(5,\)"):
        rope(q, k, torch.arange(5))
    with pytest.raises(ValueError, match="q and k must have the same seq length"):
        rope(q, k[..., :3, :])
    with pytest.raises(ValueError, match="offset must be a non-negative int, got -1"):
        rope(q, k, offset=-1)
    with pytest.raises(TypeError, match="integer dtype"):
        rope(q, k, torch.arange(7.0))
    with pytest.raises(ValueError, match="per-row positions of shape \\(3, 7\\)"):
        rope(q, k, torch.zeros(3, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="q has head dim 8, fewer than the 16 rotated channels"):
        rope(q[..., :8], k)
    with pytest.raises(ValueError, match="dim must be even"):
        RotaryEmbedding(15)
    with pytest.raises(ValueError, match="base must be"):
        RotaryEmbedding(16, base=1.0)
    with pytest.raises(ValueError, match="layout must be one of"):
        RotaryEmbedding(16, layout="neox")


@given(m=st.integers(0, 5000), n=st.integers(0, 5000), shift=st.integers(0, 5000), layout=st.sampled_from(LAYOUTS))
def test_module_scores_depend_only_on_distance(m, n, shift, layout):
    rope = RotaryEmbedding(16, layout=layout, max_position=16)
    q, k = qk(batch=1, heads=1, seq=1, dtype=F64)
    a = rope(q, k, torch.tensor([m]))[0] * rope(q, k, torch.tensor([n]))[1]
    b = rope(q, k, torch.tensor([m + shift]))[0] * rope(q, k, torch.tensor([n + shift]))[1]
    # tables are float32: the score is exact to float32 rounding of cos/sin
    assert abs(float(a.sum() - b.sum())) < 1e-5 * float(q.norm() * k.norm())


# Agreement with transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb ---------------

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("position_ids", [
    torch.arange(7)[None],
    torch.arange(7)[None] + 2000,
    torch.tensor([[0, 0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5, 6]]),
])
def test_matches_transformers_llama(dtype, position_ids):
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    hf = LlamaRotaryEmbedding(config)
    q, k = qk(batch=position_ids.shape[0], dtype=dtype)
    hf_cos, hf_sin = hf(q, position_ids)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    rope = RotaryEmbedding(16)
    if position_ids.shape[0] == 1:
        rq, rk = rope(q, k, offset=int(position_ids[0, 0]))
    else:
        rq, rk = rope(q, k, position_ids)
    # same float32 θ; transformers rounds the product m·θ to float32, ropelab keeps it exact:
    # the tables differ by at most that rounding, half an ulp of m·θ <= m·2^-24 (plus cos's).
    bound = (int(position_ids.max()) + 1) * 2.0**-24 + 2.0**-24
    if dtype == torch.float32:
        cos, _ = rope.tables(position_ids)
        assert float((cos - hf_cos).abs().max()) <= bound
        atol = 2 * bound * float(q.abs().max())
        torch.testing.assert_close(rq, hf_q, rtol=0, atol=atol)
        torch.testing.assert_close(rk, hf_k, rtol=0, atol=atol)
    else:  # both round products of bfloat16 values; one bfloat16 ulp of the largest output
        torch.testing.assert_close(rq, hf_q, rtol=2**-7, atol=2**-7 * float(q.abs().max()))
        torch.testing.assert_close(rk, hf_k, rtol=2**-7, atol=2**-7 * float(k.abs().max()))


# --- chapter 05 additions ---

from ropelab.cache import positions_from_mask, table_bytes  # noqa: E402


def test_table_bytes_worked_examples():
    assert table_bytes(128, 32768) == 2 * 32768 * 128 * 4 == 32 * 2**20  # 32 MiB in float32
    assert table_bytes(128, 131072, torch.bfloat16) == 64 * 2**20
    assert table_bytes(128, 131072, torch.float32) == 128 * 2**20
    assert table_bytes(128, 4096, torch.complex64, n_tables=1) == 4096 * 128 * 8
    assert table_bytes(16, 0) == 0


@pytest.mark.parametrize("n", [1, 8, 1000])
def test_table_bytes_equals_the_module_buffers(n):
    rope = RotaryEmbedding(16, max_position=n)
    assert rope.cos_cached.nbytes + rope.sin_cached.nbytes == table_bytes(16, n, rope.cos_cached.dtype)


def test_table_bytes_errors():
    with pytest.raises(ValueError, match="dim must be even"):
        table_bytes(15, 8)
    with pytest.raises(ValueError, match="n_positions must be a non-negative int, got -1"):
        table_bytes(16, -1)
    with pytest.raises(ValueError, match="n_tables must be a non-negative int, got 2.0"):
        table_bytes(16, 8, n_tables=2.0)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"):
        table_bytes(16, 8, "float32")


def test_positions_from_mask_worked_example():
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    assert positions_from_mask(mask).tolist() == [[0, 0, 0, 0, 1, 2], [0, 1, 2, 3, 4, 5]]
    assert positions_from_mask(mask.bool()).dtype == torch.int64
    # right padding: padded slots get 0, as in transformers' generate
    assert positions_from_mask(torch.tensor([1, 1, 1, 0, 0])).tolist() == [0, 1, 2, 0, 0]


@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=4))
def test_positions_from_mask_counts_real_tokens_from_zero(rows):
    seq = 12
    mask = torch.tensor([[0] * pad + [1] * n + [0] * (seq - pad - n) for pad, n in rows])
    pos = positions_from_mask(mask)
    for (pad, n), row in zip(rows, pos):
        assert row[pad:pad + n].tolist() == list(range(n))  # whatever padding precedes them
    assert bool((pos[mask == 0] == 0).all())
    # left padding only: the same as clamping cumsum - 1 at 0
    left = torch.tensor([[0] * pad + [1] * (seq - pad) for pad, _ in rows])
    assert torch.equal(positions_from_mask(left), (left.cumsum(-1) - 1).clamp(min=0))


def test_positions_from_mask_feed_the_module_like_separate_prompts():
    rope = RotaryEmbedding(16)
    q, k = qk(batch=2, seq=6)
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    rq, rk = rope(q, k, positions_from_mask(mask))
    alone_q, alone_k = rope(q[:1, :, 3:], k[:1, :, 3:])
    assert torch.equal(rq[:1, :, 3:], alone_q) and torch.equal(rk[:1, :, 3:], alone_k)


def test_positions_from_mask_errors():
    with pytest.raises(TypeError, match="integer or bool dtype"):
        positions_from_mask(torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"only 0 and 1, got values \[0, 1, 2\]"):
        positions_from_mask(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        positions_from_mask(torch.tensor(1))
    with pytest.raises(TypeError, match="torch.Tensor"):
        positions_from_mask([1, 1, 0])
