"""Tests for ropelab.numerics: angle precision across dtypes (chapter 08)."""

# --- chapter 08 additions ---

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ropelab
from ropelab import numerics
from ropelab.numerics import (
    angles_in,
    attention_errors,
    attention_logits,
    cos_error,
    cos_error_bound,
    log_positions,
    significand_bits,
    unit_roundoff,
)

F64 = torch.float64
NARROW = [torch.float32, torch.bfloat16, torch.float16]
ALL = [F64] + NARROW


# Formats ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype, p", [(torch.bfloat16, 8), (torch.float16, 11), (torch.float32, 24), (F64, 53)])
def test_significand_bits_match_finfo_and_integer_representability(dtype, p):
    assert significand_bits(dtype) == p
    assert unit_roundoff(dtype) == 2.0**-p
    assert torch.finfo(dtype).eps == 2.0 ** (1 - p)  # eps is the spacing at 1, twice u
    # every integer up to 2^p is representable, 2^p + 1 is the first that is not
    n = torch.tensor([2**p - 1, 2**p, 2**p + 1], dtype=torch.int64)
    back = n.to(dtype).to(torch.int64)
    assert back[:2].tolist() == n[:2].tolist()
    assert int(back[2]) != 2**p + 1


def test_first_integer_bfloat16_cannot_hold_is_257():
    ints = torch.arange(1, 1000)
    lost = ints[ints.to(torch.bfloat16).to(torch.int64) != ints]
    assert int(lost[0]) == 257 == 2 ** significand_bits(torch.bfloat16) + 1


def test_significand_bits_rejects_other_dtypes():
    with pytest.raises(TypeError, match="dtype must be one of"):
        significand_bits(torch.int32)


@given(x=st.floats(6.2e-5, 6.5e4), dtype=st.sampled_from(ALL))
def test_one_rounding_is_within_the_representation_bound(x, dtype):
    # eq. num-bound, for normal numbers (float16's smallest normal is 2^-14 ≈ 6.1e-5)
    t = torch.tensor(x, dtype=F64)
    assert abs(float(t.to(dtype).double() - t)) <= unit_roundoff(dtype) * abs(x)


def test_float16_frequencies_below_its_normal_range_break_the_relative_bound():
    # base 500,000: θ_j < 2^-14 for j >= 48 (d = 128), subnormal in float16
    theta = ropelab.inv_freq(128, 500000.0, dtype=F64)
    rel = ((theta.half().double() - theta) / theta).abs()
    assert bool((rel[:48] <= 2.0**-11).all())
    assert float(rel[48:].max()) > 2.0**-11


# Positions ----------------------------------------------------------------------

def test_log_positions():
    pos = log_positions(200, 1_000_000)
    assert pos.dtype == torch.int64 and int(pos[0]) == 1 and int(pos[-1]) == 1_000_000
    assert len(pos) <= 200 and bool((pos[1:] > pos[:-1]).all())
    assert log_positions(2, 10).tolist() == [1, 10]
    with pytest.raises(ValueError, match="n must be an int >= 2"):
        log_positions(1)
    with pytest.raises(ValueError, match="max_position must be a positive int"):
        log_positions(10, 0)


def test_bfloat16_positions_collide_and_rotations_coincide():
    theta = ropelab.inv_freq(128, 10000.0)
    a = angles_in(torch.tensor([1000, 1001, 1003, 1004]), theta, torch.bfloat16)
    assert a.dtype == torch.bfloat16 and a.shape == (4, 64)
    assert torch.equal(a[0], a[1])  # 1001 is stored as 1000: the same rotation
    assert torch.equal(a[2], a[3])  # 1003 -> 1004
    assert not torch.equal(a[0], a[3])
    torch.testing.assert_close(
        torch.arange(250, 270).bfloat16(),
        torch.tensor([250, 251, 252, 253, 254, 255, 256, 256, 258, 260, 260, 260, 262, 264, 264, 264, 266, 268, 268, 268],
                     dtype=torch.bfloat16),
        rtol=0, atol=0,
    )


def test_angles_in_by_hand():
    theta = torch.tensor([1.0, 0.1], dtype=F64)
    got = angles_in(torch.tensor([0, 3]), theta, torch.float32)
    assert got.dtype == torch.float32
    expected = torch.tensor([[0.0, 0.0], [3.0, 3 * float(torch.tensor(0.1, dtype=torch.float32))]])
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    with pytest.raises(TypeError, match="positions must be a torch.Tensor"):
        angles_in([1, 2], theta, torch.float32)
    with pytest.raises(ValueError, match="inv_freq must be 1-D"):
        angles_in(torch.arange(3), theta[None], torch.float32)


# cos error ------------------------------------------------------------------------

POS = log_positions(60, 1_000_000)


@pytest.mark.parametrize("base", [1e4, 5e5])
def test_float64_angles_are_the_reference(base):
    assert float(cos_error(POS, 128, base, F64).max()) == 0.0


def test_float32_angle_error_at_position_100000_base_500000_exceeds_1e_3():
    err = cos_error(torch.tensor([100_000]), 128, 500000.0, torch.float32)
    assert 1e-3 < float(err) < 1e-2
    # and ropelab's cos_sin (transformers' float32 arithmetic) shows the same error
    pos = torch.tensor([100_000])
    cos32, _ = ropelab.cos_sin(pos, ropelab.inv_freq(128, 500000.0))
    ref = ropelab.angles(pos, ropelab.inv_freq(128, 500000.0, dtype=F64)).cos()
    assert float((cos32[..., :64].double() - ref).abs().max()) > 1e-3


@pytest.mark.parametrize("base", [1e4, 5e5])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("cos_in_angle_dtype", [False, True])
def test_cos_error_is_within_the_bound(base, dtype, cos_in_angle_dtype):
    cos_dtype = dtype if cos_in_angle_dtype else F64
    err = cos_error(POS, 128, base, dtype, cos_dtype=cos_dtype)
    bound = cos_error_bound(POS, 128, base, dtype, cos_dtype=cos_dtype)
    assert err.dtype == F64 and err.shape == POS.shape
    finite = ~torch.isnan(err)
    assert torch.equal(finite, ~torch.isnan(bound))
    assert bool((err[finite] <= bound[finite]).all())


def test_cos_error_grows_with_position_and_bfloat16_saturates():
    far, near = torch.tensor([1_000_000]), torch.tensor([100])
    e32 = cos_error(torch.cat((near, far)), 128, 500000.0, torch.float32)
    assert float(e32[1]) > 100 * float(e32[0])
    e16 = cos_error(torch.tensor([8192, 100_000]), 128, 500000.0, torch.bfloat16)
    assert bool((e16 > 1.0).all())  # cos is meaningless: off by more than 1


def test_float16_positions_overflow_to_nan():
    pos = torch.tensor([65504, 65519, 65520, 100_000])
    err = cos_error(pos, 128, 10000.0, torch.float16)
    assert torch.isnan(err).tolist() == [False, False, True, True]
    assert torch.isnan(cos_error_bound(pos, 128, 10000.0, torch.float16)).tolist() == [False, False, True, True]


def test_cos_error_checks_arguments():
    with pytest.raises(TypeError, match="integer dtype"):
        cos_error(torch.tensor([1.0]), 8, 100.0, torch.float32)
    with pytest.raises(ValueError, match="1-D tensor"):
        cos_error(torch.tensor([[1]]), 8, 100.0, torch.float32)
    with pytest.raises(ValueError, match="positions must be >= 0"):
        cos_error(torch.tensor([-1]), 8, 100.0, torch.float32)
    with pytest.raises(TypeError, match="dtype must be one of"):
        cos_error(torch.tensor([1]), 8, 100.0, torch.int32)
    with pytest.raises(ValueError, match="dim must be even"):
        cos_error(torch.tensor([1]), 7, 100.0, torch.float32)


# attention --------------------------------------------------------------------------

def qk(seq=16, dim=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, seq, dim, generator=g, dtype=F64), torch.randn(2, seq, dim, generator=g, dtype=F64)


def test_attention_logits_float64_matches_ropelab():
    q, k = qk()
    pos = torch.arange(100, 116)
    theta = ropelab.inv_freq(32, 10000.0, dtype=F64)
    cos, sin = ropelab.cos_sin(pos, theta, dtype=F64)
    ref = ropelab.apply_rotary(q, cos, sin) @ ropelab.apply_rotary(k, cos, sin).transpose(-1, -2) / math.sqrt(32)
    got = attention_logits(q, k, pos, theta, F64)
    assert got.shape == (2, 16, 16) and got.dtype == F64
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)


def test_attention_logits_float32_is_ropelab_cos_sin_exactly():
    q, k = qk()
    pos = torch.arange(8000, 8016)
    theta = ropelab.inv_freq(32, 500000.0)
    cos, sin = ropelab.cos_sin(pos, theta)  # float32 angles and cos, as transformers
    ref = ropelab.apply_rotary(q, cos, sin) @ ropelab.apply_rotary(k, cos, sin).transpose(-1, -2) / math.sqrt(32)
    got = attention_logits(q, k, pos, theta, torch.float32, cos_dtype=torch.float32)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)


@given(shift=st.integers(0, 10**6))
def test_float64_logits_depend_only_on_distance(shift):
    q, k = qk(seq=4, dim=8)
    theta = ropelab.inv_freq(8, 10000.0, dtype=F64)
    a = attention_logits(q, k, torch.arange(4), theta, F64)
    b = attention_logits(q, k, torch.arange(4) + shift, theta, F64)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-8)


def test_bfloat16_positions_wreck_attention_and_ropelab_does_not():
    q, k = qk(seq=64, dim=128)
    base = 500000.0
    pos = torch.arange(8000, 8064)
    ref = attention_logits(q, k, pos, ropelab.inv_freq(128, base, dtype=F64), F64)
    theta32 = ropelab.inv_freq(128, base)
    # (a) positions in bfloat16
    bad = attention_logits(q, k, torch.arange(8000, 8064, dtype=torch.bfloat16), theta32, torch.float32,
                           cos_dtype=torch.float32)
    dlogit, tv = attention_errors(bad, ref)
    assert dlogit > 1.0 and tv > 0.1
    # (b) the frequencies cast to bfloat16 (a plain buffer after .to(bfloat16))
    _, tv_b = attention_errors(attention_logits(q, k, pos, theta32.bfloat16(), torch.float32, cos_dtype=torch.float32), ref)
    assert tv_b > 1e-3
    # (c) positions in float16 beyond 65,504: inf angles, NaN scores
    nan = attention_logits(q, k, torch.arange(100_000, 100_064).half(), theta32, torch.float32)
    assert all(math.isnan(v) for v in attention_errors(nan, ref))
    # ropelab's module keeps float32 tables from float64 angles after .to(bfloat16)
    rope = ropelab.RotaryEmbedding(128, base).to(torch.bfloat16)
    rq, rk = rope(q, k, pos)
    good = rq @ rk.transpose(-1, -2) / math.sqrt(128)
    dlogit, tv = attention_errors(good, ref)
    assert dlogit < 1e-5 and tv < 1e-6


def test_attention_errors_by_hand():
    ref = torch.tensor([[0.0, 0.0]], dtype=F64)         # softmax (1/2, 1/2)
    other = torch.tensor([[math.log(3.0), 0.0]], dtype=F64)  # softmax (3/4, 1/4)
    dlogit, tv = attention_errors(other, ref)
    assert dlogit == pytest.approx(math.log(3.0), abs=1e-15)
    assert tv == pytest.approx(0.25, abs=1e-15)
    assert attention_errors(ref, ref) == (0.0, 0.0)
    with pytest.raises(ValueError, match="one shape"):
        attention_errors(ref, ref.T)


def test_attention_logits_checks_shapes():
    q, k = qk()
    theta = ropelab.inv_freq(32)
    with pytest.raises(ValueError, match="q and k must have one shape"):
        attention_logits(q, k[:, :3], torch.arange(16), theta, F64)
    with pytest.raises(ValueError, match=r"positions must be a tensor of shape \(16,\)"):
        attention_logits(q, k, torch.arange(15), theta, F64)
    with pytest.raises(ValueError, match=r"inv_freq must have shape \(16,\)"):
        attention_logits(q, k, torch.arange(16), theta[:8], F64)


# The guarantee ropelab gives ----------------------------------------------------------

def test_ropelab_refuses_narrow_frequencies_and_offers_float64():
    with pytest.raises(TypeError, match="float32 or float64"):
        ropelab.angles(torch.arange(4), ropelab.inv_freq(8).bfloat16())
    pos = torch.tensor([1_000_000])
    theta = ropelab.inv_freq(128, 500000.0, dtype=F64)
    cos64, _ = ropelab.cos_sin(pos, theta, dtype=F64)
    assert float(cos_error(pos, 128, 500000.0, F64)) == 0.0
    j = torch.arange(64, dtype=F64)
    exact = (1e6 * 500000.0 ** (-2 * j / 128)).cos()
    assert float((cos64[0, :64] - exact).abs().max()) < 1e-9


def test_plain_buffer_is_cast_by_to_bfloat16_but_rotary_embedding_is_not():
    class Naive(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_freq", ropelab.inv_freq(128, 500000.0), persistent=False)

    assert Naive().to(torch.bfloat16).inv_freq.dtype == torch.bfloat16
    rope = ropelab.RotaryEmbedding(128, 500000.0).to(torch.bfloat16)
    assert rope.inv_freq.dtype == torch.float32 and rope.cos_cached.dtype == torch.float32


def test_transformers_llama_rotary_buffer_is_cast_too():
    # the book says so: transformers' LlamaRotaryEmbedding keeps inv_freq in a plain buffer
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=512, num_attention_heads=4, num_key_value_heads=4,
                         rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    hf = LlamaRotaryEmbedding(config)
    assert hf.inv_freq.dtype == torch.float32
    assert hf.to(torch.bfloat16).inv_freq.dtype == torch.bfloat16


def test_module_exports():
    for name in numerics.__all__:
        assert hasattr(numerics, name)


# --- exact reference (mpmath) ---

from ropelab.numerics import exact_cos_sin  # noqa: E402


def test_exact_cos_sin_of_float32_frequencies_matches_libm_on_exact_products():
    # m·θ32 is exact in float64 (24 + 17 bits), so libm's cos of it is within an ulp of the truth
    theta32 = ropelab.inv_freq(16, 10000.0)
    pos = torch.tensor([0, 1, 5, 4095, 100_000])
    cos, sin = exact_cos_sin(pos, 16, 10000.0, inv_freq=theta32)
    angles = pos.double()[:, None] * theta32.double()
    assert float((cos - angles.cos()).abs().max()) <= 2.3e-16
    assert float((sin - angles.sin()).abs().max()) <= 2.3e-16


def test_float64_angles_have_a_real_error_against_the_exact_reference():
    pos = torch.tensor([1_000_000])
    err = float(numerics.cos_error(pos, 128, 10000.0, torch.float64, exact=True)[0])
    bound = float(numerics.cos_error_bound(pos, 128, 10000.0, torch.float64)[0])
    assert 1e-12 < err <= bound  # not 0, as a float64 reference would report
    assert float(numerics.cos_error(pos, 128, 10000.0, torch.float64)[0]) == 0.0


def test_exact_cos_sin_errors():
    with pytest.raises(ValueError, match="inv_freq must have shape"):
        exact_cos_sin(torch.tensor([1]), 8, 10000.0, inv_freq=torch.ones(3))
    with pytest.raises(TypeError, match="integer dtype"):
        exact_cos_sin(torch.tensor([1.0]), 8, 10000.0)
