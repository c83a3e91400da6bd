"""Tests for ropelab.bench: the interleaved timer, the runners, the goals and the command line.

No test asserts a timing: times depend on the machine and its load.
"""

import itertools
import json
import time

import pytest
import torch

from ropelab import bench
from ropelab.bench import GridResult, Result
from ropelab.bench import METHODS

SMALL_GOALS = [
    {
        "name": "prefill",
        "dtypes": ["float32", "bfloat16"],
        "layouts": ["half_split", "interleaved"],
        "orders": ["heads", "positions"],
        "shapes": [[1, 2, 8, 16]],
        "calls": ["out"],
        "against": "copy_",
        "limit": 1.25,
    },
    {
        "name": "decode",
        "dtypes": ["bfloat16"],
        "layouts": ["half_split"],
        "orders": ["heads"],
        "shapes": [[3, 2, 1, 16]],
        "calls": ["out", "new"],
        "against": "hf",
        "limit": 0.6,
    },
]


def test_time_interleaved_samples_every_candidate_in_rounds():
    calls = []

    def slow(name):  # longer than a sample: each sample times a single call
        def fn():
            calls.append(name)
            time.sleep(2 * bench.SAMPLE_SECONDS)

        return fn

    fns = {"a": slow("a"), "b": slow("b")}
    timed = bench.time_interleaved(torch.device("cpu"), fns, rounds=3, min_time=0)
    assert set(timed) == {"a", "b"}
    for name, (best, median, runs) in timed.items():
        assert 0 < best <= median and runs >= 3
        # 3 first samples, then `runs` timed samples, each after one untimed call
        assert calls.count(name) == 2 * 3 + 2 * runs
    # a sample never starts from the caches of the candidate timed before it
    blocks = [len(list(group)) for _, group in itertools.groupby(calls)]
    assert blocks[:2] == [6, 6] and set(blocks[2:]) == {2}


def check_methods(results, shapes, dtypes):
    assert len(results) == len(shapes) * len(dtypes) * len(METHODS)
    by_key = {(r.shape, r.dtype, r.method): r for r in results}
    for shape in shapes:
        for dtype in dtypes:
            floor, hf = (
                by_key[(tuple(shape), dtype, "copy_")],
                by_key[(tuple(shape), dtype, "hf")],
            )
            for method in METHODS:
                r = by_key[(tuple(shape), dtype, method)]
                assert 0 < r.best_s <= r.median_s and r.runs >= 1
                assert r.ratio_floor == pytest.approx(
                    r.best_s / floor.best_s, rel=1e-12
                )
                assert r.ratio_hf == pytest.approx(r.best_s / hf.best_s, rel=1e-12)
            assert floor.ratio_floor == 1.0 and hf.ratio_hf == 1.0


def test_run_tiny_shape_structure_and_ratios():
    progress = []
    results = bench.run(
        [(1, 2, 8, 16)],
        ("float32", "bfloat16"),
        "cpu",
        min_runs=1,
        min_time=0,
        progress=progress.append,
    )
    assert all(isinstance(r, Result) for r in results)
    check_methods(results, [(1, 2, 8, 16)], ["float32", "bfloat16"])
    assert len(progress) == 2 and progress[0].startswith("[1/2] (1, 2, 8, 16) float32")
    table = bench.format_table(results)
    assert table.splitlines()[0].split()[:3] == ["shape", "dtype", "method"]
    assert len(table.splitlines()) == 1 + 2 * len(METHODS)


def test_run_skips_a_large_dense_table(monkeypatch):
    monkeypatch.setattr(bench, "DENSE_R_LIMIT_BYTES", 0)
    results = bench.run([(1, 1, 4, 8)], min_runs=1, min_time=0)
    dense = next(r for r in results if r.method == "dense_R")
    assert (
        dense.best_s is None
        and dense.runs == 0
        and dense.ratio_floor is None
        and dense.ratio_hf is None
    )
    assert dense.note.startswith("skipped: the (seq, d, d) table would take")
    assert bench.format_table([dense]).splitlines()[1].split()[5:9] == [
        "dense_R",
        "-",
        "-",
        "-",
    ]


def test_run_rejects_an_odd_dim():
    with pytest.raises(ValueError, match=r"even dim, got \(2, 7\)"):
        bench.run([(2, 7)], min_runs=1, min_time=0)


def test_grid_measures_every_configuration_of_the_goals():
    grid = bench.run_grid(SMALL_GOALS, min_runs=1, min_time=0)
    prefill = [r for r in grid if r.against == "copy_"]
    assert len(prefill) == 2 * 2 * 2 and {r.order for r in prefill} == {
        "heads",
        "positions",
    }
    decode = [r for r in grid if r.against == "hf"]
    assert [(r.layout, r.call) for r in decode] == [
        ("half_split", "out"),
        ("half_split", "new"),
    ]
    for r in grid:
        assert (
            r.ratio == pytest.approx(r.seconds / r.baseline_s, rel=1e-12)
            and r.seconds > 0
        )
    text = bench.format_grid(grid)
    assert (
        "(batch, seq, heads, dim)" in text
        and "S = 8" in text
        and "transformers formula" in text
    )
    assert (
        len(bench.run_grid(SMALL_GOALS, ["float32"], min_runs=1, min_time=0)) == 4
    )  # restricted by dtype


def test_every_candidate_and_the_floor_use_one_x_and_one_out(monkeypatch):
    # a floor measured on other pages than the candidates' is not their floor: with an
    # x and an out per layout, half-split pairs read up to 1.32x copy_ where
    # interleaved ones, on the floor's own tensors, read 1.21x
    configurations = []
    monkeypatch.setattr(bench, "time_interleaved", lambda device, fns, **kw: (
        configurations.append(fns) or {name: (1.0, 1.0, 1) for name in fns}))
    bench.run_grid(SMALL_GOALS[:1], ["float32"], min_runs=1, min_time=0)
    seen = []
    real_copy = torch.Tensor.copy_

    def apply(x, cos, sin, *, layout, out=None):
        seen.append((x.data_ptr(), out.data_ptr()))

    def copy(self, src):
        seen.append((src.data_ptr(), self.data_ptr()))
        return real_copy(self, src)

    monkeypatch.setattr(bench, "apply_rotary", apply)
    monkeypatch.setattr(torch.Tensor, "copy_", copy)
    assert len(configurations) == 2  # the two axis orders
    for fns in configurations:
        seen.clear()
        for fn in fns.values():  # both layouts, then the floor
            fn()
        assert len(seen) == 3 and len(set(seen)) == 1, seen


def test_grid_tensors_broadcast_in_both_orders():
    x, cos, sin = bench._grid_tensors(
        (1, 3, 5, 8), "positions", "interleaved", torch.float32, torch.device("cpu")
    )
    assert (
        x.shape == (1, 5, 3, 8)
        and cos.shape == sin.shape == (5, 1, 8)
        and x.is_contiguous()
    )
    x, cos, _ = bench._grid_tensors(
        (1, 3, 5, 8), "heads", "half_split", torch.bfloat16, torch.device("cpu")
    )
    assert (
        x.shape == (1, 3, 5, 8)
        and cos.shape == (5, 8)
        and x.dtype == cos.dtype == torch.bfloat16
    )


def fake(dtype, layout, order, shape, call, against, ratio):
    return GridResult(
        dtype, layout, order, tuple(shape), call, against, ratio, 1.0, ratio
    )


def test_verdicts_by_hand():
    results = [
        fake("float32", "half_split", "heads", (1, 2, 8, 16), "out", "copy_", 1.2),
        fake("float32", "interleaved", "positions", (1, 2, 8, 16), "out", "copy_", 1.3),
        fake("bfloat16", "half_split", "heads", (3, 2, 1, 16), "new", "hf", 0.6),
        fake("bfloat16", "half_split", "heads", (3, 2, 1, 16), "out", "hf", 0.61),
        fake(
            "float16", "half_split", "heads", (1, 2, 8, 16), "out", "copy_", 9.0
        ),  # no goal covers it
        fake(
            "bfloat16", "half_split", "heads", (1, 2, 8, 16), "new", "copy_", 9.0
        ),  # nor this call
    ]
    found = bench.verdicts(SMALL_GOALS, results)
    assert [(v.goal, v.holds) for v in found] == [
        ("prefill", True),
        ("prefill", False),
        ("decode", True),
        ("decode", False),
    ]
    text = bench.format_verdicts(found)
    assert text.splitlines()[-1] == "2 of 4 hold" and "DOES NOT HOLD" in text


def test_the_shipped_goals_are_the_issue_grid():
    goals = bench.load_goals()
    limits = {g["name"]: g["limit"] for g in goals}
    assert limits == {"long prefill": 1.25, "short prefill": 2.0, "decode step": 0.6}
    seqs = sorted(s[2] for g in goals if g["against"] == "copy_" for s in g["shapes"])
    assert seqs == [256, 4096, 16384]


def test_load_goals_names_what_is_missing(tmp_path):
    path = tmp_path / "goals.json"
    path.write_text(json.dumps({"goals": [{"name": "g", "limit": 1.0}]}))
    with pytest.raises(ValueError, match="goal 'g' .* lacks .*'against'"):
        bench.load_goals(path)


def test_main_writes_json_and_load_reads_it(tmp_path, capsys):
    goals, path = tmp_path / "goals.json", tmp_path / "bench.json"
    goals.write_text(json.dumps({"goals": SMALL_GOALS[1:]}))
    rc = bench.main(
        [
            "--methods",
            "--grid",
            "--goals",
            str(goals),
            "--shape",
            "2,4,8,16",
            "--min-runs",
            "1",
            "--min-time",
            "0",
            "--json",
            str(path),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("ropelab.bench on device=cpu")
        and f"wrote {path}" in out
        and "of 2 hold" in out
    )
    data = json.loads(path.read_text())
    assert (
        set(data) == {"machine", "results", "grid", "goals"}
        and data["goals"] == SMALL_GOALS[1:]
    )
    assert {"device", "torch", "threads", "cpu", "cpu_count", "python"} <= set(
        data["machine"]
    )
    assert [r["method"] for r in data["results"]] == list(METHODS)
    machine, results, grid, loaded_goals = bench.load(path)
    assert machine == data["machine"] and loaded_goals == SMALL_GOALS[1:]
    check_methods(results, [(2, 4, 8, 16)], ["float32"])
    assert [(r.shape, r.call) for r in grid] == [
        ((3, 2, 1, 16), "out"),
        ((3, 2, 1, 16), "new"),
    ]


def test_main_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.main(["--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert (
        "--device cuda asked for CUDA" in err
        and "sees no CUDA device" in err
        and "--device cpu" in err
    )


def test_gpu_methods_list_the_triton_kernel_and_the_others():
    """The CUDA-only candidates (chapter 14), run here on CPU tensors in Triton's interpreter."""
    pytest.importorskip("triton")
    from ropelab.bench import _gpu_methods
    from ropelab.frequencies import inv_freq
    from ropelab.rotary import cos_sin, rotate

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 4, 8, generator=g), torch.randn(1, 2, 4, 8, generator=g)
    methods = _gpu_methods(q, k, torch.device("cpu"))
    assert {"ropelab_triton_qk", "hf_compiled", "flash_attn", "liger"} <= set(methods)
    rq, rk = methods["ropelab_triton_qk"][0]()
    cos, sin = cos_sin(torch.arange(4), inv_freq(8))
    assert torch.equal(rq, rotate(q, cos, sin)) and torch.equal(rk, rotate(k, cos, sin))
    for name in ("flash_attn", "liger"):  # not installed here: skipped with a reason
        fn, note = methods[name]
        assert fn is not None or note.startswith("skipped")


def test_kernel_summary_names_the_instructions_it_ran():
    # the benchmark file records which vector instructions and rounding produced it
    from ropelab.bench import kernel_summary
    from ropelab.kernels import kernel_status

    st, line = kernel_status(), kernel_summary()
    if not st["available"]:
        assert line.startswith("unavailable")
        return
    isa = {64: "AVX-512", 32: "AVX2"}.get(st["vector_bytes"], "no vector")
    assert line.startswith(f"fused C kernel ({isa} instructions")
    assert ("AVX512-BF16 rounding" in line) == st["hardware_bf16"]
