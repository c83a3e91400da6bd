"""Tests for ropelab.scaling: every rope_type against transformers, by hand, and its errors.

The reference numbers come from transformers 5.24.0 (pinned by the test extra),
``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` and
``LlamaRotaryEmbedding.compute_default_rope_parameters``. Versions differ: 4.x
releases before 4.45 had no llama3/longrope types, and YaRN's handling of
``mscale``/``mscale_all_dim`` and of ``truncate`` changed across 4.4x-5.x.
"""

import math
import warnings

import pytest
import torch

from ropelab import RotaryEmbedding, inv_freq, scaled_inv_freq
from ropelab.scaling import (
    ntk_scaled_base,
    pairs_beyond_training,
    yarn_correction_range,
    yarn_mscale,
    yarn_ramp,
)

try:  # the comparisons with transformers need it; every other test runs without it
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )
except ImportError:
    LlamaConfig = None
needs_transformers = pytest.mark.skipif(LlamaConfig is None, reason="transformers is not installed")

HEAD_DIM = 64


def llama3_params(factor=8.0, low=1.0, high=4.0, original=8192):
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low, "high_freq_factor": high,
            "original_max_position_embeddings": original}


def longrope_params(dim=HEAD_DIM, original=4096, factor=32.0, **extra):
    short = [1.0 + 0.01 * j for j in range(dim // 2)]
    long = [1.0 + 0.5 * j for j in range(dim // 2)]
    return {"rope_type": "longrope", "short_factor": short, "long_factor": long, "factor": factor,
            "original_max_position_embeddings": original, **extra}


# (scaling dict, base, head_dim, seq_len) -- the parameter sets compared with transformers
CASES = [
    ({"rope_type": "default"}, 10000.0, HEAD_DIM, None),
    ({"rope_type": "default"}, 500000.0, 128, None),
    ({"rope_type": "linear", "factor": 2.0}, 10000.0, HEAD_DIM, None),
    ({"type": "linear", "factor": 4.0}, 10000.0, 128, None),
    ({"rope_type": "linear", "factor": 8.0, "partial_rotary_factor": 0.5}, 10000.0, HEAD_DIM, None),
    ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048}, 10000.0, HEAD_DIM, None),
    ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048}, 10000.0, HEAD_DIM, 1000),
    ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048}, 10000.0, HEAD_DIM, 6000),
    ({"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 4096}, 500000.0, 128, 32768),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}, 10000.0, HEAD_DIM, None),
    ({"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048, "beta_fast": 16,
      "beta_slow": 2}, 10000.0, 128, None),
    ({"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 1.0,
      "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}, 10000.0, 64, None),  # DeepSeek-V3 style
    ({"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "mscale": 0.707,
      "mscale_all_dim": 1.0}, 10000.0, 64, None),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "truncate": False},
     1000000.0, 128, None),
    ({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096, "attention_factor": 1.25},
     10000.0, HEAD_DIM, None),
    (llama3_params(), 500000.0, 128, None),  # Llama 3.1's published settings
    (llama3_params(factor=32.0, original=8192), 500000.0, 64, None),  # Llama 3.2 1B/3B
    (llama3_params(factor=4.0, low=2.0, high=8.0, original=4096), 10000.0, HEAD_DIM, None),
    (llama3_params(factor=16.0, low=1.0, high=1.0), 500000.0, 128, None),  # Llama 4 Scout: a step, no band
    (longrope_params(), 10000.0, HEAD_DIM, None),
    (longrope_params(), 10000.0, HEAD_DIM, 2000),
    (longrope_params(), 10000.0, HEAD_DIM, 8000),
    (longrope_params(attention_factor=1.1), 10000.0, HEAD_DIM, 8000),
]


def transformers_reference(scaling, base, head_dim, seq_len):
    params = {k: v for k, v in scaling.items() if k != "type"}
    params["rope_type"] = scaling.get("rope_type", scaling.get("type"))
    params["rope_theta"] = base
    # transformers' dynamic type reads the original length from max_position_embeddings
    original = params.get("original_max_position_embeddings", 4096)
    config = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                         max_position_embeddings=original, rope_parameters=params)
    if params["rope_type"] == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[params["rope_type"]](config, None, seq_len=seq_len)


@needs_transformers
@pytest.mark.parametrize("scaling, base, head_dim, seq_len", CASES,
                         ids=[f"{c[0].get('rope_type', c[0].get('type'))}-{i}" for i, c in enumerate(CASES)])
def test_matches_transformers(scaling, base, head_dim, seq_len):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every key of these dicts is known
        theta, attention = scaled_inv_freq(head_dim, base, scaling, seq_len=seq_len)
    ref_theta, ref_attention = transformers_reference(scaling, base, head_dim, seq_len)
    assert theta.dtype == torch.float32 and theta.shape == ref_theta.shape
    torch.testing.assert_close(theta, ref_theta.float(), rtol=2**-22, atol=0)
    assert attention == pytest.approx(float(ref_attention), rel=1e-12)


# Worked examples ------------------------------------------------------------------

def test_linear_by_hand():
    theta, a = scaled_inv_freq(4, 100.0, {"rope_type": "linear", "factor": 2.0})
    assert theta.tolist() == pytest.approx([0.5, 0.05], rel=1e-7) and a == 1.0


def test_ntk_base_by_hand():
    # b' = 100 * 4^(4/2) = 1600; the slowest pair then turns 4 times slower, the fastest not at all
    assert ntk_scaled_base(100.0, 4.0, 4) == pytest.approx(1600.0)
    theta = inv_freq(4, ntk_scaled_base(100.0, 4.0, 4), dtype=torch.float64)
    assert theta.tolist() == pytest.approx([1.0, 0.1 / 4], rel=1e-12)


def test_dynamic_by_hand():
    # s=2, L=4096, L_orig=2048: b' = b * (2*2 - 1)^(d/(d-2)) = 100 * 3^2 = 900 for d=4
    theta, _ = scaled_inv_freq(4, 100.0, {"rope_type": "dynamic", "factor": 2.0,
                                          "original_max_position_embeddings": 2048}, seq_len=4096)
    assert theta.tolist() == pytest.approx([1.0, 1 / 30], rel=1e-6)


def test_yarn_temperature_by_hand():
    assert yarn_mscale(4.0) == pytest.approx(0.1 * math.log(4) + 1)
    assert yarn_mscale(1.0) == 1.0
    _, a = scaled_inv_freq(64, 1e4, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})
    assert a == pytest.approx(1.1386294361)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    d, b, L = 128, 10000.0, 4096
    theta, _ = scaled_inv_freq(d, b, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L})
    plain = inv_freq(d, b)
    low, high = yarn_correction_range(d, b, L)
    assert (low, high) == (math.floor(d * math.log(L / (64 * math.pi)) / (2 * math.log(b))),
                           math.ceil(d * math.log(L / (2 * math.pi)) / (2 * math.log(b))))
    assert torch.equal(theta[:low], plain[:low])
    torch.testing.assert_close(theta[high:], plain[high:] / 8)


def test_yarn_paper_and_code_ramps_agree_at_the_ends():
    code = yarn_ramp(128, 1e4, 4096, form="code", dtype=torch.float64)
    paper = yarn_ramp(128, 1e4, 4096, form="paper", dtype=torch.float64)
    assert code[0] == paper[0] == 1 and code[-1] == paper[-1] == 0
    assert 0 < float((code - paper).abs().max()) < 1


def test_llama3_bands():
    theta, _ = scaled_inv_freq(128, 500000.0, llama3_params())
    wavelen = 2 * math.pi / inv_freq(128, 500000.0)
    high_band = wavelen < 8192 / 4
    low_band = wavelen > 8192 / 1
    assert torch.equal(theta[high_band], inv_freq(128, 500000.0)[high_band])
    torch.testing.assert_close(theta[low_band], inv_freq(128, 500000.0)[low_band] / 8)
    # by hand: λ_j = 2π·500000^(j/64) < 2048  <=>  j < 64·ln(2048/2π)/ln(500000) = 28.2 -> j = 0..28
    #          λ_j > 8192                    <=>  j > 64·ln(8192/2π)/ln(500000) = 34.99 -> j = 35..63
    assert (int(high_band.sum()), int(low_band.sum())) == (29, 29)  # the 6 pairs j = 29..34 are blended
    blended = ~(high_band | low_band)
    assert bool((theta[blended] < inv_freq(128, 500000.0)[blended]).all())
    assert bool((theta[blended] > inv_freq(128, 500000.0)[blended] / 8).all())


def test_longrope_switches_at_the_original_length():
    p = longrope_params()
    short, a1 = scaled_inv_freq(HEAD_DIM, 1e4, p, seq_len=4096)
    long, a2 = scaled_inv_freq(HEAD_DIM, 1e4, p, seq_len=4097)
    torch.testing.assert_close(short, inv_freq(HEAD_DIM, 1e4) / torch.tensor(p["short_factor"]))
    torch.testing.assert_close(long, inv_freq(HEAD_DIM, 1e4) / torch.tensor(p["long_factor"]))
    assert a1 == a2 == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))


# Errors and warnings -----------------------------------------------------------------------

@pytest.mark.parametrize("scaling, exc, text", [
    ({"rope_type": "su"}, ValueError, "unknown rope_type 'su'"),
    ({"rope_type": "linear"}, ValueError, r"'linear' needs \['factor'\]"),
    ({"rope_type": "linear", "factor": 0.5}, ValueError, r"factor'\] must be a finite number >= 1 for 'linear', got 0.5"),
    ({"rope_type": "dynamic", "factor": 2.0}, ValueError, "original_max_position_embeddings"),
    ({"rope_type": "yarn", "original_max_position_embeddings": 4096}, ValueError, "needs \\['factor'\\]"),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 1, "beta_slow": 32},
     ValueError, "beta_fast > beta_slow"),
    (llama3_params(low=4.0, high=1.0), ValueError, "low_freq_factor <= high_freq_factor"),
    ({**longrope_params(), "short_factor": [1.0] * 3}, ValueError, r"short_factor'\] must be a list of dim // 2 = 32"),
    ({k: v for k, v in longrope_params().items() if k != "factor"}, ValueError, "max_position_embeddings / original"),
    ({"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}, ValueError, "disagrees with base"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.0}, ValueError, "partial_rotary_factor"),
    ("yarn", TypeError, "scaling must be a dict"),
])
def test_errors(scaling, exc, text):
    with pytest.raises(exc, match=text):
        scaled_inv_freq(HEAD_DIM, 10000.0, scaling)


def test_unknown_keys_warn():
    with pytest.warns(UserWarning, match=r"\['beta_fast'\] are not used by rope_type 'linear'"):
        scaled_inv_freq(HEAD_DIM, 10000.0, {"rope_type": "linear", "factor": 2.0, "beta_fast": 32})


# RotaryEmbedding with scaling -------------------------------------------------------------

def hf_module(params, head_dim=HEAD_DIM, original=4096):
    config = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                         max_position_embeddings=original, rope_parameters={**params, "rope_theta": 10000.0})
    return LlamaRotaryEmbedding(config)


@needs_transformers
@pytest.mark.parametrize("params", [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
    llama3_params(factor=8.0, original=4096),
])
def test_module_applies_attention_scaling_like_transformers(params):
    rope = RotaryEmbedding(HEAD_DIM, scaling=params)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 5, HEAD_DIM, generator=g), torch.randn(1, 4, 5, HEAD_DIM, generator=g)
    pos = torch.arange(5)[None] + 300
    hf_cos, hf_sin = hf_module(params)(q, pos)
    cos, sin = rope.tables(pos)
    bound = 305 * 2.0**-24 * 2 + 2.0**-23  # transformers' float32 angle rounding (ropelab: float64)
    assert float((cos - hf_cos).abs().max()) <= bound and float((sin - hf_sin).abs().max()) <= bound
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    rq, rk = rope(q, k, pos)
    atol = 2 * bound * float(torch.cat((q, k)).abs().max())
    torch.testing.assert_close(rq, hf_q, rtol=0, atol=atol)
    torch.testing.assert_close(rk, hf_k, rtol=0, atol=atol)


@needs_transformers
def test_module_dynamic_grows_and_returns_like_transformers():
    params = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 128}
    rope = RotaryEmbedding(HEAD_DIM, scaling=params, max_position=64)
    hf = hf_module(params, original=128)
    x = torch.zeros(1, 1, 1, HEAD_DIM)
    original = rope.inv_freq.clone()
    for length in (100, 300, 200, 50, 500, 10):  # grow, stay (shorter but above L_orig), reset, grow, reset
        pos = torch.arange(length)[None]
        hf(x, pos)
        rope.tables(pos)
        torch.testing.assert_close(rope.inv_freq, hf.inv_freq, rtol=2**-22, atol=0)
    assert torch.equal(rope.inv_freq, original)
    rope.tables(torch.arange(300))
    assert not torch.allclose(rope.inv_freq, original)
    theta_300, _ = scaled_inv_freq(HEAD_DIM, 10000.0, params, seq_len=300)
    torch.testing.assert_close(rope.inv_freq, theta_300)


def test_module_longrope_switches_sets():
    params = longrope_params(original=128)
    rope = RotaryEmbedding(HEAD_DIM, scaling=params)
    short, a = scaled_inv_freq(HEAD_DIM, 10000.0, params)
    long, _ = scaled_inv_freq(HEAD_DIM, 10000.0, params, seq_len=200)
    rope.tables(torch.arange(100))
    torch.testing.assert_close(rope.inv_freq, short)
    cos, _ = rope.tables(torch.arange(200))
    torch.testing.assert_close(rope.inv_freq, long)
    expected = torch.cos(199 * long.double()).float() * a
    torch.testing.assert_close(cos[199, : HEAD_DIM // 2], expected, rtol=0, atol=2e-5)


# Pairs that turn further than they did in training (chapter 07) ------------------


def test_pairs_beyond_training_by_hand():
    # θ = (1, 0.01, 0.0001), L = 100: the pairs saw 99, 0.99 and 0.0099 rad; pair 0 covered the circle.
    theta = torch.tensor([1.0, 0.01, 0.0001], dtype=torch.float64)
    assert pairs_beyond_training(theta, theta, 100, 100) == 0  # same length: nothing new
    assert pairs_beyond_training(theta, theta, 100, 101) == 2  # one position more: pairs 1 and 2
    assert pairs_beyond_training(theta, theta, 100, 10_000) == 2  # pair 0 never counts
    # interpolation by s = 4 to L' = 400: 399/4 = 99.75 > 99, a quarter position past training ...
    assert pairs_beyond_training(theta, theta / 4, 100, 400) == 2
    # ... which slack = 1 (one training position) tolerates
    assert pairs_beyond_training(theta, theta / 4, 100, 400, slack=1.0) == 0
    # interpolate only pair 2: pair 1 is beyond, pair 2 is not
    assert pairs_beyond_training(theta, theta / torch.tensor([1.0, 1.0, 5.0], dtype=torch.float64), 100, 400) == 1
    # a pair that just completes a turn, 99·θ = 2π, is not counted
    full = torch.tensor([2 * math.pi / 99], dtype=torch.float64)
    assert pairs_beyond_training(full, full, 100, 1000) == 0
    assert pairs_beyond_training(full * 0.999, full * 0.999, 100, 1000) == 1


def test_pairs_beyond_training_llama_like_example():
    # d = 128, b = 10^4, L = 4096: pairs with 4095·θ_j < 2π are j = 46..63 (18 pairs), λ_45 ≈ 4075 < 4095 < λ_46
    theta = inv_freq(128, 1e4)
    lam = 2 * math.pi / inv_freq(128, 1e4, dtype=torch.float64)
    assert lam[45] < 4095 < lam[46]
    assert pairs_beyond_training(theta, theta, 4096, 32768) == 18
    assert pairs_beyond_training(theta, theta / 8, 4096, 32768) == 18  # 32767/8 = 4095.875 > 4095
    assert pairs_beyond_training(theta, theta / 8, 4096, 32768, slack=1) == 0
    assert pairs_beyond_training(theta.double(), theta / 8, 4096, 32768, slack=1) == 0  # dtypes may differ


@pytest.mark.parametrize("args, kwargs, text", [
    ((torch.ones(3), torch.ones(4), 10, 20), {}, "same shape"),
    ((torch.ones(3), torch.ones(3), 0, 20), {}, "train_len must be a positive int"),
    ((torch.ones(3), torch.ones(3), 10, 2.5), {}, "run_len must be a positive int"),
    ((torch.ones(3), torch.ones(3), 10, 20), {"slack": -1.0}, "slack must be"),
    ((torch.ones(2, 3), torch.ones(2, 3), 10, 20), {}, "1-D"),
])
def test_pairs_beyond_training_errors(args, kwargs, text):
    with pytest.raises(ValueError, match=text):
        pairs_beyond_training(*args, **kwargs)
