# --- chapter 02 additions ---
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ropelab
from ropelab.complex import relative_score


def _dot_of_rotated(q, k, m, n, inv_freq):
    """<f(q, m), f(k, n)> by rotating both vectors (q, k: (dim,))."""
    rq = ropelab.apply_rotary_complex(q[None], [m], inv_freq)[0]
    rk = ropelab.apply_rotary_complex(k[None], [n], inv_freq)[0]
    return (rq * rk).sum()


def test_relative_score_by_hand_one_pair():
    # q = k = 1 + 0i: the score is cos((m - n)θ).
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)
    theta = torch.tensor([0.5], dtype=torch.float64)
    got = relative_score(q, q, [-3, 0, 2], theta)
    want = torch.tensor([math.cos(-1.5), 1.0, math.cos(1.0)], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-15)


def test_relative_score_by_hand_quarter_turn():
    # q = 1 (i.e. (1, 0)), k = i (i.e. (0, 1)): Re[1 · (-i) · e^{iΔθ}] = sin(Δθ).
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)
    k = torch.tensor([0.0, 1.0], dtype=torch.float64)
    theta = torch.tensor([math.pi / 2], dtype=torch.float64)
    got = relative_score(q, k, [0, 1, 2, -1], theta)
    torch.testing.assert_close(got, torch.tensor([0.0, 1.0, 0.0, -1.0], dtype=torch.float64), rtol=0, atol=1e-15)


def test_relative_score_matches_rotated_dot_products():
    g = torch.Generator().manual_seed(2)
    d = 16
    f = ropelab.inv_freq(d, dtype=torch.float64)
    q = torch.randn(d, generator=g, dtype=torch.float64)
    k = torch.randn(d, generator=g, dtype=torch.float64)
    for m, n in [(0, 0), (5, 2), (2, 5), (100, 37), (7, 7)]:
        want = _dot_of_rotated(q, k, m, n, f)
        torch.testing.assert_close(relative_score(q, k, m - n, f), want, rtol=0, atol=1e-12)


def test_relative_score_shapes_and_dtype():
    f = ropelab.inv_freq(8)
    q = torch.randn(3, 1, 8)
    k = torch.randn(4, 8)
    assert relative_score(q, k, [0, 1, 2, 3, 4], f).shape == (3, 4, 5)
    assert relative_score(q, k, 3, f).shape == (3, 4)
    assert relative_score(q, k, torch.tensor([[1, 2], [3, 4]]), f).shape == (3, 4, 2, 2)
    assert relative_score(q, k, range(-2, 3), f).dtype == torch.float32
    q64, k64 = q.double(), k.double()
    assert relative_score(q64, k64, [1], ropelab.inv_freq(8, dtype=torch.float64)).dtype == torch.float64


def test_relative_score_zero_distance_is_dot_product():
    q, k = torch.randn(5, 32), torch.randn(5, 32)
    got = relative_score(q, k, 0, ropelab.inv_freq(32))
    torch.testing.assert_close(got, (q * k).sum(-1), rtol=0, atol=1e-5)


def test_relative_score_errors():
    f = ropelab.inv_freq(8)
    q = torch.randn(8)
    with pytest.raises(ValueError, match="dim"):
        relative_score(torch.randn(6), q, [0], f)
    with pytest.raises(TypeError, match="dtype"):
        relative_score(q, q.double(), [0], f)
    with pytest.raises(TypeError, match="integer"):
        relative_score(q, q, torch.tensor([0.5]), f)
    with pytest.raises(TypeError, match="bool"):
        relative_score(q, q, True, f)
    with pytest.raises(ValueError, match="broadcast"):
        relative_score(torch.randn(2, 8), torch.randn(3, 8), [0], f)


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(0, 5000),
    seed=st.integers(0, 2**31 - 1),
)
def test_relative_property_hypothesis(m, n, shift, seed):
    # <f(q, m), f(k, n)> = <f(q, m + s), f(k, n + s)> = relative_score(q, k, m - n) (eq. relative).
    g = torch.Generator().manual_seed(seed)
    d = 8
    f = ropelab.inv_freq(d, dtype=torch.float64)
    q = torch.randn(d, generator=g, dtype=torch.float64)
    k = torch.randn(d, generator=g, dtype=torch.float64)
    a = _dot_of_rotated(q, k, m, n, f)
    b = _dot_of_rotated(q, k, m + shift, n + shift, f)
    c = relative_score(q, k, m - n, f)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    torch.testing.assert_close(a, c, rtol=0, atol=1e-10)
