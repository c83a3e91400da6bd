"""Tests for ropelab.book.figures: each figure function returns a labelled Figure.

Every figure any test here makes is also held to the book's style (the
autouse fixture below): text at least MIN_FONT_PT as rendered in the book
column, no wider than the column, transparent background, drawn by the
style-enforcing figure class.
"""

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from ropelab import decay_bound
from ropelab.book import figures
from ropelab.book.figures import _style
from ropelab.attention import rope_scores, score_at_distance

matplotlib.use("Agg")

# --- the book's figure style (applies to every test in this file) ---


# What collides in each figure function's figures (_style.overlaps), filled by the
# fixture below as the tests draw them, read by test_no_overlapping_text_or_legends.
COLLISIONS: dict[str, list[str]] = {}


def _figure_function() -> str | None:
    """The name of the figure function (figures.__all__) that is making a figure now."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("ropelab.book.figures.") and frame.f_code.co_name in figures.__all__:
            return frame.f_code.co_name
        frame = frame.f_back
    return None


@pytest.fixture(autouse=True)
def book_style_of_every_figure(monkeypatch):
    """Check the style of every figure a test makes (through _style.new_figure)."""
    made = []
    new_figure = _style.new_figure

    def recording(*args, **kwargs):
        fig, axes = new_figure(*args, **kwargs)
        made.append((fig, _figure_function()))
        return fig, axes

    for module in (_style, *figures.CHAPTERS):
        monkeypatch.setattr(module, "new_figure", recording)
    yield
    for fig, function in made:
        assert isinstance(fig, _style._BookFigure)
        assert fig.get_figwidth() <= figures.MAX_WIDTH + 1e-9
        # transparent: the figure sits on light and dark pages alike
        assert fig.get_facecolor()[3] == 0.0
        sizes = figures.rendered_font_sizes(fig)
        title = fig.get_suptitle()
        small = [(t, round(pt, 2)) for t, pt in sizes if pt < figures.MIN_FONT_PT - 1e-6]
        assert not small, f"{title!r}: text under {figures.MIN_FONT_PT} pt as rendered: {small}"
        if function is not None:
            COLLISIONS.setdefault(function, []).extend(_style.overlaps(fig))


def test_every_figure_module_draws_through_the_style_and_is_re_exported():
    # the fixture above sees a figure only if its module makes it with _style.new_figure
    import inspect

    for module in figures.CHAPTERS:
        assert module.new_figure is _style.new_figure, module.__name__
        doc = (module.__doc__ or "").splitlines()
        assert doc and doc[0].strip(), f"{module.__name__}: no first docstring line"
        for name in module.__all__:
            assert getattr(figures, name) is getattr(module, name), name
            assert inspect.isfunction(getattr(module, name)) and name in figures.__all__
    exported = [n for m in figures.CHAPTERS for n in m.__all__]
    assert len(exported) == len(set(exported)), "two chapters export one name"


def test_style_raises_small_text_and_scales_wide_figures():
    fig, ax = _style.new_figure(width=14.0, height=6.0)
    assert tuple(fig.get_size_inches()) == pytest.approx((figures.MAX_WIDTH, 6.0 * figures.MAX_WIDTH / 14.0))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set_title("tiny", fontsize=5)
    ax.legend(fontsize="xx-small")
    ax.set_xlabel("x (units)", fontsize=6)
    ax.tick_params(labelsize=4)
    sizes = dict(figures.rendered_font_sizes(fig))
    assert min(sizes.values()) >= figures.MIN_FONT_PT - 1e-6
    assert {"tiny", "a line", "x (units)"} <= set(sizes)


def test_rendered_size_follows_the_column():
    fig, ax = _style.new_figure(width=3.0, height=2.0)
    ax.set_xlabel("x", fontsize=10)
    narrow = dict(figures.rendered_font_sizes(fig, column_px=50))["x"]
    wide = dict(figures.rendered_font_sizes(fig, column_px=10_000))["x"]
    # a 3 in figure at 192 dpi is ~576 px: a 50 px column shrinks it,
    # a wide one shows it at its natural size, twice its size in inches
    assert narrow < 3 < wide
    assert wide == pytest.approx(10 * fig.dpi / 96)
    assert narrow == pytest.approx(10 * 50 / (fig.get_tightbbox().width + 0.2) / 96)


@pytest.mark.parametrize(
    "title, chars, expected",
    [
        ("a b c d", 3, "a b\nc d"),
        ("short", 80, "short"),
        (r"rotate $z\,e^{im \theta}$ by m", 10, "rotate\n$z\\,e^{im \\theta}$\nby m"),
        ("one\ntwo three", 5, "one\ntwo\nthree"),
    ],
)
def test_wrap_title_keeps_math_whole(title, chars, expected):
    assert _style.wrap_title(title, chars) == expected


def test_long_title_is_wrapped_to_the_figure():
    fig, _ = _style.new_figure(width=4.0, height=3.0)
    _style.finish(fig, "word " * 40)
    assert fig.get_suptitle().count("\n") >= 2


# --- 01_frequencies ---


def test_frequency_spectrum():
    fig = figures.frequency_spectrum(dim=128, bases=(1e4, 5e5), context_len=8192)
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
    fig = figures.frequency_spectrum(dim=16, bases=(1e4,), context_len=None)
    assert len(fig.axes[1].get_lines()) == 1


# --- 02_complex_rotation ---


def test_pair_rotation_panels_and_zoom():
    fig = figures.pair_rotation(thetas=(1.0, 1e-4), positions=range(8))
    assert isinstance(fig, Figure)
    # two panels, and one zoom inset in the slow pair's panel only
    assert len(fig.axes) == 2
    main = fig.axes
    assert len(main[0].child_axes) == 0 and len(main[1].child_axes) == 1
    for ax in main:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.get_aspect() == 1.0
        assert len(ax.lines) >= 1  # the circle
    # one arrow annotation per position in each panel
    assert sum(1 for t in main[0].texts if t.get_text() == "") == 8
    assert fig._suptitle is not None


def test_pair_rotation_fast_only_has_no_inset():
    fig = figures.pair_rotation(thetas=(1.0,), positions=range(4), pair=(0.6, 0.8))
    assert len(fig.axes) == 1 and not fig.axes[0].child_axes
    labels = sorted(t.get_text() for t in fig.axes[0].texts if t.get_text())
    assert labels == ["m=0", "m=1", "m=2", "m=3"]


def test_pair_score_lines_and_labels():
    fig = figures.pair_score(thetas=(1.0, 0.1), distances=range(-5, 6))
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert len(ax.lines) == 4  # two score curves and the ±|q||k| bounds
    assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_legend() is not None
    assert len(ax.get_legend().get_texts()) == 3
    x, y = ax.lines[0].get_data()
    assert list(x) == list(range(-5, 6))
    assert max(abs(v) for v in y) <= abs(complex(1.0, 0.5)) * abs(complex(0.8, -0.4)) + 1e-12


# --- 04_rotation_matrix ---


def test_rotation_matrix_sparsity():
    fig = figures.rotation_matrix_sparsity(dim=8, position=5)
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
    fig = figures.rotation_cost(dims=(8, 16, 32))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 3]
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert len(ax.get_legend().get_texts()) == len(ax.get_lines())
    assert fig.get_suptitle()


# --- 03_pairing ---


@pytest.mark.parametrize("dim", [4, 8, 16])
def test_pairing_diagram(dim):
    fig = figures.pairing_diagram(dim)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(ax.patches) == 2 * dim            # one box per channel in each layout
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    assert len(arrows) == dim                    # one arrow of the permutation per channel
    assert len(ax.texts) - len(arrows) == 2 * dim   # one label per box
    assert len(fig.legends[0].get_texts()) == dim // 2   # one entry per pair
    assert fig._suptitle is not None and str(dim) in fig._suptitle.get_text()


def test_score_comparison():
    a = torch.randn(6, 6)
    fig = figures.score_comparison(a, a + 1.0, labels=("left", "right"))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 5                    # three heatmaps and two colour bars
    heatmaps = fig.axes[:3]
    assert [ax.get_title() for ax in heatmaps[:2]] == ["left", "right"]
    assert all(len(ax.images) == 1 for ax in heatmaps)
    # one shared axis label each way (three narrow panels: per-panel labels collide)
    assert heatmaps[0].get_ylabel() and fig.get_supxlabel()
    assert all(ax.get_ylabel() for ax in fig.axes[3:])   # colour bars are labelled
    with pytest.raises(ValueError):
        figures.score_comparison(a, a[:3])


# --- 08_numerics ---


def test_angle_precision():
    fig = figures.angle_precision(dim=16, bases=(1e4, 5e5), n_positions=30)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # one panel per base
    for ax in fig.axes:
        # measured float32, float16, bfloat16; bounds for the four dtypes; the float16 limit
        assert len(ax.get_lines()) == 8
        assert ax.get_xlabel() == "position m (tokens)" and ax.get_title()
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert fig.axes[0].get_ylabel()
    # one legend below the panels, off the data: four dtypes, measured, bound, 65,504
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 7
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert fig.get_suptitle()
    # the float16 line stops at its overflow: NaN beyond 65,504
    f16 = next(line for line in fig.axes[0].get_lines() if line.get_label() == "float16, measured")
    x, y = f16.get_data()
    assert all(v != v for v, p in zip(y, x) if p > 65504) and all(v == v for v, p in zip(y, x) if p < 65504)
    fig2 = figures.angle_precision(dim=16, bases=(1e4,), n_positions=10, cos_in_angle_dtype=True)
    assert len(fig2.axes) == 1 and "angle's dtype" in fig2.get_suptitle()

# --- 05_cache_and_decoding ---


def test_cos_table():
    fig = figures.cos_table(dim=8, n_positions=16)
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
    assert len(figures.cos_table(dim=8, n_positions=4, layouts=("half_split",)).axes) == 2


def test_decode_scores():
    right = torch.tensor([1.0, 2.0, 3.0, 4.0])
    wrong = torch.tensor([4.0, 3.0, 4.0, 4.0])
    fig = figures.decode_scores(right, wrong, prompt_len=2, scale=0.5)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(ax.get_lines()) == 2
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    # one legend for both panels: two lines and the shaded generated keys
    (legend,) = fig.legends
    assert len(legend.get_texts()) == 3
    weights = fig.axes[1].get_lines()[0].get_ydata()
    assert weights.sum() == pytest.approx(1.0)
    assert fig.get_suptitle()
    with pytest.raises(ValueError, match="same length"):
        figures.decode_scores(right, wrong[:3], prompt_len=2)


# --- 06_attention_and_decay ---


def _labelled(ax):
    return ax.get_xlabel() and ax.get_ylabel()


def test_toeplitz_scores_heatmap():
    q, k = torch.randn(2, 8, dtype=torch.float64)
    fig = figures.toeplitz_scores(rope_scores(q.expand(6, 8), k.expand(6, 8)))
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # the heatmap and its colorbar
    assert _labelled(fig.axes[0]) and len(fig.axes[0].images) == 1


def test_long_term_decay_two_panels():
    d = torch.arange(20)
    q, k = torch.randn(2, 5, 8, dtype=torch.float64)
    ones = torch.ones(8, dtype=torch.float64)
    fig = figures.long_term_decay(
        d, decay_bound(d, 8), random_mean_abs=score_at_distance(q, k, d).abs().mean(0),
        equal_qk=score_at_distance(ones, ones, d), dim=8, base=1e4,
    )
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = fig.axes
    assert _labelled(left) and _labelled(right)
    assert len(left.lines) == 1 and len(right.get_legend().get_texts()) == 3


def test_pair_turns_one_line_per_base_plus_the_one_turn_line():
    fig = figures.pair_turns(dim=16, bases=(1e4, 5e5, 1e6), context=1024)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert _labelled(ax) and ax.get_yscale() == "log"
    assert len(ax.lines) == 4 and len(ax.get_legend().get_texts()) == 4


# --- 09_performance ---


def test_bench_ratios():
    from dataclasses import asdict

    from ropelab import bench

    results = bench.run([(1, 2, 8, 16), (2, 1, 1, 16)], ("float32", "bfloat16"), min_runs=1, min_time=0)
    results[-1].best_s = results[-1].ratio_floor = results[-1].ratio_hf = None  # a skipped method: no bar
    fig = figures.bench_ratios(results)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # one panel per dtype
    n_methods = len(bench.METHODS) - 1  # the floor is the line at 1, not a bar
    for ax, dtype, bars in zip(fig.axes, ("float32", "bfloat16"), (2 * n_methods, 2 * n_methods - 1)):
        assert ax.get_title() == dtype and ax.get_xlabel() == "method" and ax.get_yscale() == "log"
        assert len(ax.patches) == bars + 1  # bars + the HF band
        assert ax.get_ylabel() == "time / time of copy_ (×)"
        assert ax.get_lines()[0].get_ydata()[0] == 1.0  # the floor
    assert [t.get_text() for t in fig.axes[-1].get_xticklabels()][:2] == ["clone", "hf"]  # shared x
    assert fig.get_suptitle()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "the HF formula" in labels and "shape (1, 2, 8, 16)" in labels and len(labels) == 5
    # the ticks of the cost model: the HF formula moves five times the floor's bytes
    assert fig.axes[0].collections[0].get_offsets()[1][1] == 5.0
    # dicts from a --json file work the same, and the model ticks can be left out
    fig2 = figures.bench_ratios([asdict(r) for r in results if r.dtype == "float32"], model=False)
    assert len(fig2.axes) == 1 and not fig2.axes[0].collections

# --- 10_multi_axis ---


def test_patch_score_maps_one_heatmap_per_variant():
    import math

    import pytest
    import torch

    from ropelab.multi_axis import axial_theta_xy

    g = torch.Generator().manual_seed(0)
    q = torch.randn(16, dtype=torch.float64, generator=g)
    theta = axial_theta_xy(16, 100.0, dtype=torch.float64)
    c, s = math.cos(math.pi / 4), math.sin(math.pi / 4)
    turned = theta @ torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    fig = figures.patch_score_maps(q, q, {"axial": theta, "mixed, turned 45°": turned}, rows=6, cols=5, query_xy=(2, 3))
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2 and len(fig.axes) == 4  # two heatmaps, two colour bars
    for ax in panels:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.images[0].get_array().shape == (6, 5)
        assert ax.get_legend() is None and ax.get_lines()  # the query marker, no legend on data
    # q = k: the query patch itself has the largest score, |q|^2
    assert panels[0].images[0].get_array()[3, 2] == pytest.approx(float(q @ q), rel=1e-12)
    with pytest.raises(ValueError, match="query_xy"):
        figures.patch_score_maps(q, q, {"axial": theta}, rows=4, cols=4, query_xy=(4, 0))

# --- 07_context_extension ---


def test_context_extension_factors():
    fig = figures.context_extension_factors(dim=128, base=1e4, original=4096, factor=8.0,
                                         longrope_factors=[1.0 + j / 7 for j in range(64)])
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 7  # PI, NTK-aware, dynamic, YaRN, Llama 3, LongRoPE, and the vertical line at L
    assert ax.get_xlabel() and ax.get_ylabel() and fig.get_suptitle()
    assert "(tokens)" in ax.get_xlabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert len(fig.legends) == 1 and ax.get_legend() is None  # below the axes, off the curves
    pi, ntk = lines[0].get_ydata(), lines[1].get_ydata()
    assert all(abs(v - 8.0) < 1e-12 for v in pi)  # PI divides every θ_j by s
    assert abs(ntk[0] - 1.0) < 1e-12 and abs(ntk[-1] - 8.0) < 1e-9  # NTK: fastest kept, slowest divided by s
    assert list(lines[-1].get_xdata()) == [4096, 4096]


def test_context_extension_factors_optional_lines():
    fig = figures.context_extension_factors(dim=64, dynamic_len=None, llama3=None)
    assert len(fig.axes[0].get_lines()) == 4  # PI, NTK-aware, YaRN and the vertical line
    with pytest.raises(ValueError, match="dim // 2 = 32"):
        figures.context_extension_factors(dim=64, longrope_factors=[1.0] * 3)


# --- chapter 07's per-section figures ---


def _labels(fig):
    ax = fig.axes[0]
    legend = ax.get_legend() or fig.legends[0]  # in the axes, or below them off the data
    return ax.get_xlabel(), ax.get_ylabel(), [t.get_text() for t in legend.get_texts()]


def test_chapter_07_section_figures_have_labelled_axes_and_legends():
    figs = [
        figures.pi_interpolation([0, 0.5, 1], [1.0, 0.8, 0.5], [0, 1], [1.0, 0.5], [0, 0.1, 0]),
        figures.angle_overshoot({"PI": [0.5, 1.0, 1.0]}, first_slow=1),
        figures.yarn_ramps([1, 0.5, 0], [1, 0.7, 0], j_low=0, j_high=2),
        figures.attention_temperature([2, 4], {"YaRN": [1.1, 1.3]}),
        figures.llama3_bands([10, 3000, 9000], [1, 3, 8], high_wavelength=2048, low_wavelength=8192),
        figures.longrope_factors([1, 1.1], [1, 9], first_slow=1),
    ]
    for fig in figs:
        xlabel, ylabel, legend = _labels(fig)
        assert xlabel and ylabel and legend
        assert fig._suptitle is not None
    assert "slow pairs (no full turn in training)" in _labels(figs[1])[2]
    assert len(figs[2].axes[0].lines) == 4  # two ramps, two ramp ends


def test_stale_cache_error_one_line():
    fig = figures.stale_cache_error([0, 1, 2], [0.0, 0.5, 1.0])
    assert len(fig.axes[0].lines) == 1 and "position" in fig.axes[0].get_xlabel()


def test_angle_error_sources_one_line_per_source():
    fig = figures.angle_error_sources([1, 10, 100], {"frequency": [1e-8, 1e-7, 1e-6], "cos": 3e-8},
                                   base=10000.0, dim=8)
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and ax.get_xscale() == "log" and "position" in ax.get_xlabel()

def test_cost_bars():
    fig = figures.cost_bars(["copy_", "clone", "hf"], dim=16, dtype="bfloat16")
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    # read, written (stacked) and allocated per method, over the floor 2ds: hf reads 2.75, writes 2.25
    assert heights[:3] == [0.5, 0.5, 2.75] and heights[3:6] == [0.5, 0.5, 2.25] and heights[6:] == [0.0, 0.5, 2.25]
    assert ax.get_ylabel() and ax.get_xlabel() == "method" and fig.get_suptitle()
    with pytest.raises(ValueError, match="methods is empty"):
        figures.cost_bars([])


def test_bench_grid():
    from ropelab.bench import GridResult

    grid = [GridResult(dt, lay, order, (1, 2, s, 16), "out", "copy_", 1.0, 1.0, r)
            for dt in ("float32", "bfloat16") for lay in ("half_split", "interleaved")
            for order in ("heads", "positions") for s, r in ((256, 1.5), (4096, 1.1))]
    grid.append(GridResult("bfloat16", "half_split", "heads", (4, 2, 1, 16), "out", "hf", 1.0, 2.0, 0.5))
    goals = [{"against": "copy_", "dtypes": ["float32"], "shapes": [[1, 2, 256, 16]], "limit": 2.0}]
    fig = figures.bench_grid(grid, goals)
    assert [ax.get_title() for ax in fig.axes] == ["float32", "bfloat16"]
    assert len(fig.axes[0].get_lines()) == 4 + 1 + 1 and len(fig.axes[1].get_lines()) == 4 + 1  # goal in float32
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == [1.5, 1.1]
    with pytest.raises(ValueError, match="no results against copy_"):
        figures.bench_grid(grid[-1:])


# --- 11_trained_model ---


def _rows():
    return [{"method": m, "finetune_steps": s, "length": n, "accuracy": a}
            for m in ("none", "pi") for s in (0, 150) for n, a in ((64, 1.0), (256, 0.25))]


def test_extrapolation_accuracy():
    fig = figures.extrapolation_accuracy(_rows(), train_len=64, title="t")
    assert len(fig.axes) == 2  # without and with fine-tuning
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_title()
        assert len(ax.get_lines()) == 3  # two methods and the training length
    assert "accuracy" in fig.axes[0].get_ylabel()
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == [1.0, 0.25]
    assert len(fig.legends) == 1 and fig.get_suptitle() == "t"


def test_attention_entropy_by_length():
    import math

    fig = figures.attention_entropy_by_length([64, 128], {"a": [1.0, 2.0]})
    (ax,) = fig.axes
    assert "nats" in ax.get_ylabel() and "tokens" in ax.get_xlabel()
    assert abs(ax.get_lines()[1].get_ydata()[1] - math.log(128)) < 1e-12


def test_toy_attention():
    import torch

    def maps(n):
        prev = torch.diag(torch.ones(n - 1), -1)
        prev[0, 0] = 1.0
        return torch.stack((torch.eye(n), prev)), torch.full((2, n, n), 1.0 / n).tril()

    fig = figures.toy_attention({8: maps(8), 32: maps(32)}, value_positions={8: 3, 32: 5}, train_len=8)
    assert len(fig.axes) == 6  # 2 rows of (heatmap, line plot) + 2 colour bars
    assert "head 1" in fig.axes[0].get_title()  # the head that looks one step back
    assert all(ax.get_xlabel() for ax in fig.axes[:2])


# --- intro ---


def test_rope_at_a_glance():
    import math

    fig = figures.rope_at_a_glance(theta=0.5, m=1, n=3, shift=2, dim=16, position=3)
    assert isinstance(fig, Figure) and len(fig.axes) == 2 and fig.get_suptitle()
    left, right = fig.axes
    # four arrows (q and k, before and after the shift) with their position labels
    labels = sorted(t.get_text() for t in left.texts if t.get_text().startswith("$"))
    assert labels == ["$k_{3}$", "$k_{5}$", "$q_{1}$", "$q_{3}$"]
    # one clock hand per pair, at angle position * base^(-2j/d)
    hands = [line for line in right.lines if line.get_linestyle() == "-" and len(line.get_xdata()) == 2]
    assert len(hands) == 8
    for j, hand in enumerate(hands):
        (x0, x1), (y0, y1) = hand.get_xdata(), hand.get_ydata()
        angle = math.atan2(y1 - y0, x1 - x0) % (2 * math.pi)
        assert angle == pytest.approx((3 * 10000.0 ** (-2 * j / 16)) % (2 * math.pi), abs=1e-9)


def test_chapter13_figures():
    from ropelab import inv_freq
    from ropelab.variants import mean_cos_score, partial_inv_freq, rerope_positions
    spectra = {"RoPE": inv_freq(16), "partial": partial_inv_freq(16, 0.5)}
    fig = figures.variant_spectra(spectra, context=100)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and "tokens" in ax.get_ylabel()
    assert len(ax.get_legend().get_texts()) == 3  # two variants and the context line
    d = torch.arange(50)
    fig = figures.variant_decay(d, {"RoPE": mean_cos_score(d, inv_freq(16))})
    assert "tokens" in fig.axes[0].get_xlabel()
    fig = figures.relative_position_maps({"a": rerope_positions(8, 3), "b": rerope_positions(8, 8)})
    assert len(fig.axes) == 3  # two heatmaps and one colour bar
    plans = {"m": [{"rope": True, "base": 1e4}, {"rope": False, "base": None}]}
    fig = figures.layer_plans(plans)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "RoPE, base 10,000", "no position encoding"]
    with pytest.raises(ValueError):
        figures.layer_plans({})


# --- 12_positions_in_practice ---


def test_packing_masks():
    fig = figures.packing_masks([0, 3, 7, 10])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left, right = (ax.get_images()[0].get_array() for ax in fig.axes)
    assert int((left == 2).sum()) == 3 * 4 + 3 * 3 + 4 * 3  # query rows below a cut see earlier docs
    assert int((right == 2).sum()) == 0 and int((right > 0).sum()) == 6 + 10 + 6
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][:5] == ["0", "1", "2", "0", "1"]
    for ax in fig.axes:
        assert "(tokens)" in ax.get_xlabel() and ax.get_title()


def test_rerotation_drift():
    fig = figures.rerotation_drift([1, 10, 100], {"step by step": [1e-7, 1e-6, 1e-5], "once": [1e-7] * 3})
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2 and ax.get_xscale() == ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="has 2 values for 3 shifts"):
        figures.rerotation_drift([1, 2, 3], {"a": [1, 2]})
    both = {"float32, step": [1e-7] * 3, "bfloat16, step": [1e-2] * 3}
    (ax,) = figures.rerotation_drift([1, 10, 100], both).axes
    styles = [line.get_linestyle() for line in ax.get_lines()]
    colours = [line.get_color() for line in ax.get_lines()]
    assert styles == ["-", "--"] and colours[0] == colours[1]  # one colour per way


def test_dynamic_ntk_scores():
    n = torch.arange(10)
    fig = figures.dynamic_ntk_scores(n, {"fresh": n * 1.0, "cached": n * 1.0 + 1}, original_max=6)
    ax_s, ax_d = fig.axes
    assert len(ax_s.get_lines()) == 3 and len(ax_d.get_lines()) == 2  # series + the L line
    assert ax_d.get_lines()[0].get_ydata().tolist() == [1.0] * 10


def test_layout_scores():
    right = torch.arange(16.0).reshape(4, 4)
    fig = figures.layout_scores(right, -right, labels=("NEOX", "NORM"))
    ax_r, ax_w = fig.axes[:2]
    assert [ax_r.get_title(), ax_w.get_title()] == ["NEOX", "NORM"]
    shown = ax_r.get_images()[0].get_array()
    assert float(shown[3, 2]) == 14.0 and bool(shown.mask[0, 1])  # the future is blank
    with pytest.raises(ValueError, match="square score matrices"):
        figures.layout_scores(torch.zeros(2, 3), torch.zeros(2, 3))


# --- a fresh machine: the figures module writes nothing ---------------------------

FRESH_FONT_CACHE = """
import threading, time
# matplotlib announces a font-cache build that runs over 5 s (a threading.Timer);
# here every timer fires at once, as on a slow machine
class Now(threading.Timer):
    def __init__(self, interval, function, *args, **kwargs):
        super().__init__(0, function, *args, **kwargs)
threading.Timer = Now
{import_line}
time.sleep(0.5)
"""


@pytest.mark.parametrize("import_line", ["from ropelab.book import figures", "import matplotlib.pyplot"])
def test_importing_the_figures_writes_nothing_while_the_font_cache_builds(import_line, tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, MPLCONFIGDIR=str(tmp_path / "mpl"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = FRESH_FONT_CACHE.format(import_line=import_line)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "mpl").is_dir()  # the cache was built from nothing
    if import_line.startswith("from ropelab"):
        assert run.stdout == run.stderr == ""
    else:  # the control: without the book's filter, matplotlib says so
        assert "building the font cache" in run.stderr


# The figures of the book drawn from parameters alone, with the book's arguments:
# held to the style (fixture) and, below, checked for collisions.
BOOK_CALLS = {
    "sinusoidal_encoding": dict(d_model=64, n_positions=128),
    "frequency_ladder": dict(dim=128, bases=(10000.0, 500000.0)),
    "angle_sawtooth": dict(dim=128, pairs=(0, 8, 16, 32), n_positions=64),
    "wavelength_bars": dict(dim=128, base=10000.0, contexts=(2048, 8192, 32768)),
    "full_turn_count": dict(dim=128, bases=(10000.0, 500000.0)),
    "shift_invariance": dict(theta=0.35, m=2, n=5, shift=3),
    "triton_programs": dict(n_rows=16, n_heads=4, block_rows=4),
}


@pytest.mark.parametrize("name", BOOK_CALLS)
def test_figure_from_parameters_has_a_title_and_labelled_axes(name):
    fig = getattr(figures, name)(**BOOK_CALLS[name])
    assert isinstance(fig, Figure) and fig.get_suptitle()
    assert any(ax.get_xlabel() or ax.get_ylabel() or not ax.axison for ax in fig.axes)


# --- the figures other test files draw, drawn here as the book draws them ---------


def test_the_book_draws_these_figures_from_its_own_data():
    """Figures whose tests live elsewhere, drawn here with the chapters' arguments (the
    shipped results for chapter 15) so that the collision check below sees them."""
    from ropelab import wavelengths
    from ropelab.book import real_model as rm

    data = rm.shipped_results()
    heads, rb, ext = data["heads"], data["rebuild"], data["extend"]
    near, usage = torch.tensor(heads["near"]), torch.tensor(heads["usage"])
    previous = near[..., 1] >= 0.5
    local = ~previous & (near[..., 1:].sum(-1) >= 0.5)
    kinds = {"previous-token": previous, "local": local, "content": ~(previous | local)}
    groups = {name: mask.nonzero().tolist() for name, mask in kinds.items()}
    figures.pair_usage(usage, wavelengths(64, 100_000.0), groups, context=8192)
    figures.attention_distance(
        heads["profile"], heads["bin_edges"], torch.tensor(heads["sink"]).mean(1)
    )
    figures.rebuild_damage(
        rm.window_blocks(rb, "none", block=512), rm.window_blocks(rb, "rebuild", block=512),
        rm.window_agreement(rb, "rebuild", block=512), block=512,
    )
    labels = {"none": "no scaling", "pi": "PI", "ntk": "NTK-aware",
              "dynamic": "dynamic NTK", "yarn": "YaRN", "llama3": "Llama 3"}
    figures.extension_perplexity(
        {label: rm.window_blocks(ext, n) for n, label in labels.items()},
        block=ext["block"], context=8192, title="Perplexity beyond the trained length",
    )
    # chapter 05: four cos tables' errors over 5,000 positions, 0 to about 2
    m = torch.arange(5000)
    ramp = (m / 5000.0).double()
    figures.table_error(m, {"transformers 2023, cast to bfloat16": 2 * ramp,
                            "transformers today, cast": ramp, "float32": 1e-4 * ramp,
                            "ropelab, after .to(bfloat16)": 1e-8 * ramp})
    # chapter 14: bytes per token-head at d = 128 in float32
    figures.kernel_traffic(
        {"transformers' formula\n(traced ops)": {"x and temporaries": 6144.0},
         "Triton kernel\n(counted)": {"x": 512.0, "tables": 512.0, "out": 512.0}},
        floor=2 * 128 * 4,
    )
    figures.number_spacing()  # the style fixture records all seven for the check below


# --- nothing collides in a figure (runs last: reads what the tests above drew) ---

# Figures with overlapping parts (a cold read of the book, issue 27, and this
# check), each an expected failure until its chapter's figure is fixed; strict,
# so a fixed figure makes its entry here fail and it must then be removed.
KNOWN_COLLISIONS = {
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[pytest.mark.xfail(reason=KNOWN_COLLISIONS[name], strict=True)]
            if name in KNOWN_COLLISIONS
            else [],
        )
        for name in figures.__all__
        if callable(getattr(figures, name)) and getattr(figures, name).__module__ != _style.__name__
    ],
)
def test_no_overlapping_text_or_legends(name):
    """No title, label, tick label, text or legend of the figure overlaps another, and no
    legend covers plotted data (_style.overlaps), in every figure the tests above drew."""
    if name not in COLLISIONS:
        if COLLISIONS:  # the file ran, and no test drew this one: a figure nothing checks
            pytest.fail(f"no test in this file draws figures.{name}", pytrace=False)
        pytest.skip(f"no test in this run drew figures.{name}")
    problems = sorted(set(COLLISIONS[name]))
    assert not problems, f"figures.{name}:\n  " + "\n  ".join(problems)
