"""Tests for ropelab.book.ch12: the drift of keys moved step by step."""

import pytest
import torch

from ropelab import inv_freq
from ropelab.book import ch12


def _drift(dtype):
    gen = torch.Generator().manual_seed(0)
    raw = torch.randn(2, 4, 16, dtype=torch.float64, generator=gen)
    f = inv_freq(16, 10000.0)
    return ch12.rerotation_drift(raw, f, 32, [1, 4, 32], dtype=dtype)


def test_float32_keys_moved_once_stay_at_one_rounding():
    errors, ratio = _drift(torch.float32)
    assert list(errors) == list(ch12.DRIFT_WAYS)
    assert all(len(e) == 3 for e in errors.values())
    assert max(errors["once by the total"]) < 1e-5
    assert max(errors["encoded afresh"]) < 1e-5
    assert ratio == pytest.approx(1.0, abs=1e-4)


def test_bfloat16_step_by_step_drifts_past_once_by_the_total():
    errors, _ = _drift(torch.bfloat16)
    step, once = errors["step by step"], errors["once by the total"]
    assert step[0] == pytest.approx(once[0])  # one move: the same rotation
    assert step[-1] > 3 * once[-1]
    assert step[-1] > step[0]


def test_marks_past_the_start_are_refused():
    raw = torch.randn(1, 2, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match="past start"):
        ch12.rerotation_drift(raw, inv_freq(8), 4, [8], dtype=torch.float32)


def test_drift_table_has_one_row_per_move_count():
    marks = [1, 2, 4]
    drift = {"float32": {w: [1e-7, 2e-7, 3e-7] for w in ch12.DRIFT_WAYS}}
    lines = ch12.drift_table(marks, drift, rows=(1, 4)).splitlines()
    assert len(lines) == 3 and lines[2].split()[0] == "4"
    assert "3.0e-07" in lines[2]


def test_dynamic_ntk_generation_caches_every_decoded_key():
    torch.manual_seed(0)
    run = ch12.dynamic_ntk_generation(8, 2.0, 8, 12)
    assert run.config.rope_parameters["rope_type"] == "dynamic"
    assert run.cached_keys.shape == run.k_raw.shape == run.q_raw.shape == (1, 2, 12, 8)
    # position 0 is not rotated, whatever the base: its cached key is the raw key
    assert torch.allclose(run.cached_keys[..., 0, :], run.k_raw[..., 0, :], atol=1e-6)


def test_show_prints_rounding_as_a_bound():
    assert ch12.show(1.25e-3) == "1.2e-03" or ch12.show(1.25e-3) == "1.3e-03"
    assert ch12.show(3e-9) == "< 1e-06"
    assert ch12.show(3e-5, 1e-4) == "< 1e-04"


def test_packing_leaks_only_without_the_per_document_mask():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, 16, generator=gen) for _ in range(3))
    rows = ch12.packing_leak_table(q, k, v, torch.tensor([0, 4, 9]), inv_freq(16))
    rows = rows.splitlines()
    assert len(rows) == 6
    per_doc, causal = rows[1:3], rows[3:5]
    assert all(r.endswith("< 1e-06") for r in per_doc)
    assert not any(r.endswith("< 1e-06") for r in causal)
    assert "reads 8 keys under the causal mask, 4 under the per-document" in rows[5]


def test_gguf_copy_with_norm_is_the_transformers_model():
    from ropelab import apply_rotary

    def rope_norm(q, k, cos, sin, unsqueeze_dim=1):
        half = cos.shape[-1] // 2
        c = cos[..., :half].repeat_interleave(2, -1).unsqueeze(unsqueeze_dim)
        s = sin[..., :half].repeat_interleave(2, -1).unsqueeze(unsqueeze_dim)
        return (apply_rotary(q, c, s, layout="interleaved"),
                apply_rotary(k, c, s, layout="interleaved"))

    torch.manual_seed(0)
    hf, gguf = ch12.llama_and_gguf_copy()
    tokens = torch.randint(0, 64, (1, 12))
    runs = ch12.logits_by_rope_type({"hf": hf, "gguf": gguf}, tokens, rope_norm)
    ref = runs["hf", "NEOX"]
    assert torch.allclose(runs["gguf", "NORM"], ref, atol=1e-4)
    assert not torch.allclose(runs["gguf", "NEOX"], ref, atol=1e-2)
    table = ch12.conversion_table(runs, ref).splitlines()
    assert len(table) == 5 and table[1].split()[-1] == "100%"


def test_rope_norm_rotates_adjacent_pairs_as_meta_does():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 5, 8, generator=gen, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 8, generator=gen, dtype=torch.float64)
    angles = torch.arange(5.0, dtype=torch.float64)[:, None] * inv_freq(8).double()
    emb = torch.cat([angles, angles], -1)[None]  # transformers' half-split tables
    q_norm, k_norm = ch12.rope_norm(q, k, emb.cos(), emb.sin())
    rot = torch.polar(torch.ones_like(angles), angles)  # Meta: pairs (2i, 2i+1)
    for x, got in ((q, q_norm), (k, k_norm)):
        meta = torch.view_as_real(torch.view_as_complex(x.reshape(1, 2, 5, 4, 2)) * rot)
        torch.testing.assert_close(got, meta.flatten(-2))


def test_base_table_prints_the_base_at_each_length():
    lines = ch12.base_table(lambda s: 1000.0 * s, 32, 2.0, 48).splitlines()
    assert [int(line.split()[0]) for line in lines[1:]] == [32, 33, 40, 48, 64]
    assert lines[1].split()[1] == "32,000" and "original base" in lines[1]
    assert lines[5].split()[1] == "64,000" and "vLLM" in lines[5]


def test_key_drift_table_groups_the_keys_by_when_they_were_written():
    today = torch.zeros(1, 2, 10, 4)
    cached = today.clone()
    cached[0, 1, 2, 3] = -0.5  # a prompt key
    cached[0, 0, 5, 0] = 0.25  # first half of the steps past L = 4 (4..5)
    cached[0, 1, 7, 2] = 2.0  # second half (6..8)
    lines = ch12.key_drift_table(cached, today, 4).splitlines()
    assert [line.rsplit(maxsplit=1)[-1] for line in lines[1:]] == [
        "0.500", "0.250", "2.000", "0.000"]
    assert lines[1].startswith("0..3 (the prompt)") and lines[4].startswith("9 (today)")
    assert lines[2].startswith("4..5 ") and lines[3].startswith("6..8 ")
    with pytest.raises(ValueError, match="original_max=8"):
        ch12.key_drift_table(cached, today, 8)


def test_score_gaps_measure_inside_and_past_the_original_context():
    ref = torch.zeros(6)
    other = torch.tensor([0.0, -0.5, 0.25, 2.0, 0.0, -1.0])
    (line,) = ch12.score_gaps({"ref": ref, "other": other}, 3).splitlines()
    assert line.endswith("on keys 0..L−1: 0.500, L..: 2.000")


def test_weight_gaps_compare_each_case_with_the_first():
    def weights(query_pos, key_pos):  # a toy rule: weight grows with the offset
        w = torch.tensor([float(query_pos - p) for p in key_pos])
        return w / 100

    lines = ch12.weight_gaps(weights, {"a": (3, [0, 1]), "b": (4, [0, 1])}).splitlines()
    assert lines[1].split()[-2:] == ["<", "1e-06"]
    assert lines[2].split()[-1] == "1.0e-02"


def test_query_weights_are_a_softmax_of_rotated_scores_by_hand():
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(8, generator=gen), torch.randn(5, 8, generator=gen)
    f = inv_freq(8)
    got = ch12.query_weights(q, k, f)(7, [1, 2, 3, 4, 6])

    def by_hand(x, p):  # half-split pair (j, j + 4) as a complex number times e^{ipθ}
        z = torch.complex(x[..., :4], x[..., 4:]) * torch.polar(torch.ones(4), p * f)
        return torch.cat((z.real, z.imag), -1)

    keys = torch.stack([by_hand(k[i], p) for i, p in enumerate([1, 2, 3, 4, 6])])
    want = torch.softmax(keys @ by_hand(q, 7) / 8**0.5, dim=0)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert abs(float(got.sum()) - 1) < 1e-6
