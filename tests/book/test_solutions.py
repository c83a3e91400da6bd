"""Tests for ropelab.book.solutions: the exercises' reference solutions, against the library."""

import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import apply_rotary, cos_sin, inv_freq, packed_positions, positions_from_mask
from ropelab.book.solutions import ch12

F64 = torch.float64


def encode(k, positions, freq, layout):
    return apply_rotary(k, *cos_sin(positions, freq, layout=layout, dtype=k.dtype), layout=layout)


# --- chapter 12 -------------------------------------------------------------


@given(st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_cu_seqlens_from_positions_inverts_packed_positions(lengths):
    cu = torch.tensor([0] + lengths).cumsum(0)
    assert torch.equal(ch12.cu_seqlens_from_positions(packed_positions(cu)), cu)


def test_next_positions_continue_the_prompt():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert ch12.next_positions(mask).tolist() == [[2], [4]]
    grown = torch.cat((mask, torch.ones(2, 1, dtype=torch.long)), dim=1)
    assert torch.equal(ch12.next_positions(mask), positions_from_mask(grown)[:, -1:])


def test_evict_equals_encoding_the_kept_tokens_afresh():
    torch.manual_seed(0)
    raw = torch.randn(2, 20, 16, dtype=F64)
    f = inv_freq(16, dtype=F64)
    cache = encode(raw, torch.arange(20), f, "half_split")
    kept = torch.cat((raw[:, :4], raw[:, 14:]), dim=1)  # 4 sinks, a window of 6
    want = encode(kept, torch.arange(10), f, "half_split")
    torch.testing.assert_close(ch12.evict(cache, 4, 6, f), want, atol=1e-13, rtol=0)
    assert torch.equal(ch12.evict(cache[:, :8], 4, 6, f), cache[:, :8])
