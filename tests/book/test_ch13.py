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
