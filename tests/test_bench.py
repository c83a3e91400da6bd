"""Tests for ropelab.bench: the cost model (counted by hand and traced), the runner, the CLI, the targets.

No test asserts a timing: times depend on the machine and its load.
"""

import json

import pytest
import torch

from ropelab import bench
from ropelab.bench import METHODS, Result, cost_model, trace_traffic
from ropelab.matrix import elementwise_flops, matmul_flops

# --- chapter 09 additions ---

# The cost model, worked out by hand for d = 128 (per token-head, bytes).


def test_cost_model_floor_and_hf_by_hand():
    copy = cost_model(128, "float32", method="copy")
    assert (copy.bytes_read, copy.bytes_written, copy.flops, copy.passes) == (512, 512, 0, 1)
    assert copy.floor_bytes == 2 * 128 * 4 and copy.ratio_floor == 1.0
    copy_out = cost_model(128, torch.float32, method="copy_out")
    assert copy_out.dtype == "float32" and copy_out.bytes_moved == copy.bytes_moved
    hf = cost_model(128, "float32", method="hf")
    # x*cos (128, 128), -x2 (64, 64), cat (128, 128), *sin (128, 128), the sum (256, 128), in elements
    assert hf.bytes_read == (128 + 64 + 128 + 128 + 256) * 4 == 2816
    assert hf.bytes_written == (128 + 64 + 128 + 128 + 128) * 4 == 2304
    assert hf.ratio_floor == 5.0 and hf.passes == 5 and hf.flops == 384 and hf.table_elems == 256
    assert hf.intensity == pytest.approx(384 / 5120)
    assert cost_model(128, "bfloat16", method="hf").bytes_moved == 2560  # half the float32 bytes


def test_cost_model_fused_and_complex_by_hand():
    # the fused kernel: one pass, read x and write the result, in every layout and dtype
    for method in ("ropelab_half_split", "ropelab_interleaved", "ropelab_half_split_out", "ropelab_interleaved_out"):
        for dtype, s in (("float32", 4), ("bfloat16", 2), ("float64", 8)):
            fused = cost_model(128, dtype, method=method)
            assert (fused.bytes_read, fused.bytes_written, fused.passes, fused.flops) == (128 * s, 128 * s, 1, 384)
            assert fused.ratio_floor == 1.0 and fused.table_elems == 256
    # the torch path, half-split: out = x*cos (128 read, 128 written); two addcmul_ on halves (64 + 64 read,
    # 64 written each)
    half = cost_model(128, "float32", method="torch_half_split_out")
    assert (half.bytes_read, half.bytes_written, half.passes, half.flops) == (384 * 4, 256 * 4, 3, 384)
    assert half.ratio_floor == 2.5
    inter = cost_model(128, "float32", method="torch_interleaved_out")
    assert (inter.bytes_read, inter.bytes_written, inter.passes, inter.flops) == (512, 512, 1, 384)
    assert inter.ratio_floor == 1.0 and inter.intensity == 0.375
    assert cost_model(128, "float64", method="torch_interleaved_out").ratio_floor == 1.0
    # bfloat16 has no complex dtype: upcast (256 read, 512 written), multiply in place (512, 512),
    # round back (512, 256)
    inter_bf16 = cost_model(128, "bfloat16", method="torch_interleaved_out")
    assert (inter_bf16.bytes_read, inter_bf16.bytes_written, inter_bf16.passes) == (1280, 1280, 3)
    cplx = cost_model(128, "float32", method="complex")
    assert (cplx.bytes_read, cplx.bytes_written, cplx.passes, cplx.flops) == (512, 512, 1, 384)
    # bfloat16: upcast (256 read, 512 written), multiply (512, 512), cast back (512, 256)
    cplx16 = cost_model(128, "bfloat16", method="complex")
    assert (cplx16.bytes_read, cplx16.bytes_written, cplx16.passes) == (1280, 1280, 3)
    assert cplx16.ratio_floor == 5.0


def test_cost_model_dense_flops_match_chapter_04():
    for d in (2, 4, 64, 128):
        dense = cost_model(d, "float32", method="dense_R")
        assert dense.flops == matmul_flops(d) == d * (2 * d - 1)
        assert dense.table_elems == d * d and dense.ratio_floor == 1.0
        for method in METHODS:
            if method not in ("copy", "copy_out", "dense_R"):
                assert cost_model(d, "float32", method=method).flops == elementwise_flops(d) == 3 * d


def test_cost_model_errors():
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


def test_trace_traffic_simple_operations():
    x = torch.randn(4, 8)
    t = trace_traffic(lambda: x.clone(), x)
    assert (t.bytes_read, t.bytes_written, t.ops) == (128, 128, ("clone",))
    t = trace_traffic(lambda: x[:, :4].T, x)  # a view moves nothing
    assert (t.bytes_read, t.bytes_written, t.passes) == (0, 0, 0)
    buf = torch.empty_like(x)
    t = trace_traffic(lambda: torch.mul(x, 2.0, out=buf), x)  # out= is written, not read
    assert (t.bytes_read, t.bytes_written) == (128, 128)
    t = trace_traffic(lambda: buf.copy_(x), x)
    assert (t.bytes_read, t.bytes_written) == (128, 128)
    y = x.clone()
    t = trace_traffic(lambda: y.mul_(2.0), y)  # in place: read and write
    assert (t.bytes_read, t.bytes_written) == (128, 128)
    table = torch.randn(8)
    t = trace_traffic(lambda: (table * 2.0, torch.empty_like(x)), x)  # table work and allocation: not counted
    assert (t.bytes_read, t.bytes_written, t.passes) == (0, 0, 0)
    t = trace_traffic(lambda: x * table, x)  # a broadcast table is not counted as x-sized traffic
    assert (t.bytes_read, t.bytes_written) == (128, 128)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_cost_model_matches_trace_of_every_benchmarked_method(dtype):
    shape = (2, 3, 5, 16)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(shape, generator=g).to(getattr(torch, dtype))
    k = torch.randn(shape, generator=g).to(getattr(torch, dtype))
    token_heads = 2 * 2 * 3 * 5  # q and k
    methods = bench._methods(q, k, torch.device("cpu"))
    assert tuple(methods) == METHODS
    for name, (_, fn, _) in methods.items():
        traced = trace_traffic(fn, q, k)
        # the fused kernel is one foreign call that torch's dispatcher cannot see, so apply_rotary steps
        # aside while torch traces it: the trace is of the torch path, modelled by the torch_* rows
        modelled = name.replace("ropelab_", "torch_").removesuffix("_out") + "_out" if name.startswith("ropelab_") \
            else name
        model = cost_model(16, dtype, method=modelled)
        assert traced.bytes_read == model.bytes_read * token_heads, name
        assert traced.bytes_written == model.bytes_written * token_heads, name
        assert traced.passes == 2 * model.passes, (name, traced.ops)


# The runner and the command line.


def check_structure(results, shapes, dtypes):
    assert len(results) == len(shapes) * len(dtypes) * len(METHODS)
    by_key = {(r.shape, r.dtype, r.method): r for r in results}
    for shape in shapes:
        for dtype in dtypes:
            for method in METHODS:
                r = by_key[(tuple(shape), dtype, method)]
                assert r.median_s is not None and r.median_s > 0 and r.runs >= 1
                floor = by_key[(tuple(shape), dtype, r.floor)]
                hf = by_key[(tuple(shape), dtype, "hf")]
                assert r.floor == ("copy_out" if method.endswith("out") else "copy")
                assert r.ratio_floor == pytest.approx(r.median_s / floor.median_s, rel=1e-12)
                assert r.ratio_hf == pytest.approx(r.median_s / hf.median_s, rel=1e-12)
            assert by_key[(tuple(shape), dtype, "copy")].ratio_floor == 1.0
            assert by_key[(tuple(shape), dtype, "hf")].ratio_hf == 1.0


def test_run_tiny_shape_structure_and_ratios():
    progress = []
    results = bench.run([(1, 2, 8, 16)], ("float32", "bfloat16"), "cpu", min_runs=1, min_time=0,
                        progress=progress.append)
    assert all(isinstance(r, Result) for r in results)
    check_structure(results, [(1, 2, 8, 16)], ["float32", "bfloat16"])
    assert len(progress) == 2 * len(METHODS) and progress[0].startswith("[1/2] (1, 2, 8, 16) float32: copy")
    table = bench.format_table(results)
    assert table.splitlines()[0].split()[:3] == ["shape", "dtype", "method"]
    assert len(table.splitlines()) == 1 + 2 * len(METHODS)


def test_run_skips_a_large_dense_table(monkeypatch):
    monkeypatch.setattr(bench, "DENSE_R_LIMIT_BYTES", 0)
    results = bench.run([(1, 1, 4, 8)], min_runs=1, min_time=0)
    dense = next(r for r in results if r.method == "dense_R")
    assert dense.median_s is None and dense.runs == 0 and dense.ratio_floor is None and dense.ratio_hf is None
    assert dense.note.startswith("skipped: the (seq, d, d) table would take")
    assert bench.format_table([dense]).splitlines()[1].split()[5:9] == ["dense_R", "-", "-", "-"]


def test_run_rejects_an_odd_dim():
    with pytest.raises(ValueError, match=r"even dim, got \(2, 7\)"):
        bench.run([(2, 7)], min_runs=1, min_time=0)


def test_main_writes_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    rc = bench.main(["--shape", "2,4,8,16", "--min-runs", "1", "--min-time", "0", "--json", str(path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith("ropelab.bench on device=cpu") and f"wrote {path}" in out
    data = json.loads(path.read_text())
    assert set(data) == {"machine", "results"}
    assert {"device", "torch", "threads", "cpu", "cpu_count", "python"} <= set(data["machine"])
    assert data["machine"]["torch"] == torch.__version__
    assert [r["method"] for r in data["results"]] == list(METHODS)
    machine, results = bench.load(path)
    assert machine == data["machine"]
    check_structure(results, [(2, 4, 8, 16)], ["float32"])


def test_main_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(["--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device cuda asked for CUDA" in err and "sees no CUDA device" in err and "--device cpu" in err


# The targets.


def fake(shape, dtype, method, ratio_floor, ratio_hf):
    floor = "copy_out" if method.endswith("_out") else "copy"
    return Result(shape, dtype, method, 1.0, 1, floor, ratio_floor, ratio_hf)


def test_targets_by_hand():
    big, decode = bench.DEFAULT_SHAPES[0], bench.DEFAULT_SHAPES[2]
    results = [
        fake(big, "float32", "hf", 5.0, 1.0),
        fake(big, "float32", "ropelab_half_split", 1.2, 0.25),
        fake(big, "float32", "ropelab_interleaved", 1.6, 0.31),
        fake(big, "float32", "ropelab_interleaved_out", 1.5, 0.2),
        fake(big, "bfloat16", "ropelab_half_split", 3.0, 0.9),
        fake(decode, "float32", "ropelab_interleaved", 4.0, 1.1),
        fake((1, 1, 4, 8), "float32", "ropelab_interleaved", 9.0, 9.0),  # not a target shape
        Result(big, "bfloat16", "ropelab_interleaved", None, 0, "copy"),
    ]
    found = {(t.shape, t.dtype, t.method, t.against): t for t in bench.targets(results)}
    assert len(found) == 8
    assert found[(big, "float32", "ropelab_half_split", "floor")].holds is True
    assert found[(big, "float32", "ropelab_half_split", "hf")].holds is True
    assert found[(big, "float32", "ropelab_interleaved", "floor")].holds is False
    assert found[(big, "float32", "ropelab_interleaved", "hf")].limit == 0.3
    assert found[(big, "float32", "ropelab_interleaved", "hf")].holds is False
    assert found[(big, "float32", "ropelab_interleaved_out", "floor")].holds is True  # 1.5 <= 1.5
    assert found[(big, "bfloat16", "ropelab_half_split", "hf")].holds is True
    assert found[(decode, "float32", "ropelab_interleaved", "hf")].holds is False
    assert found[(big, "bfloat16", "ropelab_interleaved", "hf")].holds is None
