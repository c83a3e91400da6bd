"""Tests for ropelab.book.ch13: Qwen2.5-VL's position ids read off transformers."""

import pytest
import torch

from ropelab.book import ch13


def test_video_ids_follow_the_time_rule_and_the_text_restarts_after_max_hw():
    prompt, first_new = ch13.qwen25vl_video_positions(
        (3, 2, 2), seconds_per_grid=1.0, text_before=2, text_after=3
    )
    assert prompt.shape == (3, 2 + 3 + 3)
    video = prompt[:, 2:5]  # one 1 x 1 token per temporal patch
    assert video[0].tolist() == [2, 4, 6]  # s + floor(g · 1 s · 2 ids/s)
    assert video[1:].unique().tolist() == [2]
    # transformers' start for the text after a video: s + max(h, w) (merged)
    assert prompt[:, 5:].tolist() == [[3, 4, 5]] * 3
    assert first_new.tolist() == [7] * 3  # the largest id plus one


def test_odd_grid_is_refused():
    with pytest.raises(ValueError, match="even"):
        ch13.qwen25vl_video_positions((1, 3, 2), 1.0)


def test_plan_summary_counts_layers_and_bases():
    from transformers.models.gemma3 import configuration_gemma3 as gemma3
    from transformers.models.smollm3 import configuration_smollm3 as smollm3

    gemma = ch13.plan_summary(gemma3.Gemma3TextConfig(num_hidden_layers=12))
    assert gemma == "12 of 12 layers rotate, bases 10,000 on 10, 1,000,000 on 2"
    smol = ch13.plan_summary(smollm3.SmolLM3Config(num_hidden_layers=8))
    assert smol.startswith(" 6 of 8 layers rotate")


def test_partial_table_slowest_wavelength_is_that_of_the_rotated_width():
    import math

    from transformers import GPTNeoXConfig

    table = ch13.partial_table({"GPT-NeoX": (GPTNeoXConfig(), 96)})
    (line,) = table.splitlines()[1:]
    r = 24  # 25 % of 96 channels: slowest pair j = r/2 - 1, θ = b^(-(r-2)/r)
    slowest = 2 * math.pi * 10000.0 ** ((r - 2) / r)
    assert line.split()[1:5] == ["0.25", "96", "24", f"{slowest:,.0f}"]


def test_family_and_released_configs_have_their_layer_counts():
    assert all(c.num_hidden_layers == 12 for c in ch13.family_configs(12).values())
    released = ch13.released_configs()
    assert [c.num_hidden_layers for c in released.values()] == [48, 34, 48]
    assert released["Qwen3-Next-80B-A3B"].rope_parameters["rope_theta"] == 1e7


def test_band_table_gives_each_axis_the_range_of_its_pairs():
    wl = torch.tensor([1.0, 2.0, 30.0, 400.0, 5000.0, 60000.0])
    axes = {"bands": torch.tensor([0, 0, 1, 1, 2, 2]),
            "cycled": torch.tensor([0, 1, 2, 0, 1, 2])}
    lines = ch13.band_table(axes, wl).splitlines()
    assert lines[1].split() == ["time", "1", "–", "2", "1", "–", "400"]
    assert lines[3].split() == ["width", "5,000", "–", "60,000", "30", "–", "60,000"]


def test_score_table_and_xpos_summary():
    curve = {"c": torch.tensor([1.0, 0.5, 0.25])}
    (row,) = ch13.score_table(curve, at=(0, 2)).splitlines()
    assert row.split() == ["c", "1.000", "0.250"]
    note = ch13.xpos_summary(torch.tensor([0.25, 0.5]), at=1024, scale=512)
    assert "0.250 (fastest pair) to 0.500" in note and "keeps 0.25 of its term" in note


def test_xpos_score_is_the_decayed_rope_score_by_hand():
    import math

    dist = torch.tensor([0, 256, 1000])
    got = ch13.xpos_score(dist, 4, scale=512.0)
    # d = 4: θ = (1, 0.01), ζ = (0.4/1.4, 0.9/1.4) (eq. var-xpos)
    zeta, theta = (0.4 / 1.4, 0.9 / 1.4), (1.0, 0.01)
    by_hand = [sum(z ** (t / 512) * math.cos(t * th) for z, th in zip(zeta, theta)) / 2
               for t in dist.tolist()]
    assert got.dtype == torch.float64 and got[0] == 1.0
    assert got.tolist() == pytest.approx(by_hand, abs=1e-6)
