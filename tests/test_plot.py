"""Tests for ropelab.plot: every function returns a labelled Figure."""

from matplotlib.figure import Figure

from ropelab import plot

# --- chapter 04 additions ---


def test_rotation_matrix_sparsity():
    fig = plot.rotation_matrix_sparsity(dim=8, position=5)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # two layouts and a colour bar
    for ax in fig.axes[:2]:
        assert ax.get_xlabel() == "input channel"
        assert ax.get_ylabel() == "output channel"
        assert ax.get_title()
        image = ax.get_images()[0].get_array()
        assert int((~image.mask).sum()) == 2 * 8  # exactly 2d non-zeros shown
    assert fig.axes[2].get_ylabel()
    assert fig.get_suptitle()


def test_rotation_cost():
    fig = plot.rotation_cost(dims=(8, 16, 32))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 3]
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert len(ax.get_legend().get_texts()) == len(ax.get_lines())
    assert fig.get_suptitle()
