"""Tests for ropelab.plot: every figure function returns a titled Figure with labelled axes."""

import pytest
import torch
from matplotlib.figure import Figure

from ropelab import plot


# --- chapter 05 additions ---


def test_cos_table():
    fig = plot.cos_table(dim=8, n_positions=16)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # two layouts and a colour bar
    half, inter = fig.axes[:2]
    for ax in (half, inter):
        assert ax.get_xlabel() == "channel i"
        assert ax.get_ylabel() == "position m (tokens)"
        assert ax.get_title()
        assert ax.get_images()[0].get_array().shape == (16, 8)
    image = half.get_images()[0].get_array()
    assert (image[:, :4] == image[:, 4:]).all()  # half-split: the two halves are the same columns
    image = inter.get_images()[0].get_array()
    assert (image[:, 0::2] == image[:, 1::2]).all()  # interleaved: each column twice in a row
    assert len(half.get_lines()) == 1  # the dashed line at channel d/2
    assert fig.axes[2].get_ylabel()
    assert fig.get_suptitle()
    assert len(plot.cos_table(dim=8, n_positions=4, layouts=("half_split",)).axes) == 2


def test_decode_scores():
    right = torch.tensor([1.0, 2.0, 3.0, 4.0])
    wrong = torch.tensor([4.0, 3.0, 4.0, 4.0])
    fig = plot.decode_scores(right, wrong, prompt_len=2, scale=0.5)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(ax.get_lines()) == 2
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert len(ax.get_legend().get_texts()) == 3  # two lines and the shaded generated keys
    weights = fig.axes[1].get_lines()[0].get_ydata()
    assert weights.sum() == pytest.approx(1.0)
    assert fig.get_suptitle()
    with pytest.raises(ValueError, match="same length"):
        plot.decode_scores(right, wrong[:3], prompt_len=2)
