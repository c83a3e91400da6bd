"""Tests for ropelab.book.cost: the cost model counted by hand, and against a trace of what torch runs."""

import pytest
import torch

from ropelab import bench
from ropelab.book.cost import BENCH_CPU, METHODS, cost_model, trace_traffic
from ropelab.matrix import elementwise_flops, matmul_flops

# The cost model, worked out by hand for d = 128 (per token-head, bytes).


def test_floor_and_allocation_by_hand():
    copy = cost_model(128, "float32", method="copy_")
    assert (
        copy.bytes_read,
        copy.bytes_written,
        copy.bytes_allocated,
        copy.flops,
        copy.passes,
    ) == (512, 512, 0, 0, 1)
    assert copy.ratio_floor == 1.0
    clone = cost_model(128, torch.float32, method="clone")
    assert (
        clone.dtype == "float32"
        and clone.bytes_moved == copy.bytes_moved
        and clone.bytes_allocated == 512
    )
    for method in (
        "ropelab_half_split_out",
        "ropelab_interleaved_out",
        "torch_half_split_out",
    ):
        assert cost_model(128, "bfloat16", method=method).bytes_allocated == 0
    assert (
        cost_model(128, "bfloat16", method="ropelab_half_split").bytes_allocated == 256
    )


def test_hf_by_hand():
    hf = cost_model(128, "float32", method="hf")
    # x*cos (128, 128), -x2 (64, 64), cat (128, 128), *sin (128, 128), the sum (256, 128), in elements
    assert hf.bytes_read == (128 + 64 + 128 + 128 + 256) * 4 == 2816
    assert (
        hf.bytes_written
        == hf.bytes_allocated
        == (128 + 64 + 128 + 128 + 128) * 4
        == 2304
    )
    assert (
        hf.ratio_floor == 5.0
        and hf.passes == 5
        and hf.flops == 384
        and hf.table_elems == 256
    )
    assert hf.intensity == pytest.approx(384 / 5120)
    assert (
        cost_model(128, "bfloat16", method="hf").bytes_moved == 2560
    )  # half the float32 bytes


def test_fused_torch_path_and_complex_by_hand():
    for method in (
        "ropelab_half_split",
        "ropelab_interleaved",
        "ropelab_half_split_out",
        "ropelab_interleaved_out",
    ):
        for dtype, s in (("float32", 4), ("bfloat16", 2), ("float64", 8)):
            fused = cost_model(128, dtype, method=method)
            assert (
                fused.bytes_read,
                fused.bytes_written,
                fused.passes,
                fused.flops,
            ) == (128 * s, 128 * s, 1, 384)
            assert fused.ratio_floor == 1.0 and fused.table_elems == 256
    half = cost_model(
        128, "float32", method="torch_half_split_out"
    )  # out = x*cos; two addcmul_ on halves
    assert (half.bytes_read, half.bytes_written, half.passes, half.flops) == (
        384 * 4,
        256 * 4,
        3,
        384,
    )
    assert half.ratio_floor == 2.5
    # the interleaved torch path reads every table entry, as the half-split one does
    for dtype in ("float32", "bfloat16"):
        inter = cost_model(128, dtype, method="torch_interleaved_out")
        same = cost_model(128, dtype, method="torch_half_split_out")
        assert (inter.bytes_read, inter.bytes_written, inter.passes,
                inter.bytes_allocated) == (same.bytes_read, same.bytes_written, 3, 0)
    cplx = cost_model(128, "float32", method="complex")
    assert (cplx.bytes_read, cplx.bytes_written, cplx.passes, cplx.bytes_allocated) == (
        512,
        512,
        1,
        512,
    )
    cplx16 = cost_model(128, "bfloat16", method="complex")
    assert (cplx16.bytes_read, cplx16.bytes_written, cplx16.passes) == (
        1280,
        1280,
        3,
    ) and cplx16.ratio_floor == 5.0


def test_dense_flops_match_chapter_04():
    for d in (2, 4, 64, 128):
        dense = cost_model(d, "float32", method="dense_R")
        assert dense.flops == matmul_flops(d) == d * (2 * d - 1)
        assert dense.table_elems == d * d and dense.ratio_floor == 1.0
        for method in METHODS:
            if method not in ("copy_", "clone", "dense_R"):
                assert (
                    cost_model(d, "float32", method=method).flops
                    == elementwise_flops(d)
                    == 3 * d
                )


def test_errors():
    with pytest.raises(ValueError, match="dim must be a positive even int, got 7"):
        cost_model(7, method="hf")
    with pytest.raises(ValueError, match="dim must be a positive even int"):
        cost_model(True, method="hf")
    with pytest.raises(ValueError, match="method must be one of"):
        cost_model(8, method="fast")
    with pytest.raises(ValueError, match="dtype must be one of"):
        cost_model(8, "int8", method="hf")
    with pytest.raises(ValueError, match="dtype must be one of"):
        cost_model(8, torch.int32, method="hf")


# The trace: an independent count of the same bytes.


def test_trace_simple_operations():
    x = torch.randn(4, 8)
    t = trace_traffic(lambda: x.clone(), x)
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated, t.ops) == (
        128,
        128,
        128,
        ("clone",),
    )
    t = trace_traffic(lambda: x[:, :4].T, x)  # a view moves nothing
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated, t.passes) == (0, 0, 0, 0)
    buf = torch.empty_like(x)
    t = trace_traffic(
        lambda: torch.mul(x, 2.0, out=buf), x
    )  # out= is written, not read, not allocated
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated) == (128, 128, 0)
    t = trace_traffic(lambda: buf.copy_(x), x)
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated) == (128, 128, 0)
    y = x.clone()
    t = trace_traffic(lambda: y.mul_(2.0), y)  # in place: read and write
    assert (t.bytes_read, t.bytes_written) == (128, 128)
    t = trace_traffic(lambda: torch.empty_like(x), x)  # allocation without traffic
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated, t.passes) == (
        0,
        0,
        128,
        0,
    )
    table = torch.randn(8)
    t = trace_traffic(
        lambda: (table * 2.0, torch.empty(4, 8)), x
    )  # table work, unrelated allocation: not counted
    assert (t.bytes_read, t.bytes_written, t.bytes_allocated, t.passes) == (0, 0, 0, 0)
    t = trace_traffic(
        lambda: x * table, x
    )  # a broadcast table is not counted as x-sized traffic
    assert (t.bytes_read, t.bytes_written) == (128, 128)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_model_matches_trace_of_every_benchmarked_method(dtype):
    shape = (2, 3, 5, 16)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(shape, generator=g).to(getattr(torch, dtype))
    k = torch.randn(shape, generator=g).to(getattr(torch, dtype))
    token_heads = 2 * 2 * 3 * 5  # q and k
    methods = bench._methods(q, k, torch.device("cpu"))
    assert tuple(methods) == METHODS
    for name, (fn, _) in methods.items():
        traced = trace_traffic(fn, q, k)
        # the fused kernel is one foreign call that the dispatcher cannot see, so apply_rotary steps aside
        # while torch traces it: the trace is of the torch path, modelled by the torch_* rows
        modelled = name
        if name.startswith("ropelab_"):
            modelled = name.replace("ropelab_", "torch_").removesuffix("_out") + "_out"
        model = cost_model(16, dtype, method=modelled)
        assert traced.bytes_read == model.bytes_read * token_heads, name
        assert traced.bytes_written == model.bytes_written * token_heads, name
        assert traced.passes == 2 * model.passes, (name, traced.ops)
        if not name.startswith(
            "ropelab_"
        ):  # allocation too: the torch path's scratch is the torch_* rows'
            assert traced.bytes_allocated == model.bytes_allocated * token_heads, name
        elif not name.endswith("_out"):  # a fresh result at least
            assert traced.bytes_allocated >= 16 * q.element_size() * token_heads, name


def test_the_shipped_results_file_loads():
    # chapter 09 reads the benchmark's file from the book's data
    machine, results, grid, goals = bench.load(BENCH_CPU)
    assert machine["device"] == "cpu" and goals == bench.load_goals()
    assert {r.method for r in results} == set(METHODS)
    assert {r.against for r in grid} == {"copy_", "hf"}
