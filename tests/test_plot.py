"""Tests for ropelab.plot: each figure function returns a labelled Figure."""

from matplotlib.figure import Figure

from ropelab import plot

# --- 06_attention_and_decay ---

import torch  # noqa: E402

from ropelab import decay_bound  # noqa: E402
from ropelab.attention import relative_score, rope_scores  # noqa: E402


def _labelled(ax):
    return ax.get_xlabel() and ax.get_ylabel()


def test_toeplitz_scores_heatmap():
    q, k = torch.randn(2, 8, dtype=torch.float64)
    fig = plot.toeplitz_scores(rope_scores(q.expand(6, 8), k.expand(6, 8)))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # the heatmap and its colorbar
    assert _labelled(fig.axes[0]) and len(fig.axes[0].images) == 1


def test_long_term_decay_two_panels():
    d = torch.arange(20)
    q, k = torch.randn(2, 5, 8, dtype=torch.float64)
    ones = torch.ones(8, dtype=torch.float64)
    fig = plot.long_term_decay(
        d, decay_bound(d, 8), random_mean_abs=relative_score(q, k, d).abs().mean(0),
        equal_qk=relative_score(ones, ones, d), dim=8, base=1e4,
    )
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert _labelled(left) and _labelled(right)
    assert len(left.lines) == 1 and len(right.get_legend().get_texts()) == 3


def test_pair_turns_one_line_per_base_plus_the_one_turn_line():
    fig = plot.pair_turns(dim=16, bases=(1e4, 5e5, 1e6), context=1024)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert _labelled(ax) and ax.get_yscale() == "log"
    assert len(ax.lines) == 4 and len(ax.get_legend().get_texts()) == 4
