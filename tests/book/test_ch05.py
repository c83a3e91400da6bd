"""Tests for ropelab.book.ch05: the classic module, numpy references, tables."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, rotate_half

from ropelab.book import ch05

F64 = torch.float64


def test_llama_config_carries_the_head_dim():
    config = ch05.llama_config(48, max_positions=100)
    assert config.head_dim == 48 and config.max_position_embeddings == 100
    assert LlamaRotaryEmbedding(config).inv_freq.shape == (24,)


def test_classic_tables_are_transformers_current_rows():
    classic = ch05.ClassicRotary(32, max_position_embeddings=64)
    cos, sin = classic(torch.zeros(1, 64, 32), seq_len=64)
    hf_cos, hf_sin = LlamaRotaryEmbedding(ch05.llama_config(32))(
        torch.zeros(1, 64, 32), torch.arange(64)[None]
    )
    torch.testing.assert_close(cos, hf_cos[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(sin, hf_sin[0], atol=1e-6, rtol=0)
    assert classic.rebuilds == 0 and list(classic.state_dict()) == []


def test_classic_rebuilds_exactly_to_each_longer_length():
    classic = ch05.ClassicRotary(8, max_position_embeddings=4)
    x = torch.zeros(1, 1, 8)
    for n in (3, 4, 5, 5, 9):
        cos, _ = classic(x, seq_len=n)
        assert cos.shape == (n, 8)
    assert classic.rebuilds == 2 and classic.max_seq_len_cached == 9


def test_classic_cast_to_bfloat16_rounds_its_positions():
    classic = ch05.ClassicRotary(16, max_position_embeddings=8).to(torch.bfloat16)
    assert classic.inv_freq.dtype == torch.bfloat16
    cos, _ = classic(torch.zeros(1, 1, 16, dtype=torch.bfloat16), seq_len=300)
    # 257 is not a bfloat16 number: rows 256 and 257 get the same angle
    assert torch.equal(cos[256], cos[257]) and not torch.equal(cos[255], cos[256])


def _half_split_rotation(x, positions, theta):
    angle = positions.to(F64)[..., None] * theta.to(F64)
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()
    return x * cos + rotate_half(x) * sin


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10_000))
def test_rotate_numpy_is_the_half_split_rotation(half, seq, start):
    g = torch.Generator().manual_seed(half * 100 + seq)
    x = torch.randn(2, seq, 2 * half, generator=g, dtype=F64)
    theta = 10000.0 ** (-torch.arange(half, dtype=F64) / half)
    positions = torch.arange(start, start + seq)
    got = ch05.rotate_numpy(x, positions, theta)
    torch.testing.assert_close(got, _half_split_rotation(x, positions, theta),
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)


def test_rotate_numpy_scores_depend_on_the_distance_only():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 16, generator=g, dtype=F64)
    theta = 10000.0 ** (-torch.arange(8, dtype=F64) / 8)
    def score(m, n):
        return float(ch05.rotate_numpy(q, torch.tensor(m), theta)
                     @ ch05.rotate_numpy(k, torch.tensor(n), theta))
    assert score(7, 3) == pytest.approx(score(1004, 1000), abs=1e-10)
    assert score(7, 3) != pytest.approx(score(8, 3), abs=1e-3)


def test_rotate_numpy_takes_per_row_positions():
    x = torch.ones(2, 3, 4, 8, dtype=F64)
    positions = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])[:, None, :]
    theta = torch.tensor([1.0, 0.1, 0.01, 0.001])
    got = ch05.rotate_numpy(x, positions, theta)
    assert got.shape == x.shape and got.dtype == F64
    torch.testing.assert_close(got[1, 2, 0], ch05.rotate_numpy(x[0, 0, 0], 5, theta))


def test_exact_cos_is_the_duplicated_cosine_table():
    theta = torch.tensor([1.0, 0.5, 0.25], dtype=torch.float32)
    table = ch05.exact_cos(5, theta)
    assert table.shape == (5, 6) and table.dtype == F64
    assert float(table[3, 1]) == pytest.approx(math.cos(1.5), abs=1e-15)
    torch.testing.assert_close(table[:, :3], table[:, 3:])


def test_offset_damage_of_identical_rows_is_zero():
    rows = [torch.tensor([0.0, 1.0, 2.0]), torch.tensor([3.0, -1.0])]
    hurt = ch05.offset_damage(rows, rows, scale=1.0)
    assert hurt["max_delta"] == 0 and hurt["max_tv"] == 0 and hurt["moved"] == 0


def test_offset_damage_by_hand():
    # softmax((0, 0)) = (1/2, 1/2); softmax((ln 3, 0)) = (3/4, 1/4): TV = 1/4
    right = [torch.tensor([0.0, 0.0], dtype=F64)]
    wrong = [torch.tensor([math.log(3.0), 0.0], dtype=F64)]
    hurt = ch05.offset_damage(right, wrong, scale=1.0)
    assert hurt["max_tv"] == pytest.approx(0.25, abs=1e-15)
    assert hurt["max_delta"] == pytest.approx(math.log(3.0))
    swapped = ch05.offset_damage(
        [torch.tensor([1.0, 0.0])], [torch.tensor([0.0, 1.0])], 1.0
    )
    assert swapped["moved"] == 1


def test_time_per_call_prints_one_row_per_case(capsys):
    ch05.time_per_call({"a": torch.neg, "b": torch.abs},
                       {"one": torch.ones(3), "two": torch.ones(4)}, min_run_time=0.001)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1].startswith("one") and lines[2].count("µs") == 2


def test_decimal_digits():
    assert ch05.decimal_digits(8) == pytest.approx(2.408, abs=1e-3)
    assert ch05.decimal_digits(53) == pytest.approx(15.95, abs=1e-2)
    assert np.isclose(ch05.decimal_digits(24), 24 * math.log10(2))
