"""Tests for ropelab.bench: the interleaved timer, the runners, the goals and the command line.

No test asserts a timing: times depend on the machine and its load.
"""

import itertools
import json
import time

import pytest
import torch

from ropelab import bench, bench_machine
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


def fake_measure(fn):
    """A stand-in for CUDA timing on a CPU: runs the candidate once, returns made-up
    (GPU, host) seconds that depend on its output's size, so ratios are defined."""
    result = fn()
    first = result[0] if isinstance(result, tuple) else result
    return 1e-6 * first.numel() / 1000, 5e-6


def test_gpu_suite_runs_every_candidate_on_a_cpu(monkeypatch):
    # the GPU suite's plumbing (candidates, records, ratios) with a stand-in timer, q and
    # k rotated by the Triton kernel in its interpreter where Triton is installed
    from ropelab import bench_gpu

    monkeypatch.setattr(bench_gpu, "HEADS_Q", 2)
    monkeypatch.setattr(bench_gpu, "HEADS_K", 1)
    monkeypatch.setattr(bench_gpu, "DIM", 8)
    monkeypatch.setattr(bench_gpu, "DECODE_BATCH", 3)
    records = bench_gpu.run_gpu("cpu", ["bfloat16"], seqs=(4, 1), peers=False,
                                measure=fake_measure)
    methods = {(r.layout, r.seq, r.tensors, r.method) for r in records}
    for layout in ("half_split", "interleaved"):
        for seq in (4, 1):
            assert {(layout, seq, "q", "copy_"), (layout, seq, "q", "ropelab"),
                    (layout, seq, "qk", "copy_"), (layout, seq, "qk", "ropelab")} <= methods
    floors = [r for r in records if r.method == "copy_"]
    assert all(r.ratio == 1.0 for r in floors)
    assert "GPU us" in bench_gpu.format_gpu(records).splitlines()[0]


def gpu_record(method, ratio, host_us=10.0, seq=4096, tensors="qk", layout="half_split"):
    return bench_gpu_module().GpuRecord("bfloat16", layout, seq, tensors, method,
                                        ratio * 1e-5, host_us * 1e-6, ratio)


def bench_gpu_module():
    from ropelab import bench_gpu

    return bench_gpu


def test_gpu_goals_on_fabricated_records():
    # the shipped GPU goals, held against records made up to sit either side of them
    bench_gpu = bench_gpu_module()
    goals = bench.load_gpu_goals()
    assert {g["name"] for g in goals} == {"gpu long prefill", "gpu short prefill",
                                          "gpu decode step", "gpu host time",
                                          "gpu ahead of peers"}
    records = [
        gpu_record("copy_", 1.0), gpu_record("ropelab_qk", 1.10), gpu_record("ropelab", 1.20),
        gpu_record("liger", 3.0), gpu_record("hf_compiled", 1.05),
        gpu_record("ropelab", 1.4, seq=256, tensors="q", host_us=30.0),
        gpu_record("ropelab", 1.25, seq=1, tensors="q", host_us=12.0),
    ]
    found = {(v.goal, v.record.method, v.record.seq): v for v in
             bench_gpu.gpu_verdicts(goals, records)}
    assert found[("gpu long prefill", "ropelab_qk", 4096)].holds
    assert not found[("gpu long prefill", "ropelab", 4096)].holds  # 1.20 > 1.15
    assert found[("gpu short prefill", "ropelab", 256)].holds  # 1.4 <= 1.5
    assert found[("gpu decode step", "ropelab", 1)].holds  # 1.25 <= 1.3
    assert not found[("gpu host time", "ropelab", 256)].holds  # 30 us > 25
    assert found[("gpu host time", "ropelab", 1)].holds
    assert ("gpu host time", "ropelab", 4096) not in found  # q and k: two calls
    peers = found[("gpu ahead of peers", "ropelab_qk", 4096)]
    assert not peers.holds and peers.value == pytest.approx(1.10 / 1.05)
    text = bench_gpu.format_gpu_verdicts(list(found.values()))
    assert text.splitlines()[-1] == f"{sum(v.holds for v in found.values())} of 7 GPU goals hold"


def test_gpu_json_schema_and_the_path_line(tmp_path, monkeypatch, capsys):
    # main on "cuda" with a stand-in GPU: the JSON holds machine, gpu and gpu_goals, and
    # the machine line says which path apply_rotary took (never "torch path" falsely)
    bench_gpu = bench_gpu_module()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    monkeypatch.setattr(bench_gpu, "path_summary", lambda device: "apply_rotary takes X")
    made = bench_gpu.GpuRecord("float32", "half_split", 256, "q", "copy_", 1e-6, 2e-6, 1.0)
    monkeypatch.setattr(bench_gpu, "run_gpu", lambda *a, **k: [made])
    path = tmp_path / "gpu.json"
    assert bench.main(["--device", "cuda", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert set(data) == {"machine", "gpu", "gpu_goals"}
    assert data["machine"]["gpu"] == "Fake GPU"
    assert data["machine"]["kernel"] == "apply_rotary takes X"
    assert data["gpu"] == [{"dtype": "float32", "layout": "half_split", "seq": 256,
                            "tensors": "q", "method": "copy_", "gpu_s": 1e-6,
                            "host_s": 2e-6, "ratio": 1.0, "note": ""}]
    assert data["gpu_goals"] == bench.load_gpu_goals()
    assert "GPU goals hold" in capsys.readouterr().out


def test_the_path_line_names_the_backend_that_ran(monkeypatch):
    from ropelab import kernels

    bench_gpu = bench_gpu_module()
    assert bench_gpu.path_summary(torch.device("cpu")) in (
        "apply_rotary takes the cpu backend", "apply_rotary takes the torch backend")
    kt = pytest.importorskip("ropelab.kernels.triton")
    if not kt.available():
        pytest.skip("no GPU and TRITON_INTERPRET is not 1")
    monkeypatch.setattr(kernels, "_route", lambda device_type: (kt,))
    assert bench_gpu.path_summary(torch.device("cpu")).startswith(
        "apply_rotary takes the Triton kernel (triton ")


def test_isa_summary_says_which_instructions_the_results_apply_to():
    line = bench.isa_summary()
    st = bench_machine.kernel_status()
    if st["available"]:
        assert line.startswith("CPUs whose kernel runs") and "this CPU has" in line
    else:
        assert line.startswith("none")


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
