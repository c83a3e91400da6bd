"""Tests for ropelab.frequencies: θ_j, wavelengths and angles (chapter 01)."""

import math
from fractions import Fraction

import mpmath
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import angles, inv_freq, wavelengths
from ropelab.frequencies import full_turn_pairs

try:  # the comparison with transformers needs it; every other test runs without it
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
except ImportError:
    LlamaConfig = None
needs_transformers = pytest.mark.skipif(LlamaConfig is None, reason="transformers is not installed")

even_dims = st.integers(1, 128).map(lambda h: 2 * h)
bases = st.floats(1.5, 1e7, allow_nan=False)


# Worked examples, by hand -------------------------------------------------

def test_inv_freq_dim4_base100_by_hand():
    # θ_j = 100^(-2j/4), j = 0, 1  ->  [1, 100^-0.5] = [1, 0.1]
    assert inv_freq(4, 100.0).tolist() == pytest.approx([1.0, 0.1], rel=1e-7)


def test_inv_freq_dim8_base10000_by_hand():
    # exponents 0, 2/8, 4/8, 6/8 of 10000  ->  1, 0.1, 0.01, 0.001
    got = inv_freq(8, 10000.0, dtype=torch.float64)
    assert got.tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001], rel=1e-14)


def test_wavelengths_by_hand():
    assert wavelengths(4, 100.0).tolist() == pytest.approx([2 * math.pi, 20 * math.pi], rel=1e-14)


def test_angles_by_hand():
    got = angles([0, 1, 2], inv_freq(4, 100.0, dtype=torch.float64))
    expected = torch.tensor([[0, 0], [1, 0.1], [2, 0.2]], dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=1e-14, atol=0)


def test_one_based_paper_formula_gives_the_same_numbers():
    d, base = 128, 10000.0
    paper = torch.tensor([base ** (-2 * (j - 1) / d) for j in range(1, d // 2 + 1)], dtype=torch.float64)
    torch.testing.assert_close(inv_freq(d, base, dtype=torch.float64), paper, rtol=1e-15, atol=0)


SETTINGS = [(64, 10000.0), (128, 10000.0), (128, 500000.0), (96, 1e6), (80, 10000.0)]


def exact_theta(d, base, j):
    """θ_j = base^(-2j/d) to 50 digits (mpmath), independent of torch's pow and division."""
    with mpmath.workdps(50):
        return mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * j) / d)


@pytest.mark.parametrize("dtype, eps", [(torch.float64, 2.0**-53), (torch.float32, 2.0**-24)])
@pytest.mark.parametrize("d, base", SETTINGS)
def test_the_frequency_is_exact_up_to_the_rounding_of_its_operations(d, base, dtype, eps):
    # 1 / base^x with x = 2j/d: x is rounded (relative error <= eps), which moves θ by
    # θ·ln(base)·x·eps; pow and the division add about one rounding each. So the
    # float32 θ of a checkpoint is not the float32 nearest θ_j: for d = 96 and base 10^6
    # it is 4.7 float32 ulps away, as this bound allows.
    got = inv_freq(d, base, dtype=dtype).tolist()
    for j, value in enumerate(got):
        exact = exact_theta(d, base, j)
        bound = (math.log(base) * 2 * j / d + 3) * eps * exact
        assert abs(mpmath.mpf(value) - exact) <= bound, j
    if dtype == torch.float64:  # and it is closer than the float32 one by orders of magnitude
        worst = max(abs(mpmath.mpf(v) - exact_theta(d, base, j)) / exact_theta(d, base, j)
                    for j, v in enumerate(inv_freq(d, base).tolist()))
        assert worst > 2**20 * eps


@needs_transformers
@pytest.mark.parametrize("d, base", SETTINGS)
def test_float32_is_bit_identical_to_transformers(d, base):
    # what a pretrained LLaMA's rotary embedding computes (its inv_freq buffer)
    config = LlamaConfig(hidden_size=d * 2, num_attention_heads=2,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    hf = LlamaRotaryEmbedding(config).inv_freq
    assert hf.dtype == torch.float32
    assert torch.equal(inv_freq(d, base), hf)


# Shapes, dtypes, batching ---------------------------------------------------

def test_dtypes():
    assert inv_freq(8).dtype == torch.float32
    assert inv_freq(8, dtype=torch.float64).dtype == torch.float64
    assert wavelengths(8).dtype == torch.float64
    assert angles(torch.arange(3), inv_freq(8)).dtype == torch.float32
    assert angles(torch.arange(3), inv_freq(8, dtype=torch.float64)).dtype == torch.float64


def test_angles_per_row_positions():
    pos = torch.tensor([[0, 1, 2], [5, 6, 7]])
    got = angles(pos, inv_freq(8))
    assert got.shape == (2, 3, 4)
    torch.testing.assert_close(got[1], angles([5, 6, 7], inv_freq(8)))


def test_angles_accepts_int_and_range():
    torch.testing.assert_close(angles(range(4), inv_freq(8)), angles(torch.arange(4), inv_freq(8)))
    assert angles(3, inv_freq(8)).shape == (4,)


# Errors ---------------------------------------------------------------------

@pytest.mark.parametrize("dim, exc, text", [
    (7, ValueError, "even"),
    (0, ValueError, "positive"),
    (-4, ValueError, "positive"),
    (8.0, TypeError, "int"),
    (True, TypeError, "int"),
])
def test_bad_dim(dim, exc, text):
    with pytest.raises(exc, match=text) as info:
        inv_freq(dim)
    assert "dim" in str(info.value) and str(dim) in str(info.value)


@pytest.mark.parametrize("base", [1.0, 0.5, -10.0, 0.0, float("inf"), float("nan")])
def test_bad_base(base):
    with pytest.raises(ValueError, match="base must be"):
        inv_freq(8, base)


def test_base_wrong_type():
    with pytest.raises(TypeError, match="base must be a number, got str"):
        inv_freq(8, "10000")


def test_narrow_dtype_refused():
    with pytest.raises(TypeError, match="float32 or torch.float64, got torch.bfloat16"):
        inv_freq(8, dtype=torch.bfloat16)


def test_float_positions_refused_with_hint():
    with pytest.raises(TypeError, match=r"positions must have an integer dtype.*torch.float32.*\.long\(\)"):
        angles(torch.arange(4.0), inv_freq(8))


def test_negative_positions_refused():
    with pytest.raises(ValueError, match="positions must be >= 0, got a minimum of -1"):
        angles(torch.tensor([-1, 0]), inv_freq(8))


def test_narrow_inv_freq_refused():
    with pytest.raises(TypeError, match="inv_freq must be float32 or float64"):
        angles(torch.arange(4), inv_freq(8).bfloat16())


def test_inv_freq_shape_checked():
    with pytest.raises(ValueError, match=r"inv_freq must be a non-empty 1-D tensor.*\(2, 4\)"):
        angles(torch.arange(4), torch.ones(2, 4))


# Properties -----------------------------------------------------------------

@given(dim=even_dims, base=bases)
def test_inv_freq_spectrum(dim, base):
    theta = inv_freq(dim, base, dtype=torch.float64)
    assert theta.shape == (dim // 2,)
    assert theta[0] == 1.0
    assert bool((theta[1:] < theta[:-1]).all())
    assert float(theta[-1]) == pytest.approx(base ** (-(dim - 2) / dim), rel=1e-12)


@given(dim=even_dims, base=bases)
def test_wavelength_times_frequency_is_a_full_turn(dim, base):
    torch.testing.assert_close(wavelengths(dim, base) * inv_freq(dim, base, dtype=torch.float64),
                               torch.full((dim // 2,), 2 * math.pi, dtype=torch.float64))


@given(m=st.integers(0, 2**20), dim=even_dims, wide=st.booleans())
def test_angles_are_the_correctly_rounded_products(m, dim, wide):
    # m·θ_j in exact rational arithmetic, rounded once to the table's dtype. Fraction ->
    # float rounds correctly; for float32 θ the product (21 + 24 bits) is exact in
    # float64, so the only rounding is the final one to float32.
    theta = inv_freq(dim, 10000.0, dtype=torch.float64 if wide else torch.float32)
    exact = [float(Fraction(m) * Fraction(t)) for t in theta.tolist()]
    assert torch.equal(angles([m], theta)[0], torch.tensor(exact, dtype=torch.float64).to(theta.dtype))


# full_turn_pairs: the number of pairs j with λ_j = 2π·base^(2j/d) <= L.


def test_full_turn_pairs_worked_example():
    # d = 8, base = 10^4: θ = 1, 10^-1, 10^-2, 10^-3, so λ = 2π, 20π, 200π, 2000π
    # ≈ 6.28, 62.83, 628.32, 6283.19 tokens.
    assert full_turn_pairs(8, 10000.0, 0) == 0
    assert full_turn_pairs(8, 10000.0, 6) == 0
    assert full_turn_pairs(8, 10000.0, 2 * math.pi) == 1  # λ_0 = 2π exactly: "at most" includes it
    assert full_turn_pairs(8, 10000.0, 62) == 1
    assert full_turn_pairs(8, 10000.0, 63) == 2
    assert full_turn_pairs(8, 10000.0, 100) == 2
    assert full_turn_pairs(8, 10000.0, 629) == 3
    assert full_turn_pairs(8, 10000.0, 6283) == 3
    assert full_turn_pairs(8, 10000.0, 6284) == 4
    assert full_turn_pairs(8, 10000.0, 10**9) == 4  # capped at d/2


def test_full_turn_pairs_llama_values():
    # d = 128: (d/2)·log(L/2π)/log(base), floored, plus one (worked out in the chapter).
    assert full_turn_pairs(128, 10000.0, 2048) == 41
    assert full_turn_pairs(128, 10000.0, 8192) == 50
    assert full_turn_pairs(128, 500000.0, 8192) == 35
    assert full_turn_pairs(128, 500000.0, 131072) == 49


def test_full_turn_pairs_on_a_wavelength_counts_it():
    # L exactly equal to a (float64) wavelength: that pair is included, the next is not.
    lam = wavelengths(64, 10000.0).tolist()
    for j, value in enumerate(lam):
        assert full_turn_pairs(64, 10000.0, value) == j + 1
        assert full_turn_pairs(64, 10000.0, math.nextafter(value, 0.0)) == j


@pytest.mark.parametrize(
    "args, err",
    [
        ((7, 10000.0, 100), ValueError),
        ((8, 1.0, 100), ValueError),
        ((8, 10000.0, -1), ValueError),
        ((8, 10000.0, float("nan")), ValueError),
        ((8, 10000.0, float("inf")), ValueError),
        ((8, 10000.0, "100"), TypeError),
        ((8, 10000.0, True), TypeError),
    ],
)
def test_full_turn_pairs_rejects_bad_arguments(args, err):
    with pytest.raises(err):
        full_turn_pairs(*args)


lengths = st.floats(0.0, 1e8, allow_nan=False)


@given(dim=even_dims, base=bases, length=lengths)
def test_full_turn_pairs_equals_direct_count(dim, base, length):
    direct = int((wavelengths(dim, base) <= length).sum())
    assert full_turn_pairs(dim, base, length) == direct


@given(dim=even_dims, base=bases, a=lengths, b=lengths)
def test_full_turn_pairs_monotone_in_context_len(dim, base, a, b):
    lo, hi = sorted((a, b))
    assert 0 <= full_turn_pairs(dim, base, lo) <= full_turn_pairs(dim, base, hi) <= dim // 2


@given(dim=even_dims, a=bases, b=bases, length=lengths)
def test_full_turn_pairs_monotone_in_base(dim, a, b, length):
    # A larger base stretches every wavelength, so fewer pairs fit in the context.
    lo, hi = sorted((a, b))
    assert full_turn_pairs(dim, hi, length) <= full_turn_pairs(dim, lo, length)
