"""Tests for ropelab.matrix: the dense rotation matrix R (chapter 04)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ropelab
from ropelab import (
    apply_rotary,
    apply_rotary_complex,
    cos_sin,
    inv_freq,
    rotation_matrix,
)
from ropelab.matrix import (
    STORAGE_FORMS,
    count_arithmetic,
    elementwise_flops,
    floats_per_position,
    matmul_flops,
)
from ropelab.pairing import half_split_permutation

F64 = torch.float64
LAYOUTS = ["half_split", "interleaved"]


def test_by_hand_dim4_base100_position1():
    c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.1), math.sin(0.1)
    theta = inv_freq(4, 100.0, dtype=F64)
    interleaved = torch.tensor([[c1, -s1, 0, 0], [s1, c1, 0, 0], [0, 0, c2, -s2], [0, 0, s2, c2]], dtype=F64)
    half_split = torch.tensor([[c1, 0, -s1, 0], [0, c2, 0, -s2], [s1, 0, c1, 0], [0, s2, 0, c2]], dtype=F64)
    torch.testing.assert_close(rotation_matrix(1, theta, layout="interleaved"), interleaved, rtol=0, atol=1e-15)
    torch.testing.assert_close(rotation_matrix(1, theta, layout="half_split"), half_split, rtol=0, atol=1e-15)


def test_sparsity():
    r = rotation_matrix(3, inv_freq(16))
    assert int(torch.count_nonzero(r)) == 2 * 16
    assert rotation_matrix(0, inv_freq(8)).equal(torch.eye(8))


def test_errors():
    with pytest.raises(TypeError, match=r"position must be one integer.*shape \(2,\)"):
        rotation_matrix(torch.tensor([1, 2]), inv_freq(8))
    with pytest.raises(TypeError, match="position must be an int, got float 1.5"):
        rotation_matrix(1.5, inv_freq(8))
    with pytest.raises(ValueError, match="position must be >= 0, got -2"):
        rotation_matrix(-2, inv_freq(8))
    with pytest.raises(ValueError, match="layout must be one of"):
        rotation_matrix(1, inv_freq(8), layout="blocks")


dims = st.integers(1, 32).map(lambda h: 2 * h)
pos = st.integers(0, 100_000)


@given(dim=dims, m=pos, seed=st.integers(0, 2**31 - 1))
def test_defaults_agree_with_apply_rotary_and_the_plain_formula(dim, m, seed):
    # every default (half-split) at once: R @ x == apply_rotary(x, cos, sin), and both
    # equal the plain formula written out here, x_i cos a_i - x_{i+d/2} sin a_i, ...
    x = torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    theta = inv_freq(dim, dtype=F64)
    cos, sin = cos_sin([m], theta, dtype=F64)
    by_matrix = rotation_matrix(m, theta) @ x
    torch.testing.assert_close(by_matrix, apply_rotary(x[None], cos, sin)[0], rtol=0, atol=1e-12)
    a = m * theta
    x1, x2 = x[: dim // 2], x[dim // 2 :]
    plain = torch.cat((x1 * a.cos() - x2 * a.sin(), x2 * a.cos() + x1 * a.sin()))
    torch.testing.assert_close(by_matrix, plain, rtol=0, atol=1e-12)


@given(dim=dims, m=pos, layout=st.sampled_from(LAYOUTS))
def test_orthogonal(dim, m, layout):
    r = rotation_matrix(m, inv_freq(dim, dtype=F64), layout=layout)
    torch.testing.assert_close(r.T @ r, torch.eye(dim, dtype=F64), rtol=0, atol=1e-12)


@given(dim=dims, m=pos, n=pos, layout=st.sampled_from(LAYOUTS))
def test_relative_composition(dim, m, n, layout):
    # 04_rotation_matrix, eq. rmat-relative: R_m^T R_n = R_{n-m}; for n < m that is R_{m-n}^T
    theta = inv_freq(dim, dtype=F64)
    lhs = rotation_matrix(m, theta, layout=layout).T @ rotation_matrix(n, theta, layout=layout)
    rel = rotation_matrix(abs(n - m), theta, layout=layout)
    torch.testing.assert_close(lhs, rel if n >= m else rel.T, rtol=0, atol=1e-9)


@given(dim=dims, m=pos, seed=st.integers(0, 2**31 - 1), layout=st.sampled_from(LAYOUTS))
def test_matrix_equals_elementwise_and_complex(dim, m, seed, layout):
    x = torch.randn(3, 1, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    theta = inv_freq(dim, dtype=F64)
    cos, sin = cos_sin([m], theta, layout=layout, dtype=F64)
    by_matrix = x @ rotation_matrix(m, theta, layout=layout).T
    torch.testing.assert_close(by_matrix, apply_rotary(x, cos, sin, layout=layout), rtol=0, atol=1e-12)
    if layout == "interleaved":
        torch.testing.assert_close(by_matrix, apply_rotary_complex(x, [m], theta), rtol=0, atol=1e-9)


@given(dim=dims, m=pos)
def test_permutation_conjugates_the_layouts(dim, m):
    # 04_rotation_matrix, eq. rmat-conjugate: R_half = P R_inter P^T with P x = x[perm]
    theta = inv_freq(dim, dtype=F64)
    p = torch.eye(dim, dtype=F64)[half_split_permutation(dim)]  # P x = to_half_split(x)
    torch.testing.assert_close(rotation_matrix(m, theta, layout="half_split"),
                               p @ rotation_matrix(m, theta, layout="interleaved") @ p.T, rtol=0, atol=0)


# Costs: flops and stored floats (chapter 04) --------------------------------


def test_flop_counts_by_hand():
    # d = 4: 4 outputs, each 4 products and 3 additions -> 28; elementwise 8 mults + 4 adds -> 12.
    assert matmul_flops(4) == 28
    assert elementwise_flops(4) == 12
    assert matmul_flops(128) == 128 * 255
    assert elementwise_flops(128) == 384


@given(dim=dims, position=st.integers(min_value=1, max_value=10_000))
def test_flop_counts_match_the_structure_of_r(dim, position):
    # Independent count: a product that visits k entries of a row does k multiplications
    # and k - 1 additions. Dense visits all d entries of a row, sparse only the non-zeros.
    r = ropelab.rotation_matrix(position, ropelab.inv_freq(dim, dtype=torch.float64))
    per_row_nonzero = torch.count_nonzero(r, dim=1)
    assert bool((per_row_nonzero == 2).all())
    assert matmul_flops(dim) == int((2 * torch.full((dim,), dim) - 1).sum())
    assert elementwise_flops(dim) == int((2 * per_row_nonzero - 1).sum())


@pytest.mark.parametrize("dim", [4, 32, 128])
def test_counted_arithmetic_matches_the_closed_forms(dim):
    # what torch executes, seen by a dispatch mode: the dense product's multiply-adds
    # are its d^2 multiplications; x*cos + rotate_half(x)*sin does 2d mults and d adds
    seq = 3
    theta = inv_freq(dim)
    r_all = torch.stack([rotation_matrix(p, theta, layout="half_split") for p in range(seq)])
    x = torch.randn(seq, dim)
    dense = count_arithmetic(lambda: torch.einsum("pij,pj->pi", r_all, x))
    assert dense["multiply-adds"] == seq * dim * dim
    assert 2 * dense["multiply-adds"] - seq * dim == seq * matmul_flops(dim)
    cos, sin = cos_sin(torch.arange(seq), theta)
    elem = count_arithmetic(lambda: x * cos + ropelab.rotate_half(x) * sin)
    assert elem["multiplications"] + elem["additions"] == seq * elementwise_flops(dim)
    assert elem["negations"] == seq * dim // 2 and elem["multiply-adds"] == 0


def test_count_arithmetic_counts_nothing_for_data_movement():
    x = torch.randn(4, 8)
    assert sum(count_arithmetic(lambda: torch.cat((x, x)).view(-1).clone()).values()) == 0


def test_rotation_matrix_at_position_zero_is_identity():
    r = ropelab.rotation_matrix(0, ropelab.inv_freq(8, dtype=torch.float64))
    assert torch.equal(r, torch.eye(8, dtype=torch.float64))


@pytest.mark.parametrize("dim", [2, 8, 64])
def test_floats_per_position(dim):
    theta = ropelab.inv_freq(dim)
    assert floats_per_position(dim, "dense") == ropelab.rotation_matrix(3, theta).numel()
    cos, sin = ropelab.cos_sin([3], theta)
    assert floats_per_position(dim, "cos_sin") == cos.numel() + sin.numel()
    assert floats_per_position(dim, "angles") == ropelab.angles([3], theta).numel()
    assert floats_per_position(dim) == dim * dim
    assert set(STORAGE_FORMS) == {"dense", "cos_sin", "angles"}


@pytest.mark.parametrize("fn", [matmul_flops, elementwise_flops, floats_per_position])
@pytest.mark.parametrize("bad, err", [(3, ValueError), (0, ValueError), (-4, ValueError), (4.0, TypeError), (True, TypeError)])
def test_counts_refuse_bad_dim(fn, bad, err):
    with pytest.raises(err, match="dim"):
        fn(bad)


def test_floats_per_position_refuses_unknown_form():
    with pytest.raises(ValueError, match="form"):
        floats_per_position(8, "sparse")
