"""Tests for ropelab.book.ch06: chapter 06's numpy and mpmath references."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ropelab
from ropelab.book import ch06

F64 = torch.float64
LAYOUTS = ("half_split", "interleaved")


@pytest.mark.parametrize("layout", LAYOUTS)
@settings(max_examples=20, deadline=None)
@given(half=st.integers(1, 8), position=st.integers(0, 5000))
def test_rotate_numpy_matches_the_library(layout, half, position):
    g = torch.Generator().manual_seed(half)
    x = torch.randn(3, 2 * half, generator=g, dtype=F64)
    theta = ropelab.inv_freq(2 * half, 500.0, dtype=F64)
    cos, sin = ropelab.cos_sin(
        torch.tensor([position]), theta, layout=layout, dtype=F64
    )
    want = ropelab.apply_rotary(x, cos, sin, layout=layout)
    got = ch06.rotate_numpy(x, position, 500.0, layout)
    np.testing.assert_allclose(got, want.numpy(), atol=1e-9, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_score_numpy_is_the_rotated_dot_product(layout):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 16, generator=g, dtype=F64)
    rotated = ch06.rotate_numpy(q, 40, 100.0, layout) @ ch06.rotate_numpy(
        k, 15, 100.0, layout
    )
    score = ch06.score_numpy(q, k, [25], 100.0, layout)[0]
    assert score == pytest.approx(rotated, abs=1e-12)


def test_pairs_numpy_reads_the_layouts():
    x = np.arange(4.0)
    assert ch06.pairs_numpy(x, "half_split").tolist() == [0 + 2j, 1 + 3j]
    assert ch06.pairs_numpy(x, "interleaved").tolist() == [0 + 1j, 2 + 3j]
    with pytest.raises(ValueError, match="layout"):
        ch06.pairs_numpy(x, "blocks")


@pytest.mark.parametrize("dim", [4, 64, 128])
def test_bound_mpmath_at_distance_zero(dim):
    at_zero = float(ch06.bound_mpmath([0], dim)[0])
    assert at_zero == pytest.approx((dim / 2 + 1) / 2, abs=1e-15)


def test_bound_mpmath_closed_form_for_four_channels():
    theta1 = 100.0**-0.5
    for delta in (1, 3, 7, 30):
        want = 0.5 * (1 + 2 * abs(math.cos(delta * (1 - theta1) / 2)))
        got = float(ch06.bound_mpmath([delta], 4, 100.0)[0])
        assert got == pytest.approx(want, abs=1e-14)


def test_bound_mpmath_matches_the_library_elsewhere():
    got = ch06.bound_mpmath([2, 33, 999], 32, 10000.0)
    torch.testing.assert_close(got, ropelab.decay_bound([2, 33, 999], 32, 10000.0),
                               atol=1e-12, rtol=0)


def test_ratio_bands_reports_each_band():
    ratio = torch.arange(20, dtype=F64).reshape(2, 10) / 100
    lines = ch06.ratio_bands(ratio, [(0, 5), (5, 10)])
    assert len(lines) == 3 and "largest 0.190" in lines[0]
    assert "largest 0.140" in lines[1] and "largest 0.190" in lines[2]
