"""Tests for ropelab.positions: padding, packing and re-rotated keys (chapter 12)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import (
    apply_rotary,
    cos_sin,
    inv_freq,
    packed_positions,
    positions_from_mask,
    rerotate_keys,
)

F64 = torch.float64


# --- positions_from_mask ---------------------------------------------------


def test_mask_by_hand():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert positions_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]]
    # right and interior padding: real tokens count only real tokens before them
    assert positions_from_mask(torch.tensor([1, 1, 0, 1, 0])).tolist() == [0, 1, 0, 2, 0]
    assert positions_from_mask(torch.tensor([[True, False, True]])).tolist() == [[0, 0, 1]]
    assert positions_from_mask(torch.tensor([0, 1, 1], dtype=torch.int32)).dtype == torch.int64


def transformers_position_ids(mask):
    """transformers' own rule, called from its generation utilities (no model needed)."""
    from transformers.generation.utils import GenerationMixin

    ids = torch.zeros_like(mask)
    return GenerationMixin._prepare_position_ids_for_generation(None, ids, {"attention_mask": mask})




@given(st.lists(st.tuples(st.integers(0, 10), st.integers(1, 10)), min_size=1, max_size=4))
def test_mask_equals_transformers_and_unpadded(rows):
    """Left-padded rows: transformers' positions, and each real token's index in its unpadded row."""
    width = max(p + n for p, n in rows)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, (pad, n) in enumerate(rows):
        mask[i, width - n:] = 1
    pos = positions_from_mask(mask)
    assert torch.equal(pos, transformers_position_ids(mask))
    for i, (_, n) in enumerate(rows):
        assert pos[i, width - n:].tolist() == list(range(n))


@given(st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=16), min_size=1, max_size=3)
       .filter(lambda r: len({len(x) for x in r}) == 1))
def test_any_mask_equals_transformers(rows):
    mask = torch.tensor(rows)
    assert torch.equal(positions_from_mask(mask), transformers_position_ids(mask))


def test_one_implementation_for_chapters_05_and_12():
    import ropelab.cache

    assert ropelab.cache.positions_from_mask is positions_from_mask


def test_mask_errors():
    with pytest.raises(ValueError, match=r"only 0 and 1, got values \[1, 2\]"):
        positions_from_mask(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="integer or bool dtype.*additive mask"):
        positions_from_mask(torch.tensor([[0.0, float("-inf")]]))
    with pytest.raises(TypeError, match="attention_mask must be a torch.Tensor, got list"):
        positions_from_mask([[1, 1]])
    with pytest.raises(ValueError, match=r"shape \(\.\.\., seq\), got shape \(\)"):
        positions_from_mask(torch.tensor(1))


# --- packed_positions ------------------------------------------------------


def test_packed_by_hand():
    assert packed_positions([0, 3, 7, 10]).tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2]
    assert packed_positions(torch.tensor([0, 1], dtype=torch.int32)).tolist() == [0]
    assert packed_positions(torch.tensor([0, 4])).dtype == torch.int64


@given(st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_packed_restarts_and_round_trips(lengths):
    cu = torch.tensor([0] + lengths).cumsum(0)
    pos = packed_positions(cu)
    assert pos.tolist() == [i for n in lengths for i in range(n)]
    # transformers' flash-attention helper reads cu_seqlens back from the positions
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    (cu_q, cu_k), _ = prepare_fa_kwargs_from_position_ids(pos[None])
    assert cu_q.tolist() == cu.tolist() == cu_k.tolist()


def test_packed_equals_transformers_collator():
    from transformers import DataCollatorWithFlattening

    docs = [[5, 6, 7], [8, 9, 10, 11], [12, 13, 14]]
    batch = DataCollatorWithFlattening()([{"input_ids": d} for d in docs], return_tensors="pt")
    assert torch.equal(batch["position_ids"][0], packed_positions([0, 3, 7, 10]))


def test_packed_errors():
    with pytest.raises(ValueError, match="must start at 0, got 2"):
        packed_positions([2, 5])
    with pytest.raises(ValueError, match="strictly increasing.*got 5 then 4 at entries 1 and 2"):
        packed_positions([0, 5, 4])
    with pytest.raises(ValueError, match="strictly increasing.*got 3 then 3"):
        packed_positions([0, 3, 3, 6])
    with pytest.raises(ValueError, match="at least two entries"):
        packed_positions([0])
    with pytest.raises(ValueError, match="1-D"):
        packed_positions(torch.tensor([[0, 3]]))
    with pytest.raises(TypeError, match="cu_seqlens must have an integer dtype"):
        packed_positions(torch.tensor([0.0, 3.0]))


# --- rerotate_keys ---------------------------------------------------------


def encode(k, positions, freq, layout):
    return apply_rotary(k, *cos_sin(positions, freq, layout=layout, dtype=k.dtype), layout=layout)


layouts = st.sampled_from(["half_split", "interleaved"])


def test_rerotate_by_hand():
    # one pair, θ = 1: the key (1, 0) moved by δ tokens turns by δ radians to (cos δ, sin δ)
    freq = torch.tensor([1.0], dtype=F64)
    k = torch.tensor([[1.0, 0.0]], dtype=F64)
    for delta in (1, -3, 7):
        d = torch.tensor(float(delta), dtype=F64)
        want = torch.stack((d.cos(), d.sin()))[None]
        assert torch.allclose(rerotate_keys(k, delta, freq), want, atol=1e-15)
        assert torch.allclose(rerotate_keys(k, delta, freq, layout="interleaved"), want, atol=1e-15)
    assert torch.equal(rerotate_keys(k, 0, freq), k)


@given(st.integers(-300, 300), st.integers(-300, 300), st.integers(0, 2**31 - 1), layouts)
def test_rerotate_composes(a, b, seed, layout):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(2, 5, 16, dtype=F64, generator=g)
    f = inv_freq(16, dtype=F64)
    twice = rerotate_keys(rerotate_keys(k, a, f, layout=layout), b, f, layout=layout)
    torch.testing.assert_close(twice, rerotate_keys(k, a + b, f, layout=layout), atol=1e-12, rtol=0)
    back = rerotate_keys(rerotate_keys(k, a, f, layout=layout), -a, f, layout=layout)
    torch.testing.assert_close(back, k, atol=1e-12, rtol=0)


@given(st.integers(0, 500), st.integers(-500, 500), st.integers(0, 2**31 - 1), layouts)
def test_rerotate_equals_reencoding(p, delta, seed, layout):
    """R(δ)R(p)k = R(p+δ)k, against an encoding from scratch with cos_sin at p + δ."""
    delta = max(delta, -p)  # positions stay >= 0 for the re-encoding
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(3, 4, 32, dtype=F64, generator=g)
    f = inv_freq(32, 500000.0, dtype=F64)
    pos = torch.arange(p, p + 4)
    moved = rerotate_keys(encode(k, pos, f, layout), delta, f, layout=layout)
    torch.testing.assert_close(moved, encode(k, pos + delta, f, layout), atol=1e-11, rtol=0)


def test_rerotate_float32_close_to_reencoding_and_keeps_dtype():
    torch.manual_seed(0)
    k = torch.randn(2, 8, 64)
    f = inv_freq(64)
    pos = torch.arange(100, 108)
    out = rerotate_keys(encode(k, pos, f, "half_split"), -96, f)
    assert out.dtype == torch.float32 and out.shape == k.shape
    torch.testing.assert_close(out, encode(k, pos - 96, f, "half_split"), atol=2e-5, rtol=0)
    half = rerotate_keys(k.to(torch.bfloat16), 5, f)
    assert half.dtype == torch.bfloat16


def test_rerotate_per_token_delta():
    """A tensor delta gives each token its own shift (here a packed row's)."""
    torch.manual_seed(0)
    k = torch.randn(10, 2, 8, dtype=F64)  # (tokens, heads, dim): delta (tokens, 1) per token
    f = inv_freq(8, dtype=F64)
    delta = packed_positions([0, 3, 7, 10])[:, None]
    by_token = torch.stack([rerotate_keys(k[i], int(delta[i]), f) for i in range(10)])
    torch.testing.assert_close(rerotate_keys(k, delta, f), by_token, atol=1e-14, rtol=0)


def test_rerotate_errors():
    k = torch.randn(4, 8)
    f = inv_freq(8)
    with pytest.raises(TypeError, match="delta must be an integer shift in tokens, got 1.5"):
        rerotate_keys(k, 1.5, f)
    with pytest.raises(TypeError, match="delta must be an integer shift"):
        rerotate_keys(k, 2.0, f)
    with pytest.raises(TypeError, match="delta must be an integer"):
        rerotate_keys(k, torch.tensor([1.0]), f)
    with pytest.raises(TypeError, match="delta must be integers, got bool"):
        rerotate_keys(k, True, f)
    with pytest.raises(ValueError, match="inv_freq has 8 frequencies, so dim = 16"):
        rerotate_keys(k, 1, inv_freq(16))
    with pytest.raises(ValueError, match=r"delta of shape \(3,\) does not broadcast"):
        rerotate_keys(k, torch.tensor([1, 2, 3]), f)
    with pytest.raises(ValueError, match="layout must be one of"):
        rerotate_keys(k, 1, f, layout="neox")
