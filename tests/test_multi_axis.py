"""Tests for ropelab.multi_axis: 2D axial and mixed RoPE, M-RoPE (chapter 10)."""

import functools
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import apply_rotary, cos_sin, inv_freq, to_interleaved
from ropelab.multi_axis import (
    apply_axial,
    apply_mixed,
    axial_angles,
    axial_inv_freq,
    axial_theta_xy,
    grid_positions,
    mixed_angles,
    mixed_theta_init,
    mrope_angles,
    mrope_cos_sin,
    mrope_pair_axes,
    mrope_position_ids,
    relative_score_2d,
    rope_scores_2d,
)
from ropelab.rotary import cos_sin_from_angles

F64 = torch.float64
seeds = st.integers(0, 2**31 - 1)
quarters = st.integers(1, 8)  # dim = 4 * quarter
bases = st.floats(2.0, 1e5, allow_nan=False)
layouts = st.sampled_from(["half_split", "interleaved"])


def randn(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def random_theta(pairs, seed):
    """Random mixed frequencies (pairs, 2), of order 1."""
    return randn(pairs, 2, seed=seed)


# grid positions and axial angles, by hand --------------------------------------------


def test_grid_positions_row_major_by_hand():
    expected = torch.tensor([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]])
    assert torch.equal(grid_positions(2, 3), expected)
    assert grid_positions(4, 1).tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]


def test_axial_inv_freq_is_the_1d_ladder_of_half_the_dim():
    assert torch.equal(axial_inv_freq(64, 100.0), inv_freq(32, 100.0))
    # θ_j = b^(-4j/d): d = 8, b = 100 gives 1 and 0.1
    assert axial_inv_freq(8, 100.0, dtype=F64).tolist() == pytest.approx([1.0, 0.1], abs=1e-15)


def test_axial_angles_by_hand():
    # d = 8, base 100: θ = (1, 0.1). Patch (x, y) = (2, 3): pairs turn by 2, 0.2 (with x) and 3, 0.3 (with y).
    a = axial_angles([[2, 3], [0, 0]], 8, 100.0, dtype=F64)
    assert a.shape == (2, 4)
    assert a[0].tolist() == pytest.approx([2.0, 0.2, 3.0, 0.3], abs=1e-15)
    assert a[1].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_axial_theta_xy_by_hand():
    t = axial_theta_xy(8, 100.0, dtype=F64)
    expected = torch.tensor([[1.0, 0.0], [0.1, 0.0], [0.0, 1.0], [0.0, 0.1]], dtype=F64)
    torch.testing.assert_close(t, expected, rtol=0, atol=1e-15)


@given(seed=seeds, quarter=quarters, base=bases)
def test_mixed_angles_with_axial_frequencies_equal_axial_angles_exactly(seed, quarter, base):
    dim = 4 * quarter
    pos = torch.randint(0, 1000, (7, 2), generator=torch.Generator().manual_seed(seed))
    for dtype in (torch.float32, F64):
        assert torch.equal(mixed_angles(pos, axial_theta_xy(dim, base, dtype=dtype)), axial_angles(pos, dim, base, dtype=dtype))


def test_axial_angles_batched_positions():
    pos = torch.randint(0, 50, (3, 5, 2), generator=torch.Generator().manual_seed(1))
    a = axial_angles(pos, 16)
    assert a.shape == (3, 5, 8) and a.dtype == torch.float32
    assert torch.equal(a[1], axial_angles(pos[1], 16))


# apply_axial / apply_mixed -------------------------------------------------------------


@given(seed=seeds, quarter=quarters, base=bases, layout=layouts)
def test_apply_axial_preserves_norms(seed, quarter, base, layout):
    dim = 4 * quarter
    x = randn(2, 6, dim, seed=seed)
    out = apply_axial(x, grid_positions(2, 3), base=base, layout=layout)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)


def test_apply_axial_at_the_origin_is_the_identity():
    x = randn(3, 8)
    assert torch.equal(apply_axial(x, torch.zeros(3, 2, dtype=torch.long)), x)


def test_apply_axial_rotates_pair_j_by_x_theta_and_pair_j_plus_quarter_by_y_theta():
    # d = 8, half-split: pair j is channels (j, j + 4). Unit vector on channel 0 (pair 0, turns with x)
    # and on channel 2 (pair 2, turns with y, θ_0 = 1).
    x = torch.zeros(2, 8, dtype=F64)
    x[:, 0] = 1.0
    x[:, 2] = 1.0
    out = apply_axial(x, [[2, 0], [0, 3]], base=100.0)
    assert out[0, [0, 4]].tolist() == pytest.approx([math.cos(2), math.sin(2)], abs=1e-15)  # x = 2
    assert out[0, [2, 6]].tolist() == pytest.approx([1.0, 0.0], abs=1e-15)  # y = 0
    assert out[1, [0, 4]].tolist() == pytest.approx([1.0, 0.0], abs=1e-15)  # x = 0
    assert out[1, [2, 6]].tolist() == pytest.approx([math.cos(3), math.sin(3)], abs=1e-15)  # y = 3


@given(seed=seeds, quarter=quarters)
def test_apply_axial_layouts_agree_up_to_the_permutation(seed, quarter):
    dim = 4 * quarter
    x = randn(6, dim, seed=seed)
    pos = grid_positions(3, 2)
    half = apply_axial(x, pos, base=100.0, layout="half_split")
    inter = apply_axial(to_interleaved(x), pos, base=100.0, layout="interleaved")
    torch.testing.assert_close(to_interleaved(half), inter, rtol=0, atol=1e-13)


def test_apply_mixed_with_axial_frequencies_is_apply_axial():
    x = randn(2, 12, 16)
    pos = grid_positions(3, 4)
    torch.testing.assert_close(apply_mixed(x, pos, axial_theta_xy(16, 100.0, dtype=F64)), apply_axial(x, pos, base=100.0),
                               rtol=0, atol=1e-14)


def test_apply_mixed_per_head_frequencies_broadcast_over_heads():
    heads, n, dim = 3, 6, 16
    theta = mixed_theta_init(dim, heads, generator=torch.Generator().manual_seed(0), dtype=F64)
    x = randn(2, heads, n, dim)
    pos = grid_positions(2, 3)
    out = apply_mixed(x, pos, theta)
    assert out.shape == x.shape
    for h in range(heads):
        torch.testing.assert_close(out[:, h], apply_mixed(x[:, h], pos, theta[h]), rtol=0, atol=1e-14)


def test_apply_mixed_is_differentiable_in_theta():
    theta = torch.nn.Parameter(mixed_theta_init(8, 2, generator=torch.Generator().manual_seed(0), dtype=F64))
    q, k = randn(2, 6, 8, seed=1), randn(2, 6, 8, seed=2)
    pos = grid_positions(2, 3)
    loss = (apply_mixed(q, pos, theta) * apply_mixed(k, pos, theta)).sum()
    loss.backward()
    assert theta.grad is not None and theta.grad.shape == theta.shape and bool(theta.grad.abs().sum() > 0)


def test_apply_keeps_dtype_and_float32_agrees_with_float64():
    x = randn(6, 16)
    pos = grid_positions(2, 3)
    out32 = apply_axial(x.float(), pos, base=100.0)
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32.double(), apply_axial(x, pos, base=100.0), rtol=0, atol=1e-5)


# mixed_theta_init ---------------------------------------------------------------


def test_mixed_theta_init_is_the_axial_ladder_turned_per_head():
    dim, heads = 16, 4
    t = mixed_theta_init(dim, heads, 10.0, generator=torch.Generator().manual_seed(3), dtype=F64)
    assert t.shape == (heads, dim // 2, 2)
    ladder = axial_inv_freq(dim, 10.0, dtype=F64)
    torch.testing.assert_close(t.norm(dim=-1), ladder.repeat(2).expand(heads, -1), rtol=0, atol=1e-14)
    first, second = t[:, : dim // 4], t[:, dim // 4 :]
    # the two groups point in perpendicular directions, one direction per head and group
    torch.testing.assert_close((first * second).sum(-1), torch.zeros(heads, dim // 4, dtype=F64), rtol=0, atol=1e-14)
    unit = first / first.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(unit, unit[:, :1].expand_as(unit), rtol=0, atol=1e-14)


# the relative property (eq. multi-relative) -------------------------------------------


@given(seed=seeds, quarter=quarters, layout=layouts, axial=st.booleans())
def test_scores_depend_on_the_offset_only(seed, quarter, layout, axial):
    dim = 4 * quarter
    theta = axial_theta_xy(dim, 100.0, dtype=F64) if axial else random_theta(dim // 2, seed)
    q, k = randn(dim, seed=seed), randn(dim, seed=seed + 1)
    gen = torch.Generator().manual_seed(seed)
    p1, p2 = torch.randint(0, 200, (2,), generator=gen), torch.randint(0, 200, (2,), generator=gen)
    shift = torch.randint(0, 200, (2,), generator=gen)
    s1 = rope_scores_2d(q[None], k[None], p1[None], p2[None], theta, layout=layout)
    s2 = rope_scores_2d(q[None], k[None], (p1 + shift)[None], (p2 + shift)[None], theta, layout=layout)
    assert abs(float(s1 - s2)) <= 1e-9 * (1 + float(q.norm() * k.norm()))


@given(seed=seeds, quarter=quarters, layout=layouts, axial=st.booleans())
def test_closed_form_matches_rotated_scores(seed, quarter, layout, axial):
    dim = 4 * quarter
    theta = axial_theta_xy(dim, 100.0, dtype=F64) if axial else random_theta(dim // 2, seed)
    q, k = randn(dim, seed=seed), randn(dim, seed=seed + 1)
    pos = grid_positions(3, 4)
    S = rope_scores_2d(q.expand(12, dim), k.expand(12, dim), pos, pos, theta, layout=layout)
    closed = relative_score_2d(q, k, pos[:, None, :] - pos[None, :, :], theta, layout=layout)
    torch.testing.assert_close(S, closed, rtol=0, atol=1e-11)


def test_grid_score_matrix_is_translation_invariant():
    dim = 32
    theta = axial_theta_xy(dim, 100.0, dtype=F64)
    q, k = randn(12, dim, seed=4), randn(12, dim, seed=5)
    pos = grid_positions(3, 4)
    S = rope_scores_2d(q, k, pos, pos, theta)
    moved = pos + torch.tensor([17, 5])
    torch.testing.assert_close(rope_scores_2d(q, k, moved, moved, theta), S, rtol=0, atol=1e-11)
    # and it is not invariant under moving only the keys
    assert not torch.allclose(rope_scores_2d(q, k, pos, moved, theta), S, atol=1e-3)


def test_relative_score_2d_at_zero_offset_is_the_plain_dot_product():
    q, k = randn(16, seed=1), randn(16, seed=2)
    r = relative_score_2d(q, k, [[0, 0]], random_theta(8, 3))
    assert r.shape == (1,)
    assert float(r[0]) == pytest.approx(float(q @ k), abs=1e-12)


def test_axial_scores_are_separable_and_diagonal_mixed_scores_are_not():
    # axial: S(Δ) = f(Δx) + g(Δy), so the mixed second difference vanishes (eq. multi-separable)
    dim = 16
    q, k = randn(dim, seed=7), randn(dim, seed=8)
    d = torch.tensor([[[1, 1], [1, 0]], [[0, 1], [0, 0]]]) + torch.tensor([3, -2])

    def mixed_difference(theta):
        s = relative_score_2d(q, k, d, theta)
        return float(s[0, 0] - s[0, 1] - s[1, 0] + s[1, 1])

    assert abs(mixed_difference(axial_theta_xy(dim, 100.0, dtype=F64))) < 1e-12
    diagonal = axial_theta_xy(dim, 100.0, dtype=F64).sum(dim=-1, keepdim=True).expand(-1, 2).contiguous()
    assert abs(mixed_difference(diagonal)) > 1e-3


# argument checks ------------------------------------------------------------------


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="divisible by 4"):
        axial_angles([[0, 0]], 6)
    with pytest.raises(ValueError, match="divisible by 4"):
        apply_axial(torch.zeros(1, 6), [[0, 0]])
    with pytest.raises(ValueError, match=r"positions_xy must have shape \(\.\.\., n, 2\)"):
        axial_angles(torch.zeros(4, 3, dtype=torch.long), 8)
    with pytest.raises(ValueError, match=r"positions_xy must have shape"):
        axial_angles(torch.zeros(4, dtype=torch.long), 8)
    with pytest.raises(TypeError, match="positions_xy.*integer"):
        axial_angles(torch.zeros(4, 2), 8)
    with pytest.raises(ValueError, match="positions_xy.*>= 0"):
        axial_angles([[0, -1]], 8)
    with pytest.raises(ValueError, match="n = 3"):
        apply_axial(torch.zeros(3, 8), grid_positions(2, 2))
    with pytest.raises(ValueError, match="theta_xy must have shape"):
        mixed_angles([[0, 0]], torch.zeros(4, 3))
    with pytest.raises(TypeError, match="theta_xy must be float32 or float64"):
        mixed_angles([[0, 0]], torch.zeros(4, 2, dtype=torch.float16))
    with pytest.raises(ValueError, match="dim//2 = 4"):
        apply_mixed(torch.zeros(2, 8), [[0, 0], [1, 0]], torch.zeros(3, 2))
    with pytest.raises(ValueError, match="rows must be positive"):
        grid_positions(0, 3)
    with pytest.raises(TypeError, match="deltas_xy must be integers"):
        relative_score_2d(torch.zeros(8), torch.zeros(8), torch.zeros(1, 2), torch.zeros(4, 2))


# M-RoPE ----------------------------------------------------------------------------


def test_mrope_pair_axes_by_hand():
    assert mrope_pair_axes([16, 24, 24]).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    assert mrope_pair_axes([1, 0, 2]).tolist() == [0, 2, 2]


def test_mrope_angles_by_hand():
    # d = 8, base 10^4: θ = (1, 0.1, 0.01, 0.001); section [1, 1, 2]: pair 0 <- t, pair 1 <- h, pairs 2, 3 <- w
    theta = inv_freq(8, 10000.0, dtype=F64)
    ids = torch.tensor([5, 7, 11]).reshape(3, 1, 1)  # t = 5, h = 7, w = 11
    a = mrope_angles(ids, theta, [1, 1, 2])
    assert a.shape == (1, 1, 4)
    assert a[0, 0].tolist() == pytest.approx([5.0, 0.7, 0.11, 0.011], abs=1e-15)


@given(seed=seeds, sizes=st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 6)))
def test_mrope_cos_sin_is_the_cos_sin_of_mrope_angles(seed, sizes):
    section = list(sizes)
    theta = inv_freq(2 * sum(section))
    ids = torch.randint(0, 5000, (3, 2, 5), generator=torch.Generator().manual_seed(seed))
    cos, sin = mrope_cos_sin(ids, theta, section)
    c2, s2 = cos_sin_from_angles(mrope_angles(ids, theta, section))
    assert cos.shape == (2, 5, 2 * sum(section))
    assert torch.equal(cos, c2) and torch.equal(sin, s2)


@given(seed=seeds, sizes=st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 6)))
def test_mrope_with_three_equal_ids_is_1d_rope_exactly(seed, sizes):
    section = list(sizes)
    for dtype in (torch.float32, F64):
        theta = inv_freq(2 * sum(section), 1e6, dtype=dtype)
        m = torch.randint(0, 100000, (2, 9), generator=torch.Generator().manual_seed(seed))
        cos, sin = mrope_cos_sin(m.expand(3, 2, 9), theta, section, dtype=dtype)
        c1, s1 = cos_sin(m, theta, dtype=dtype)
        assert torch.equal(cos, c1) and torch.equal(sin, s1)


def test_mrope_scores_unchanged_when_every_id_moves_by_the_same_amount():
    dim, section = 16, [2, 3, 3]
    theta = inv_freq(dim, dtype=F64)
    ids = mrope_position_ids([("text", 2), ("image", (2, 2)), ("text", 2)])[:, None]  # (3, 1, 8)
    q, k = randn(1, 8, dim, seed=1), randn(1, 8, dim, seed=2)

    def scores(i):
        cos, sin = mrope_cos_sin(i, theta, section, dtype=F64)
        return apply_rotary(q, cos, sin) @ apply_rotary(k, cos, sin).transpose(-1, -2)

    torch.testing.assert_close(scores(ids + 40), scores(ids), rtol=0, atol=1e-11)


def test_mrope_position_ids_by_hand():
    ids = mrope_position_ids([("text", 3), ("image", (2, 3)), ("text", 2)])
    assert ids.tolist() == [
        [0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7],  # t: text counts up; the image keeps t = 3
        [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7],  # h: 3 + row
        [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7],  # w: 3 + col; text resumes at max + 1 = 6
    ]
    # an image first, then text; a tall image advances by its rows
    assert mrope_position_ids([("image", (3, 1)), ("text", 1)]).tolist() == [[0, 0, 0, 3], [0, 1, 2, 3], [0, 0, 0, 3]]
    assert mrope_position_ids([("text", 4)]).tolist() == [[0, 1, 2, 3]] * 3


def test_mrope_errors():
    with pytest.raises(ValueError, match="sum to dim//2 = 8"):
        mrope_cos_sin(torch.zeros(3, 1, 2, dtype=torch.long), inv_freq(16), [2, 2, 2])
    with pytest.raises(ValueError, match="list of 3 ints"):
        mrope_angles(torch.zeros(3, 1, 2, dtype=torch.long), inv_freq(16), [4, 4])
    with pytest.raises(ValueError, match=r"position_ids_3 must have shape \(3, batch, seq\)"):
        mrope_cos_sin(torch.zeros(2, 1, 2, dtype=torch.long), inv_freq(16), [2, 3, 3])
    with pytest.raises(TypeError, match="position_ids_3.*integer"):
        mrope_cos_sin(torch.zeros(3, 1, 2), inv_freq(16), [2, 3, 3])
    with pytest.raises(ValueError, match="kind must be 'text' or 'image'"):
        mrope_position_ids([("video", (1, 2, 2))])
    with pytest.raises(ValueError, match=r"segments\[1\].*\(rows, cols\)"):
        mrope_position_ids([("text", 1), ("image", 4)])
    with pytest.raises(ValueError, match="must not be empty"):
        mrope_position_ids([])


# against transformers' Qwen2-VL ------------------------------------------------------


@pytest.fixture(scope="module")
def qwen2_vl():
    return pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")


def _text_config(qwen2_vl_module, head_dim, section, theta):
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig

    return Qwen2VLTextConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1,
        intermediate_size=8, vocab_size=16, bos_token_id=None, eos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": section},
    )


@pytest.mark.parametrize("head_dim, section, theta", [(128, [16, 24, 24], 1e6), (32, [4, 6, 6], 1e4), (16, [2, 2, 4], 500.0)])
def test_mrope_matches_transformers_qwen2_vl(qwen2_vl, head_dim, section, theta):
    emb = qwen2_vl.Qwen2VLRotaryEmbedding(_text_config(qwen2_vl, head_dim, section, theta))
    assert emb.mrope_section == section
    ids = torch.randint(0, 20000, (3, 2, 7), generator=torch.Generator().manual_seed(head_dim))
    x = torch.zeros(2, 7, head_dim)
    cos_hf, sin_hf = emb(x, ids)
    ours_theta = inv_freq(head_dim, theta)
    torch.testing.assert_close(emb.inv_freq, ours_theta, rtol=0, atol=0)
    cos, sin = mrope_cos_sin(ids, ours_theta, section)
    torch.testing.assert_close(cos, cos_hf, rtol=0, atol=1e-6)
    torch.testing.assert_close(sin, sin_hf, rtol=0, atol=1e-6)
    # rotated q and k: transformers' apply_rotary_pos_emb with its tables against ropelab's apply_rotary with ours
    q, k = randn(2, 3, 7, head_dim, seed=1, dtype=torch.float32), randn(2, 3, 7, head_dim, seed=2, dtype=torch.float32)
    q_hf, k_hf = qwen2_vl.apply_rotary_pos_emb(q, k, cos_hf, sin_hf)
    torch.testing.assert_close(apply_rotary(q, cos[:, None], sin[:, None]), q_hf, rtol=0, atol=1e-5)
    torch.testing.assert_close(apply_rotary(k, cos[:, None], sin[:, None]), k_hf, rtol=0, atol=1e-5)


def test_mrope_recipe_of_earlier_transformers_releases(qwen2_vl):
    # Before the selection moved into Qwen2VLRotaryEmbedding, apply_multimodal_rotary_pos_emb took three full
    # (duplicated) half-split tables and picked chunk i of `mrope_section * 2` from axis i mod 3: same numbers.
    section, theta = [4, 6, 6], inv_freq(32)
    ids = torch.randint(0, 999, (3, 1, 5), generator=torch.Generator().manual_seed(0))
    full_cos, full_sin = cos_sin(ids, theta)  # (3, 1, 5, 32)
    picked = [torch.cat([m[i % 3] for i, m in enumerate(t.split(section * 2, dim=-1))], dim=-1) for t in (full_cos, full_sin)]
    cos, sin = mrope_cos_sin(ids, theta, section)
    assert torch.equal(cos, picked[0]) and torch.equal(sin, picked[1])


@pytest.mark.parametrize(
    "segments",
    [
        [("text", 3), ("image", (2, 3)), ("text", 2)],
        [("image", (3, 2)), ("text", 4), ("image", (1, 5)), ("text", 1)],
        [("text", 1), ("image", (4, 4)), ("text", 2), ("image", (2, 1)), ("text", 3)],
    ],
)
def test_mrope_position_ids_match_transformers_get_rope_index(qwen2_vl, segments):
    # get_rope_index only needs spatial_merge_size and get_vision_position_ids from the model: no weights.
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=1)))
    fake.get_vision_position_ids = functools.partial(qwen2_vl.Qwen2VLModel.get_vision_position_ids, fake)
    types, grids = [], []
    for kind, size in segments:
        if kind == "text":
            types += [0] * size
        else:
            types += [1] * (size[0] * size[1])
            grids.append([1, *size])
    types = torch.tensor([types])
    position_ids, _ = qwen2_vl.Qwen2VLModel.get_rope_index(
        fake, torch.zeros_like(types), types, image_grid_thw=torch.tensor(grids)
    )
    assert torch.equal(mrope_position_ids(segments), position_ids[:, 0])


def test_axial_matches_qwen2_vl_vision_encoder_with_rows_first(qwen2_vl):
    # Qwen2-VL's ViT uses axial 2D RoPE with the row (h) pairs first: our (x, y) order with the columns swapped.
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig

    config = Qwen2VLVisionConfig(embed_dim=64, num_heads=2, depth=1)
    emb = qwen2_vl.Qwen2VLVisionRotaryEmbedding(config)
    pos = grid_positions(3, 4)
    cos_hf, sin_hf = emb(torch.zeros(12, 64), pos.flip(-1))
    cos, sin = cos_sin_from_angles(axial_angles(pos.flip(-1), 32, config.rope_parameters["rope_theta"]))
    torch.testing.assert_close(cos, cos_hf, rtol=0, atol=1e-6)
    torch.testing.assert_close(sin, sin_hf, rtol=0, atol=1e-6)
