"""Tests for ropelab.book.extrapolate: the methods, a tiny run end to end, the CLI, and the shipped results."""

import json

import pytest
import torch

from ropelab import inv_freq, scaled_inv_freq
from ropelab.book.extrapolate import (
    Settings,
    load,
    main,
    methods,
    remaps,
    run,
    shipped_results,
    shipped_weights,
    table,
)
from ropelab.book.toy import ToyConfig, ToyDecoder, deterministic, evaluate
from ropelab.variants import passes_rho

TINY = Settings(
    train_len=12,
    multiples=(1, 2),
    steps=8,
    finetune_steps=3,
    samples=16,
    other_bases=(1e4,),
)
NAMES = ["none", "pi", "ntk", "dynamic", "yarn", "llama3"]
REMAP_NAMES = ["rerope", "leaky_rerope", "self_extend", "dual_chunk"]


def _theta(method, head_dim=32, seq_len=None):
    return scaled_inv_freq(head_dim, method.base, method.scaling, seq_len=seq_len)[
        0
    ].double()


def test_methods_extend_as_chapter_07_says():
    ms = {m.name: m for m in methods(100.0, 32, 64, 4.0)}
    assert list(ms) == NAMES
    plain = inv_freq(32, 100.0, dtype=torch.float64)
    # PI slows every pair by 4; NTK-aware keeps the fastest and slows the slowest by 4, as PI does
    torch.testing.assert_close(_theta(ms["pi"]), plain / 4, rtol=1e-6, atol=0)
    ntk = _theta(ms["ntk"])
    assert ntk[0] == 1.0
    torch.testing.assert_close(ntk[-1], plain[-1] / 4, rtol=1e-5, atol=0)
    # dynamic NTK leaves the training length alone and slows the slowest pair more than 4x at 4L
    torch.testing.assert_close(
        _theta(ms["dynamic"], seq_len=64), plain.float().double()
    )
    assert _theta(ms["dynamic"], seq_len=256)[-1] < plain[-1] / 4
    # YaRN and Llama 3 keep the fastest pair and interpolate the slowest
    for name in ("yarn", "llama3"):
        theta = _theta(ms[name])
        assert theta[0] == 1.0
        torch.testing.assert_close(theta[-1], plain[-1] / 4, rtol=1e-6, atol=0)


def test_a_tiny_run_is_complete_and_reproducible():
    first, second = run(TINY, threads=1), run(TINY, threads=1)
    assert first == second
    assert first["train_length"] == 12
    rows = first["results"]
    # methods with and without fine-tuning, remappings and bases as trained
    assert len(rows) == (len(NAMES) * 2 + len(REMAP_NAMES) + 1) * 2
    assert {r["method"] for r in rows} == set(NAMES) | set(REMAP_NAMES) | {"base=10000"}
    assert {r["finetune_steps"] for r in rows} == {0, 3}
    assert {r["length"] for r in rows} == {12, 24}
    for r in rows:
        assert set(r) == {
            "method",
            "base",
            "finetune_steps",
            "length",
            "accuracy",
            "loss",
        }
        assert 0.0 <= r["accuracy"] <= 1.0 and r["loss"] > 0
        assert (r["accuracy"] * TINY.samples).is_integer()
    text = table(first)
    assert text.splitlines()[0].split()[-2:] == ["12", "24"]
    assert len(text.splitlines()) == 2 + len(NAMES) * 2 + len(REMAP_NAMES) + 1


def test_cli_writes_json_and_prints_the_table(tmp_path, capsys):
    path = tmp_path / "r.json"
    args = [
        "--json",
        str(path),
        "--train-len",
        "12",
        "--multiples",
        "1",
        "2",
        "--steps",
        "4",
        "--finetune-steps",
        "0",
        "--samples",
        "8",
        "--other-bases",
        "--remaps",
        "rerope",
        "--threads",
        "1",
        "--save-weights",
        str(tmp_path / "w.pt"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["method", "fine-tune"]
    data = load(path)
    assert data["settings"]["threads"] == 1 and data["settings"]["finetune_steps"] == 0
    assert len(data["results"]) == (len(NAMES) + 1) * 2
    assert data["settings"]["remaps"] == {"rerope": {"window": 6}}
    assert set(torch.load(tmp_path / "w.pt", weights_only=True)) == set(
        ToyDecoder(ToyConfig()).state_dict()
    )


def test_cli_help_documents_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--json",
        "--multiples",
        "--steps",
        "--finetune-steps",
        "--seed",
        "--threads",
        "--base",
    ):
        assert flag in out


def test_cli_rejects_negative_finetune_steps():
    with pytest.raises(SystemExit):
        main(["--finetune-steps", "-1"])


def test_shipped_results_come_from_the_default_options():
    data = shipped_results()
    d = Settings()
    s = data["settings"]
    assert (
        data["train_length"],
        s["steps"],
        s["finetune_steps"],
        s["seed"],
        s["samples"],
    ) == (d.train_len, d.steps, d.finetune_steps, d.seed, d.samples)
    assert s["other_bases"] == list(d.other_bases) and s["multiples"] == list(
        d.multiples
    )
    assert list(s["remaps"]) == list(d.remaps)
    rows = data["results"]
    per_length = len(NAMES) * 2 + len(d.remaps) + len(d.other_bases)
    assert len(rows) == per_length * len(d.multiples)
    json.dumps(data)


def test_shipped_weights_give_the_shipped_unscaled_results():
    deterministic(1)
    model, data = shipped_weights(), shipped_results()
    by_method = {m.name: m for m in methods(100.0, 32, 64, 4.0)}
    for r in data["results"]:
        if (
            r["finetune_steps"] == 0
            and r["method"] in ("none", "yarn")
            and r["length"] <= 256
        ):
            m = by_method[r["method"]]
            got = evaluate(
                model,
                r["length"],
                scaling=m.scaling,
                base=m.base,
                samples=data["settings"]["samples"],
            )
            assert got["accuracy"] == r["accuracy"], r
            assert round(got["loss"], 6) == r["loss"], r


def test_shipped_weights_give_the_shipped_remapped_results():
    """Two remappings at 2L, recomputed from the shipped weights, match the file exactly."""
    deterministic(1)
    model, data = shipped_weights(), shipped_results()
    by_name = {r.name: r for r in remaps(64, 4.0)}
    checked = 0
    for r in data["results"]:
        if r["method"] in ("rerope", "dual_chunk") and r["length"] == 128:
            got = evaluate(
                model, 128, remap=by_name[r["method"]].passes(128),
                samples=data["settings"]["samples"],
            )
            assert got["accuracy"] == r["accuracy"], r
            assert round(got["loss"], 6) == r["loss"], r
            checked += 1
    assert checked == 2


def test_remaps_keep_every_angle_within_training_up_to_the_factor():
    """The chosen windows, slopes and groups keep ρ ≤ L - 1 at factor·L, and the
    methods stay exact inside the window."""
    for factor in (2.0, 4.0):
        for r in remaps(64, factor):
            seq = int(64 * factor)
            rho = passes_rho(r.passes(seq))
            causal = torch.ones(seq, seq, dtype=torch.bool).tril()
            assert rho[causal].max() < 64, (r.name, factor, rho[causal].max())
            m, n = torch.tril_indices(seq, seq)
            near = (m - n) < 16
            assert torch.equal(rho[m, n][near], (m - n)[near].double()), r.name


def test_each_methods_rows_do_not_depend_on_which_others_run():
    full = run(TINY, threads=1)["results"]
    alone = run(
        Settings(
            **{**TINY.__dict__, "methods": ("yarn",), "remaps": (), "other_bases": ()}
        ),
        threads=1,
    )["results"]
    assert alone == [r for r in full if r["method"] == "yarn"]
    one_remap = run(
        Settings(
            **{**TINY.__dict__, "methods": (), "remaps": ("self_extend",),
               "other_bases": ()}
        ),
        threads=1,
    )["results"]
    assert one_remap == [r for r in full if r["method"] == "self_extend"]
    models = {}
    run(
        Settings(**{**TINY.__dict__, "methods": (), "remaps": (), "other_bases": ()}),
        threads=1,
        models=models,
    )
    reused = run(TINY, threads=1, trained=models["main"])["results"]
    assert reused == full
    bases = run(
        Settings(**{**TINY.__dict__, "methods": (), "remaps": ()}), threads=1
    )["results"]
    assert bases == [r for r in full if r["method"].startswith("base=")]
