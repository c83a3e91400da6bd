"""Tests for ropelab.book.ch08: chapter 08's tables, error sources and damage rows."""

import inspect
import json
import math
import re
from pathlib import Path

import pytest
import torch

import ropelab
from ropelab import numerics
from ropelab.book import ch08
from ropelab.book.solutions import ch08 as solutions

F64 = torch.float64
DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
BOOK = Path(__file__).resolve().parents[2] / "book"


def test_llama_config_carries_the_base():
    config = ch08.llama_config(64, 5e5)
    assert config.rope_parameters["rope_theta"] == 5e5 and config.head_dim == 64


def test_spacing_rows_by_hand():
    lines = ch08.spacing_rows((300, 100_000), DTYPES)
    assert lines[1].split() == ["300", "2", "0.25", "3.05176e-05"]
    assert lines[2].split()[2] == "inf"  # float16 overflows


def test_largest_ratio_refuses_a_broken_bound_and_nan():
    ratio = ch08._largest_ratio(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 4.0]))
    assert ratio == 0.5
    with pytest.raises(AssertionError):
        ch08._largest_ratio(torch.tensor([3.0]), torch.tensor([2.0]))
    with pytest.raises(AssertionError):
        ch08._largest_ratio(torch.tensor([math.nan]), torch.tensor([2.0]))


def test_angle_bound_ratios_are_at_most_one():
    positions = numerics.log_positions(40, 100_000)
    line = ch08.angle_bound_ratios(positions, 64, 10000.0, DTYPES)
    ratios = [float(v) for v in re.findall(r"\d\.\d\d", line)]
    assert len(ratios) == 3 and all(0 < r <= 1 for r in ratios)
    # base 500,000: float16's slow frequencies are subnormal, so it is left out
    line = ch08.angle_bound_ratios(positions, 128, 5e5, DTYPES)
    assert not re.search(r"\bfloat16", line)


def test_cos_bound_table_shape():
    positions = numerics.log_positions(20, 50_000)
    lines = ch08.cos_bound_table(positions, 32, (1e4,), DTYPES)
    assert len(lines) == 2 + len(DTYPES)
    assert all(0 < float(v) <= 1 for v in lines[2].split()[1:])


def test_cos_error_table_rows():
    lines = ch08.cos_error_table((1, 70_000), 16, 1e4, DTYPES, cos_in_dtype=False)
    assert lines[0] == "cos taken in float64" and len(lines) == 2 + len(DTYPES)
    assert lines[3].split()[-1] == "nan"  # float16 at 70,000


def test_three_sources_by_hand():
    theta = 1e4 ** (-torch.arange(64, dtype=F64) / 64)
    t32 = theta.float()
    frequency, product = ch08.three_sources(32_767, 1e4)
    want = float((32_767 * (t32.double() - theta)).abs().max())
    assert frequency == pytest.approx(want, rel=1e-6)
    # the product's rounding is at most half an ulp of the largest angle, 32,767
    assert 0 < product <= 2.0 ** (14 - 24)


def test_source_curves_constants_and_growth():
    curves = ch08.source_curves(torch.tensor([10, 100_000]), 5e5)
    assert curves["3. cos, sin rounded to float32"] == 2.0**-25
    first = curves["1. frequency: m·|θ32 − θ|"]
    assert first[1] / first[0] == pytest.approx(10_000, rel=1e-9)


def test_damage_rows_format():
    damage = {"case": {1: (0.5, 1e-5), 2: (math.nan, math.nan)}}
    lines = ch08.damage_rows(damage, (1, 2))
    assert lines[2].split() == ["case", "0.5", "<1e-4", "nan", "nan"]


def test_the_shown_solution_of_exercise_1_is_the_shipped_one():
    nb = json.loads((BOOK / "08_numerics.ipynb").read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"]
                     if c["cell_type"] == "markdown")
    shown = text.split("```{solution} num-ex1")[1].split("```python")[1].split("```")[0]
    namespace = {"torch": torch}
    exec(shown, namespace)  # noqa: S102 - the book's own solution text
    def defaults(fn):
        return {k: v.default for k, v in inspect.signature(fn).parameters.items()}

    assert defaults(namespace["first_lost"]) == defaults(solutions.first_lost)
    for dt in (torch.bfloat16, torch.float16):
        assert namespace["first_lost"](dt) == solutions.first_lost(dt)


def test_number_spacing_figure_in_the_book_style():
    import matplotlib

    matplotlib.use("Agg")
    from ropelab.book import figures
    from ropelab.book.figures import _style

    fig = figures.ch08.number_spacing(max_value=2.0**20)
    assert isinstance(fig, _style._BookFigure)
    assert fig.get_figwidth() <= figures.MAX_WIDTH + 1e-9
    assert fig.get_facecolor()[3] == 0.0
    small = [t for t, pt in figures.rendered_font_sizes(fig)
             if pt < figures.MIN_FONT_PT - 1e-6]
    assert not small
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    x, gap = lines["bfloat16 (p = 8)"].get_data()
    assert dict(zip(x, gap))[256.0] == 2.0  # bfloat16 stores every second integer there
    x16, _ = lines["float16 (p = 11)"].get_data()
    assert x16.max() == 65504.0


def test_exact_half_split_cos_uses_the_float32_frequencies_in_both_halves():
    pos, d, base = torch.tensor([0, 7, 100_000]), 8, 5e5
    got = ch08.exact_half_split_cos(pos, d, base)
    assert got.shape == (3, d) and got.dtype == F64
    assert torch.equal(got[:, : d // 2], got[:, d // 2 :])  # half-split: j and j + d/2
    theta32 = ropelab.inv_freq(d, base).double()  # m·θ32 is exact enough in float64
    by_hand = torch.cos(pos.double()[:, None] * theta32)
    assert torch.allclose(got[:, : d // 2], by_hand, rtol=0, atol=1e-9)
    # the real θ_j differ from θ32 by ~1e-8 relative: ~1e-3 in cos at m = 100,000
    real = torch.cos(100_000 * ropelab.inv_freq(d, base, dtype=F64))
    assert (got[2, : d // 2] - real).abs().max() > 1e-6
