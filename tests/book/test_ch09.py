"""Chapter 09's plumbing: the tables printed from traces and from the results file."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ropelab import bench
from ropelab.book import ch09
from ropelab.book.cost import BENCH_CPU, METHODS


def test_traffic_table_divides_by_token_heads():
    t = SimpleNamespace(bytes_read=640, bytes_written=320, bytes_allocated=0)
    table = ch09.traffic_table({(torch.bfloat16, "copy_"): t}, token_heads=5)
    lines = table.splitlines()
    assert lines[1].split() == ["bfloat16", "copy_", "128", "64", "0"]


def test_methods_table_has_every_method_per_dtype():
    _, results, _, _ = bench.load(BENCH_CPU)
    table = ch09.methods_table(results)
    dtypes = {r.dtype for r in results}
    for method in METHODS:
        rows = [line for line in table.splitlines() if line.split()[:1] == [method]]
        want = 0 if method in ch09.EARLIER_PATH else len(dtypes)
        assert len(rows) == want, method


def test_shown_drops_only_the_earlier_paths_rows():
    _, results, _, _ = bench.load(BENCH_CPU)
    kept = ch09.shown(results)
    assert {r.method for r in kept} == set(METHODS) - set(ch09.EARLIER_PATH)
    assert len(kept) == sum(r.method not in ch09.EARLIER_PATH for r in results) > 0


def test_methods_table_refuses_a_file_with_other_methods():
    _, results, _, _ = bench.load(BENCH_CPU)
    with pytest.raises(ValueError, match="results"):
        ch09.methods_table([r for r in results if r.method != "clone"])


def test_prefill_lines_span_the_prefill_ratios():
    _, results, _, _ = bench.load(BENCH_CPU)
    dtype = results[0].dtype
    ratios = [r.ratio_floor for r in results
              if r.method == "hf" and r.dtype == dtype and r.shape[2] > 1]
    line = next(s for s in ch09.prefill_lines(results).splitlines()
                if "transformers formula" in s)
    assert f"{min(ratios):.2f}" in line and f"{max(ratios):.2f}x" in line


def test_goal_lines_count_each_covered_goal():
    _, _, grid, goals = bench.load(BENCH_CPU)
    text = ch09.goal_lines(goals, grid)
    covered = [g for g in goals if list(bench.verdicts([g], grid))]
    assert text.count("slowest:") == len(covered) > 0


CHAPTER_BARS = [  # the two calls of the chapter, and every method
    (["copy_", "clone", "ropelab_half_split", "ropelab_half_split_out"], "float32"),
    (["copy_", "clone", "hf", "complex", "dense_R", "ropelab_half_split",
      "ropelab_half_split_out", "torch_half_split_out", "torch_interleaved_out"],
     "bfloat16"),
    (list(METHODS), "float32"),
]


@pytest.mark.parametrize("methods, dtype", CHAPTER_BARS)
def test_cost_bars_legend_covers_no_bar_or_label(methods, dtype):
    pytest.importorskip("matplotlib")
    from ropelab.book import figures

    fig = figures.cost_bars(methods, dtype=dtype)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    assert legends
    covered = []
    for legend in legends:
        box = legend.get_window_extent()
        covered += [p for p in ax.patches if p.get_window_extent().overlaps(box)]
        labels = ax.get_xticklabels()
        covered += [t for t in labels if t.get_window_extent().overlaps(box)]
    assert not covered


def test_intensity_table_divides_the_balance_by_the_cost_models_intensity():
    lines = ch09.intensity_table(128, "float32", 3.0, ("hf", "dense_R")).splitlines()
    assert lines[0].split()[:2] == ["method", "intensity"]
    # hf: 3d flops (mul, mul, add) over 10 d·4 bytes = 3/40 (eq. perf-hf)
    assert lines[1].split() == ["hf", "0.075", "40.0"]
    # dense R: d(2d - 1) flops over 2 d·4 bytes = 255/8
    assert lines[2].split() == ["dense_R", "31.875", "0.09"]  # 3 / 31.875
