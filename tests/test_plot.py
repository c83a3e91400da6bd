# --- chapter 03 additions ---
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from ropelab import plot


@pytest.mark.parametrize("dim", [4, 8, 16])
def test_pairing_diagram(dim):
    fig = plot.pairing_diagram(dim)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.patches) == 2 * dim            # one box per channel in each layout
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    assert len(arrows) == dim                    # one arrow of the permutation per channel
    assert len(ax.texts) - len(arrows) == 2 * dim   # one label per box
    assert len(ax.get_legend().get_texts()) == dim // 2   # one entry per pair
    assert fig._suptitle is not None and str(dim) in fig._suptitle.get_text()


def test_score_comparison():
    a = torch.randn(6, 6)
    fig = plot.score_comparison(a, a + 1.0, labels=("left", "right"))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 5                    # three heatmaps and two colour bars
    heatmaps = fig.axes[:3]
    assert [ax.get_title() for ax in heatmaps[:2]] == ["left", "right"]
    for ax in heatmaps:
        assert ax.get_xlabel() and ax.get_ylabel() and len(ax.images) == 1
    assert all(ax.get_ylabel() for ax in fig.axes[3:])   # colour bars are labelled
    with pytest.raises(ValueError):
        plot.score_comparison(a, a[:3])
