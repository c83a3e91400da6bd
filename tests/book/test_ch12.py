"""Tests for ropelab.book.ch12: the drift of keys moved step by step."""

import pytest
import torch

from ropelab import inv_freq
from ropelab.book import ch12


def _drift(dtype):
    gen = torch.Generator().manual_seed(0)
    raw = torch.randn(2, 4, 16, dtype=torch.float64, generator=gen)
    f = inv_freq(16, 10000.0)
    return ch12.rerotation_drift(raw, f, 32, [1, 4, 32], dtype=dtype)


def test_float32_keys_moved_once_stay_at_one_rounding():
    errors, ratio = _drift(torch.float32)
    assert list(errors) == list(ch12.DRIFT_WAYS)
    assert all(len(e) == 3 for e in errors.values())
    assert max(errors["once by the total"]) < 1e-5
    assert max(errors["encoded afresh"]) < 1e-5
    assert ratio == pytest.approx(1.0, abs=1e-4)


def test_bfloat16_step_by_step_drifts_past_once_by_the_total():
    errors, _ = _drift(torch.bfloat16)
    step, once = errors["step by step"], errors["once by the total"]
    assert step[0] == pytest.approx(once[0])  # one move: the same rotation
    assert step[-1] > 3 * once[-1]
    assert step[-1] > step[0]


def test_marks_past_the_start_are_refused():
    raw = torch.randn(1, 2, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match="past start"):
        ch12.rerotation_drift(raw, inv_freq(8), 4, [8], dtype=torch.float32)


def test_drift_table_has_one_row_per_move_count():
    marks = [1, 2, 4]
    drift = {"float32": {w: [1e-7, 2e-7, 3e-7] for w in ch12.DRIFT_WAYS}}
    lines = ch12.drift_table(marks, drift, rows=(1, 4)).splitlines()
    assert len(lines) == 3 and lines[2].split()[0] == "4"
    assert "3.0e-07" in lines[2]


def test_dynamic_ntk_generation_caches_every_decoded_key():
    torch.manual_seed(0)
    run = ch12.dynamic_ntk_generation(8, 2.0, 8, 12)
    assert run.config.rope_parameters["rope_type"] == "dynamic"
    assert run.cached_keys.shape == run.k_raw.shape == run.q_raw.shape == (1, 2, 12, 8)
    # position 0 is not rotated, whatever the base: its cached key is the raw key
    assert torch.allclose(run.cached_keys[..., 0, :], run.k_raw[..., 0, :], atol=1e-6)
