"""Tests for ropelab.plot: each figure function returns a labelled Figure."""

from matplotlib.figure import Figure

from ropelab import plot

# --- chapter 01 additions ---


def test_frequency_spectrum():
    fig = plot.frequency_spectrum(dim=128, bases=(1e4, 5e5), context_len=8192)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    ax_theta, ax_lambda = fig.axes
    assert len(ax_theta.get_lines()) == 2  # one per base
    assert len(ax_lambda.get_lines()) == 3  # one per base + the context line
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.get_yscale() == "log"
        assert ax.get_legend() is not None
    assert "(tokens)" in ax_lambda.get_ylabel()
    assert fig.get_suptitle()
    # the wavelength of the first pair is 2π for every base
    assert abs(ax_lambda.get_lines()[0].get_ydata()[0] - 6.283185307179586) < 1e-12
    assert "50 pairs" in ax_lambda.get_lines()[0].get_label()  # base 10^4, L = 8192
    assert "35 pairs" in ax_lambda.get_lines()[1].get_label()  # base 5·10^5


def test_frequency_spectrum_without_context_line():
    fig = plot.frequency_spectrum(dim=16, bases=(1e4,), context_len=None)
    assert len(fig.axes[1].get_lines()) == 1
