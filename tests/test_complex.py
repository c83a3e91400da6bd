"""Tests for ropelab.complex: RoPE as complex multiplication (chapter 02)."""

import cmath
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ropelab
from ropelab import apply_rotary, apply_rotary_complex, cos_sin, inv_freq
from ropelab.complex import as_complex_pairs, from_complex_pairs, relative_score

F64 = torch.float64


def test_by_hand_dim4_base100_position1():
    # z0 = 1 + 2i turned by 1 rad, z1 = 3 + 4i turned by 0.1 rad
    z0, z1 = (1 + 2j) * cmath.exp(1j * 1.0), (3 + 4j) * cmath.exp(1j * 0.1)
    expected = torch.tensor([z0.real, z0.imag, z1.real, z1.imag], dtype=F64)
    got = apply_rotary_complex(torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=F64), [1], inv_freq(4, 100.0, dtype=F64))
    torch.testing.assert_close(got[0], expected, rtol=0, atol=1e-15)


def test_pairs_round_trip():
    x = torch.randn(2, 3, 8)
    z = as_complex_pairs(x)
    assert z.shape == (2, 3, 4) and z.dtype == torch.complex64
    assert torch.equal(z[..., 1], torch.complex(x[..., 2], x[..., 3]))
    assert torch.equal(from_complex_pairs(z), x)


@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.bfloat16, torch.float16])
def test_keeps_dtype(dtype):
    x = torch.randn(2, 3, 5, 8).to(dtype)
    out = apply_rotary_complex(x, torch.arange(5), inv_freq(8, dtype=F64 if dtype == F64 else torch.float32))
    assert out.dtype == dtype and out.shape == x.shape


def test_bfloat16_computed_in_float32_and_rounded_once():
    x = torch.randn(4, 6, 16).bfloat16()
    theta = inv_freq(16)
    ref = apply_rotary_complex(x.float(), torch.arange(6), theta).bfloat16()
    assert torch.equal(apply_rotary_complex(x, torch.arange(6), theta), ref)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"inv_freq has 2 frequencies but x has dim 8 \(needs dim // 2 = 4\)"):
        apply_rotary_complex(torch.randn(3, 8), torch.arange(3), inv_freq(4))
    with pytest.raises(ValueError, match="positions give 4 positions but x has seq 3"):
        apply_rotary_complex(torch.randn(3, 8), torch.arange(4), inv_freq(8))
    with pytest.raises(TypeError, match="integer dtype"):
        apply_rotary_complex(torch.randn(3, 8), torch.arange(3.0), inv_freq(8))


@given(half=st.integers(1, 32), seed=st.integers(0, 2**31 - 1), offset=st.integers(0, 50_000))
def test_complex_equals_real_interleaved_path(half, seed, offset):
    dim = 2 * half
    x = torch.randn(2, 3, 4, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    pos = torch.arange(4) + offset
    theta = inv_freq(dim, dtype=F64)
    cos, sin = cos_sin(pos, theta, layout="interleaved", dtype=F64)
    torch.testing.assert_close(apply_rotary_complex(x, pos, theta),
                               apply_rotary(x, cos, sin, layout="interleaved"), rtol=0, atol=1e-12)


@given(half=st.integers(1, 32), seed=st.integers(0, 2**31 - 1), m=st.integers(0, 10_000), n=st.integers(0, 10_000))
def test_rotations_compose(half, seed, m, n):
    # e^{imθ} e^{inθ} = e^{i(m+n)θ}
    x = torch.randn(1, 2 * half, generator=torch.Generator().manual_seed(seed), dtype=F64)
    theta = inv_freq(2 * half, dtype=F64)
    twice = apply_rotary_complex(apply_rotary_complex(x, [m], theta), [n], theta)
    torch.testing.assert_close(twice, apply_rotary_complex(x, [m + n], theta), rtol=0, atol=1e-9)


# The relative property: scores depend on m - n only (chapter 02) ----------------


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
    with pytest.raises(TypeError, match="distances"):  # the message names the argument
        relative_score(q, q, [0.5], f)
    with pytest.raises(TypeError, match="distances"):
        relative_score(q, q, "3", f)


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
