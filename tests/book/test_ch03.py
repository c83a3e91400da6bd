"""ropelab.book.ch03: Meta's and transformers' RoPE on ropelab's layout, the matrix of a
rotation, and the traffic table, against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from ropelab import to_half_split
from ropelab.book import ch03

pytest.importorskip("transformers")


def test_meta_rope_turns_pair_j_by_m_theta_j():
    # d = 4, base 10,000: θ = (1, 0.01); x = (1, 0, 1, 0) at m = 3
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    got = ch03.meta_rope(x, [3])
    want = torch.tensor([[math.cos(3), math.sin(3), math.cos(0.03), math.sin(0.03)]])
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert torch.equal(ch03.meta_rope(x, [0]), x)


def test_hf_rope_is_meta_rope_in_the_other_layout():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8)
    pos = torch.arange(7, 12)
    torch.testing.assert_close(ch03.hf_rope(to_half_split(x), pos),
                               to_half_split(ch03.meta_rope(x, pos)), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="positions"):
        ch03.hf_rope(x, torch.arange(4))


def test_rotation_matrix_of_meta_is_block_diagonal():
    r = ch03.rotation_matrix_of(ch03.meta_rope, 4, 2)
    c0, s0, c1, s1 = math.cos(2), math.sin(2), math.cos(0.02), math.sin(0.02)
    want = torch.tensor([[c0, -s0, 0, 0], [s0, c0, 0, 0],
                         [0, 0, c1, -s1], [0, 0, s1, c1]])
    torch.testing.assert_close(r, want, rtol=0, atol=1e-6)


def test_traffic_rows_count_one_floor_for_the_complex_product():
    rows = ch03.traffic_rows(seq=16, heads=2, d=8)
    floors = {name.split(",")[0]: f for name, f, _ in rows}
    assert floors["Meta"] == 1.0  # read x once, write the result once
    assert floors["transformers"] >= 4 and floors["interleaved"] >= 4


def test_reference_solution_is_the_conversion_reshape():
    from ropelab.book.solutions import ch03 as solutions

    for d in (2, 8, 128):
        y = torch.arange(d)
        want = y.view(d // 2, 2).T.flatten()  # pairs as rows, then first members first
        assert y[solutions.half_split_index(d)].tolist() == want.tolist()
