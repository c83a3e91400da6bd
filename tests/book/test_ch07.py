"""Tests for ropelab.book.ch07: transformers on a tiny config, mpmath, the tables."""

import math

import pytest
import torch

import ropelab
from ropelab.book import ch07

F64 = torch.float64


def test_hf_rope_linear_divides_by_the_factor():
    linear = {"rope_type": "linear", "factor": 4.0}
    theta, scale = ch07.hf_rope(linear, 64, 10000.0, 2048)
    torch.testing.assert_close(theta, ropelab.inv_freq(64) / 4.0)
    assert scale == 1.0


def test_hf_rope_dynamic_reads_the_length_from_the_config():
    dyn = {"rope_type": "dynamic", "factor": 1.0,
           "original_max_position_embeddings": 512}
    short, _ = ch07.hf_rope(dyn, 32, 10000.0, 512, seq_len=256)
    longer, _ = ch07.hf_rope(dyn, 32, 10000.0, 512, seq_len=2048)
    torch.testing.assert_close(short, ropelab.inv_freq(32))
    base = 10000.0 * 4.0 ** (32 / 30)  # s'(ℓ) = ℓ/L = 4 with factor 1
    torch.testing.assert_close(longer, ropelab.inv_freq(32, base))


def test_llama_config_sets_the_rope_dict():
    config = ch07.llama_config(64, 500000.0, {"rope_type": "yarn", "factor": 4.0,
                                              "original_max_position_embeddings": 1024},
                               1024)
    assert config.max_position_embeddings == 4096
    assert config.rope_parameters["rope_theta"] == 500000.0


def test_rotate_is_the_interleaved_rotation():
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]], dtype=F64)
    freqs = torch.tensor([math.pi / 2, math.pi], dtype=F64)
    got = ch07.rotate(x, torch.tensor([1]), freqs)
    torch.testing.assert_close(got, torch.tensor([[0.0, 1.0, 0.0, -1.0]], dtype=F64),
                               atol=1e-15, rtol=0)


def test_midpoint_deviation_by_direct_sum():
    d, b = 16, 100.0
    theta = [b ** (-2 * j / d) for j in range(d // 2)]
    want = abs(sum(math.cos(t / 2) for t in theta)
               - (d / 2 + sum(math.cos(t) for t in theta)) / 2)
    assert ch07.midpoint_deviation_mpmath(d, b) == pytest.approx(want, abs=1e-14)


def test_midpoint_deviation_exceeds_the_published_bound():
    got = ch07.midpoint_deviation_mpmath(128, 10000.0)
    assert got > 128 / (32 * math.log(10000.0))


def test_ramp_differences_lists_each_setting():
    lines = ch07.ramp_differences(128, 8.0, [(10000.0, 4096)])
    assert len(lines) == 2 and "20..46" in lines[1] and "21..45" in lines[1]


def test_llama3_band_table_counts_pairs():
    lam = torch.arange(1.0, 11.0)
    lines = ch07.llama3_band_table(lam, (3, 2, 5))
    assert lines[1].split()[:3] == ["kept", "3", "0..2"]
    assert lines[3].split()[:3] == ["divided", "5", "5..9"]


def test_worked_table_for_plain_extrapolation_and_pi():
    theta = ropelab.inv_freq(128, 10000.0, dtype=F64)
    lines = ch07.worked_table(theta, {"none": theta, "pi": theta / 8}, 4096, 32768)
    none, pi = lines[1].split(), lines[2].split()
    assert none[1] == "18" and none[3] == "0" and none[-1] == "1.00"
    assert pi[1] == "0" and pi[3] == "46" and pi[-1] == "8.00"


def test_logn_table_values():
    lines = ch07.logn_table(8192, [8191, 8192 * 8])
    first, second = lines[1].split(), lines[2].split()
    assert first[1] == "1.000" and first[2] == "1.000"  # ⌊8191/8192⌋ = 0
    assert float(second[1]) == pytest.approx(math.log(8 * 8192, 8192), abs=1e-3)
    assert float(second[2]) == pytest.approx(1 + 0.1 * math.log(9), abs=1e-3)


def test_extrapolation_ratio_is_positive_and_ordered():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 32, generator=g, dtype=F64)
    h = torch.view_as_complex(q.view(-1, 2))
    h = h * torch.view_as_complex(k.view(-1, 2)).conj()
    line = ch07.extrapolation_ratio(h, 32, 10000.0, 256, 1024)
    low, high = (float(v) for v in line.split(": ")[-1].split(" to "))
    assert 0 < low <= high


def test_yarn_logit_factor_is_transformers_attention_factor_squared():
    from ropelab.book.solutions import ch07 as solutions

    assert solutions.yarn_logit_factor(1.0) == 1.0
    for factor in (2.0, 16.0):
        yarn = {"rope_type": "yarn", "factor": factor,
                "original_max_position_embeddings": 1024}
        _, mu = ch07.hf_rope(yarn, 64, 10000.0, 1024)
        assert solutions.yarn_logit_factor(factor) == pytest.approx(mu**2, rel=1e-12)
