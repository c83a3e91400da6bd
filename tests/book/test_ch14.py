"""Chapter 14's plumbing: kernel listings and the H200 run's tables."""

from __future__ import annotations

import pytest

from ropelab.book import ch14

pytest.importorskip("triton")


def test_read_table_names_ratio_columns_after_their_time():
    rows = ch14.read_table("dtype  S copy_g | liger_g x\nbf16 1 2.5 | 1.0 0.4\n")
    assert rows == [{"dtype": "bf16", "S": 1.0, "copy_g": 2.5, "liger_g": 1.0,
                     "liger_x": 0.4}]


def test_read_table_refuses_a_short_row():
    with pytest.raises(ValueError):
        ch14.read_table("a b\n1\n")


def test_listing_runs_from_first_to_last_dedented():
    text = ch14.listing("def _round_bf16(", "return half")
    lines = text.splitlines()
    assert lines[0].startswith("def _round_bf16(") and "return half" in lines[-1]
    assert ch14.listing("bits = y.to(", "bits = y.to(").startswith("bits")


@pytest.mark.parametrize(
    "first, last", [("no such line", "x"), ("def _store(", "nope")]
)
def test_listing_names_the_missing_line(first, last):
    with pytest.raises(ValueError, match="first" if last == "x" else "last"):
        ch14.listing(first, last)


def test_gpu_run_reads_machine_and_both_tables():
    run = ch14.load_gpu_run()
    assert run.machine["gpu"].startswith("NVIDIA")
    versions = ("triton", "transformers", "liger", "date")
    assert all(run.machine[k] != "?" for k in versions)
    # each table row's ratio is its GPU time over copy_'s, to the files' rounding
    for r in run.peers:
        assert r["ours_x"] == pytest.approx(r["ours_g"] / r["copy_g"], abs=0.06)
    for r in run.split:
        assert r["ratio"] == pytest.approx(r["tri_graph_us"] / r["copy_us"], abs=0.06)


def test_tables_print_every_row_and_leave_out_compiles_fallback():
    run = ch14.load_gpu_run()
    peers = ch14.peers_table(run).splitlines()
    assert len(peers) == 2 + len(run.peers)
    float32 = [line for line in peers if line.startswith("float32")]
    assert float32 and all(line.split()[4] == "-" for line in float32)
    layouts = ch14.layout_table(run).splitlines()
    assert len(layouts) == 2 + len({(r["dtype"], r["layout"]) for r in run.split})
