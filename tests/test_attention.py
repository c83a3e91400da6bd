"""Tests for ropelab.attention: scores under RoPE and the long-term decay bound (chapter 06)."""

import cmath
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import (
    apply_rotary,
    cos_sin,
    decay_bound,
    inv_freq,
    rotation_matrix,
    to_half_split,
)
from ropelab.attention import (
    is_toeplitz,
    pair_products,
    partial_phasor_sums,
    rope_scores,
    score_at_distance,
)

F64 = torch.float64
seeds = st.integers(0, 2**31 - 1)
halves = st.integers(1, 32)
bases = st.floats(2.0, 1e6, allow_nan=False)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# decay_bound: worked examples, by hand ---------------------------------------

@pytest.mark.parametrize("delta", [0, 1, 2, 5, 17, -3])
def test_decay_bound_dim4_by_hand(delta):
    # θ_0 = 1, θ_1 = 100^(-1/2) = 0.1.  S_1 = e^{iδ}, S_2 = e^{iδ} + e^{iδ·0.1}:
    # |S_1| = 1, |S_2| = |1 + e^{iδ(0.1 - 1)}| = 2|cos(0.45 δ)|; bound = (|S_1| + |S_2|) / 2.
    expected = (1 + 2 * abs(math.cos(0.45 * delta))) / 2
    assert decay_bound(delta, 4, 100.0).item() == pytest.approx(expected, abs=1e-14)


def test_partial_sums_dim4_by_hand():
    delta = 3
    s = partial_phasor_sums(delta, 4, 100.0)
    expected = [0, cmath.exp(3j), cmath.exp(3j) + cmath.exp(0.3j)]
    assert s.shape == (3,) and s.dtype == torch.complex128
    for got, want in zip(s.tolist(), expected):
        assert got == pytest.approx(want, abs=1e-14)


@pytest.mark.parametrize("dim", [2, 4, 16, 128, 256])
def test_decay_bound_at_zero_is_half_of_d_over_2_plus_1(dim):
    # S_j(0) = j, so (1/(d/2)) Σ_{j=1}^{d/2} j = (d/2 + 1)/2
    assert decay_bound(0, dim).item() == pytest.approx((dim // 2 + 1) / 2, rel=1e-15)


def test_decay_bound_matches_a_plain_python_loop():
    dim, base = 12, 1000.0
    for delta in (0, 1, 7, 250, -40):
        theta = [base ** (-2 * j / dim) for j in range(dim // 2)]
        sums = [abs(sum(cmath.exp(1j * delta * t) for t in theta[:j])) for j in range(1, dim // 2 + 1)]
        assert decay_bound(delta, dim, base).item() == pytest.approx(sum(sums) / (dim // 2), abs=1e-13)


def test_decay_bound_shapes_and_dtype():
    assert decay_bound(5, 8).shape == ()
    assert decay_bound(range(7), 8).shape == (7,)
    got = decay_bound(torch.arange(6).reshape(2, 3), 8)
    assert got.shape == (2, 3) and got.dtype == F64
    assert partial_phasor_sums(torch.arange(6).reshape(2, 3), 8).shape == (2, 3, 5)


def test_decay_bound_decays_on_average_for_the_paper_setting():
    b = decay_bound(torch.arange(256), 128)
    assert b[:32].mean() > b[32:64].mean() > b[128:].mean()
    assert b[250].item() < 0.25 * b[0].item()


@given(half=halves, base=bases, delta=st.integers(-10**6, 10**6))
def test_decay_bound_properties(half, base, delta):
    dim = 2 * half
    b = decay_bound(delta, dim, base).item()
    assert 0.0 <= b <= (half + 1) / 2 + 1e-9          # non-negative, at most its value at 0
    assert b == pytest.approx(decay_bound(-delta, dim, base).item(), abs=1e-9)  # even in δ
    s = partial_phasor_sums(delta, dim, base)
    assert s[0] == 0
    assert bool((s[1:].abs() <= torch.arange(1, half + 1, dtype=F64) + 1e-9).all())  # |S_j| ≤ j


# Scores: Toeplitz, closed form, relative property -----------------------------

@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
def test_rope_scores_by_the_dense_rotation_matrix(layout):
    q, k = randn(5, 8, seed=1), randn(4, 8, seed=2)
    pq, pk = torch.tensor([0, 3, 9, 10, 2]), torch.tensor([7, 1, 0, 4])
    theta = inv_freq(8, 500.0, dtype=F64)
    expected = torch.empty(5, 4, dtype=F64)
    for a in range(5):
        for b in range(4):
            qa = rotation_matrix(int(pq[a]), theta, layout=layout) @ q[a]
            kb = rotation_matrix(int(pk[b]), theta, layout=layout) @ k[b]
            expected[a, b] = qa @ kb
    got = rope_scores(q, k, pq, pk, base=500.0, layout=layout)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@given(half=halves, seed=seeds, base=bases, layout=st.sampled_from(["half_split", "interleaved"]))
def test_fixed_q_and_k_give_a_toeplitz_matrix_equal_to_the_closed_form(half, seed, base, layout):
    dim, length = 2 * half, 9
    q, k = randn(2, dim, seed=seed)
    scores = rope_scores(q.expand(length, dim), k.expand(length, dim), base=base, layout=layout)
    assert is_toeplitz(scores, tol=1e-9 * (1 + float(scores.abs().max())))
    m = torch.arange(length)
    closed = score_at_distance(q, k, m[:, None] - m[None, :], base=base, layout=layout)
    torch.testing.assert_close(scores, closed, rtol=0, atol=1e-9 * (1 + float(scores.abs().max())))


@given(seed=seeds, shift=st.integers(0, 10**5))
def test_shifting_every_position_leaves_scores_unchanged(seed, shift):
    q, k = randn(2, 3, 6, 16, seed=seed)
    pos = torch.arange(6)
    torch.testing.assert_close(rope_scores(q, k, pos + shift, pos + shift), rope_scores(q, k, pos, pos), rtol=0, atol=1e-8)


def test_relative_score_at_zero_is_the_plain_dot_product():
    q, k = randn(3, 10, seed=4), randn(3, 10, seed=5)
    torch.testing.assert_close(score_at_distance(q, k, 0), (q * k).sum(-1), rtol=0, atol=1e-13)
    assert score_at_distance(q, k, [0, 1, 2, -1]).shape == (3, 4)
    assert score_at_distance(q[0], k, torch.arange(6).reshape(2, 3)).shape == (3, 2, 3)


def test_relative_score_for_equal_pairs_is_a_sum_of_cosines():
    ones = torch.ones(8, dtype=F64)
    theta = inv_freq(8, dtype=F64)
    for delta in (0, 1, 30):
        expected = 2 * torch.cos(delta * theta).sum()
        assert score_at_distance(ones, ones, delta).item() == pytest.approx(expected.item(), abs=1e-13)


@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
def test_relative_score_matches_apply_rotary(layout):
    q, k = randn(16, seed=6), randn(16, seed=7)
    theta = inv_freq(16, dtype=F64)
    cm, sm = cos_sin([40], theta, layout=layout, dtype=F64)
    cn, sn = cos_sin([27], theta, layout=layout, dtype=F64)
    direct = apply_rotary(q[None], cm, sm, layout=layout) @ apply_rotary(k[None], cn, sn, layout=layout).T
    assert score_at_distance(q, k, 13, layout=layout).item() == pytest.approx(direct.item(), abs=1e-12)


def test_pair_products_layouts_agree_and_sum_to_the_dot_product():
    q, k = randn(4, 12, seed=8), randn(4, 12, seed=9)
    h = pair_products(q, k, layout="interleaved")
    assert h.shape == (4, 6) and h.dtype == torch.complex128
    torch.testing.assert_close(h.real.sum(-1), (q * k).sum(-1), rtol=0, atol=1e-13)
    torch.testing.assert_close(pair_products(to_half_split(q), to_half_split(k), layout="half_split"), h)
    assert pair_products(q.float(), k.float()).dtype == torch.complex64


@given(half=halves, seed=seeds, delta=st.integers(-5000, 5000))
def test_abel_summation_and_the_bound(half, seed, delta):
    dim = 2 * half
    q, k = randn(2, dim, seed=seed)
    h = pair_products(q, k, layout="interleaved")
    s = partial_phasor_sums(delta, dim)
    direct = (h * (s[1:] - s[:-1])).sum()                          # Σ h_j e^{iδθ_j}
    h_ext = torch.cat((h, h.new_zeros(1)))                          # h_{d/2} = 0
    abel = -(s[1:] * (h_ext[1:] - h_ext[:-1])).sum()
    assert abs(complex(direct - abel)) <= 1e-9 * (1 + abs(complex(direct)))
    rhs = (h_ext[1:] - h_ext[:-1]).abs().max() * half * decay_bound(delta, dim)
    assert abs(score_at_distance(q, k, delta, layout="interleaved").item()) <= abs(complex(direct)) + 1e-9
    assert abs(complex(direct)) <= rhs.item() * (1 + 1e-12) + 1e-12


# is_toeplitz -------------------------------------------------------------------

def test_is_toeplitz_by_hand():
    assert is_toeplitz(torch.tensor([[1.0, 2.0, 3.0], [4.0, 1.0, 2.0]]))
    assert not is_toeplitz(torch.tensor([[1.0, 2.0], [4.0, 1.5]]))
    assert is_toeplitz(torch.tensor([[1.0, 2.0], [4.0, 1.5]]), tol=0.5)
    assert is_toeplitz(torch.zeros(1, 5))


# Dtypes, devices, errors ------------------------------------------------------

def test_float32_inputs_give_float32_scores():
    q = torch.randn(2, 5, 8)
    assert rope_scores(q, q).dtype == torch.float32 and rope_scores(q, q).shape == (2, 5, 5)
    assert score_at_distance(q[0, 0], q[0, 1], [1, 2]).dtype == torch.float32


def test_errors_name_the_argument():
    q = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"q and k must have the same dim"):
        rope_scores(q, torch.randn(4, 6))
    with pytest.raises(ValueError, match=r"positions_k must have shape \(4,\)"):
        rope_scores(q, q, positions_k=[0, 1, 2])
    with pytest.raises(ValueError, match="leading axes of q"):
        rope_scores(torch.randn(2, 4, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match="layout must be one of"):
        rope_scores(q, q, layout="paired")
    with pytest.raises(ValueError, match="dim must be even"):
        decay_bound([0, 1], 7)
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        decay_bound([0, 1], 8, base=1.0)
    with pytest.raises(TypeError, match="distances must have an integer dtype"):
        decay_bound(torch.tensor([0.5]), 8)
    with pytest.raises(TypeError, match="distances must be an integer tensor"):
        score_at_distance(q[0], q[1], "3")
    with pytest.raises(ValueError, match=r"q's last axis \(dim\) must be even"):
        pair_products(torch.randn(5), torch.randn(5))
    with pytest.raises(ValueError, match=r"matrix must have shape \(\.\.\., M, N\)"):
        is_toeplitz(torch.zeros(3))
