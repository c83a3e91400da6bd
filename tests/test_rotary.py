"""Tests for ropelab.rotary: cos/sin tables, rotate_half and apply_rotary in both layouts.

apply_rotary is checked against references it does not share code with:
numbers worked out by hand, a pair-by-pair 2×2 rotation in float64 built from
channel indices (:func:`pair_rotation`), and transformers' LLaMA code.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import apply_rotary, cos_sin, inv_freq, rotate_half
from ropelab import kernels
from ropelab._checks import overlaps
from ropelab.kernels import cpu
from ropelab.rotary import rotate, rotate_interleaved

LAYOUTS = ["half_split", "interleaved"]
F64 = torch.float64


def pair_indices(dim, layout):
    """The channels (a, b) of each pair j: (j, j + dim/2) half-split, (2j, 2j+1) interleaved."""
    if layout == "half_split":
        return torch.arange(dim // 2), torch.arange(dim // 2) + dim // 2
    return torch.arange(0, dim, 2), torch.arange(1, dim, 2)


def pair_rotation(x, cos, sin, layout):
    """An independent reference in float64: each pair (a, b) -> (a c - b s, a s + b c).

    c and s are the tables' entries at the pair's first channel, so the
    tables may have any layout-consistent content; no rotate_half, no cat.
    """
    ia, ib = pair_indices(x.shape[-1], layout)
    x, c, s = x.double(), cos.double()[..., ia], sin.double()[..., ia]
    a, b = x[..., ia], x[..., ib]
    out = torch.empty(torch.broadcast_shapes(x.shape, cos.shape), dtype=F64)
    out[..., ia], out[..., ib] = a * c - b * s, a * s + b * c
    return out


def rope(x, positions, layout, base=10000.0):
    cos, sin = cos_sin(positions, inv_freq(x.shape[-1], base, dtype=x.dtype if x.dtype == F64 else torch.float32),
                       layout=layout, dtype=x.dtype)
    return apply_rotary(x, cos, sin, layout=layout)


# Worked examples: dim 4, base 100, position 1, θ = (1, 0.1) ------------------
# cos 1 = 0.5403023, sin 1 = 0.8414710, cos 0.1 = 0.9950042, sin 0.1 = 0.0998334

def test_half_split_by_hand():
    # pairs (x0, x2) = (1, 3) turn by 1 rad, (x1, x3) = (2, 4) by 0.1 rad
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=F64)
    expected = [1 * 0.5403023 - 3 * 0.8414710,   # -1.9841107
                2 * 0.9950042 - 4 * 0.0998334,   #  1.5906747
                3 * 0.5403023 + 1 * 0.8414710,   #  2.4623779
                4 * 0.9950042 + 2 * 0.0998334]   #  4.1796835
    got = rope(x, [1], "half_split", base=100.0)
    torch.testing.assert_close(got[0], torch.tensor(expected, dtype=F64), atol=1e-6, rtol=0)


def test_interleaved_by_hand():
    # pairs (x0, x1) = (1, 2) turn by 1 rad, (x2, x3) = (3, 4) by 0.1 rad
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=F64)
    expected = [-1.1426397, 1.9220756, 2.5856788, 4.2795169]
    got = rope(x, [1], "interleaved", base=100.0)
    torch.testing.assert_close(got[0], torch.tensor(expected, dtype=F64), atol=1e-6, rtol=0)


def test_cos_sin_tables_by_hand():
    theta = inv_freq(4, 100.0, dtype=F64)
    cos, sin = cos_sin([1], theta, dtype=F64)
    torch.testing.assert_close(cos[0], torch.tensor([math.cos(1), math.cos(0.1)] * 2, dtype=F64))
    cos_i, sin_i = cos_sin([1], theta, layout="interleaved", dtype=F64)
    torch.testing.assert_close(sin_i[0], torch.tensor([math.sin(1)] * 2 + [math.sin(0.1)] * 2, dtype=F64))


def test_rotate_half_by_hand():
    assert rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == [-3.0, -4.0, 1.0, 2.0]
    assert rotate_interleaved(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == [-2.0, 1.0, -4.0, 3.0]


def test_position_zero_is_identity():
    x = torch.randn(2, 3, 5, 8)
    for layout in LAYOUTS:
        assert torch.equal(rope(x, torch.zeros(5, dtype=torch.long), layout), x)


def test_attention_scaling_multiplies_tables():
    theta = inv_freq(8)
    c1, s1 = cos_sin(torch.arange(5), theta)
    c2, s2 = cos_sin(torch.arange(5), theta, attention_scaling=1.5)
    torch.testing.assert_close(c2, 1.5 * c1)
    torch.testing.assert_close(s2, 1.5 * s1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_attention_scaling_is_applied_before_the_cast(dtype, layout):
    # YaRN's temperature multiplies cos and sin in float32 (transformers does too); only
    # then are the tables rounded to a 16-bit dtype, once. Scaling after the cast rounds
    # twice and changes about a fifth of the entries (issue 24's mutation).
    theta = inv_freq(128)
    positions = torch.arange(0, 4096, 3)
    wide = torch.outer(positions.double(), theta.double()).float()  # m·θ, float32
    wide = torch.cat((wide, wide), -1) if layout == "half_split" else wide.repeat_interleave(2, -1)
    scale = 1.0 + 0.1 * math.log(8.0)  # YaRN's mscale for a factor of 8
    c, s = cos_sin(positions, theta, layout=layout, attention_scaling=scale, dtype=dtype)
    assert torch.equal(c, (wide.cos() * scale).to(dtype))
    assert torch.equal(s, (wide.sin() * scale).to(dtype))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scaled_bfloat16_tables_are_the_float64_values_rounded_once(layout):
    # Independent of torch's kernels: numpy's float64 cos and sin of m·θ (θ in float64),
    # times YaRN's temperature in float64, rounded once to bfloat16. The tables from a
    # float64 inv_freq must be exactly these; scaling after the cast rounds twice.
    import numpy as np

    dim, n = 64, 4096  # 262,144 entries per table
    theta = inv_freq(dim, dtype=torch.float64)
    a = np.outer(np.arange(n, dtype=np.float64), theta.numpy())
    a = np.concatenate((a, a), -1) if layout == "half_split" else np.repeat(a, 2, -1)
    scale = 1.0 + 0.1 * math.log(4.0)  # YaRN's mscale for a factor of 4
    c, s = cos_sin(torch.arange(n), theta, layout=layout, attention_scaling=scale,
                   dtype=torch.bfloat16)
    for got, ref in ((c, np.cos(a) * scale), (s, np.sin(a) * scale)):
        want = torch.from_numpy(ref).to(torch.bfloat16)
        assert int((got != want).sum()) == 0


# dtype, device, shape contract ------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_keeps_dtype_shape_and_input(dtype, layout):
    x = torch.randn(2, 3, 5, 8).to(dtype)
    before = x.clone()
    cos, sin = cos_sin(torch.arange(5), inv_freq(8), layout=layout, dtype=dtype)
    out = apply_rotary(x, cos, sin, layout=layout)
    assert out.dtype == dtype and out.shape == x.shape and out.device == x.device
    assert torch.equal(x, before)


def test_tables_of_other_dtypes_are_cast_to_x_first():
    x = torch.randn(2, 5, 8)
    cos, sin = cos_sin(torch.arange(5), inv_freq(8, dtype=F64), dtype=F64)
    want = apply_rotary(x, cos.float(), sin.float())
    assert torch.equal(apply_rotary(x, cos, sin.float()), want)
    assert torch.equal(apply_rotary(x, cos.float(), sin), want)
    assert apply_rotary(x.bfloat16(), cos, sin).dtype == torch.bfloat16


def test_tables_computed_in_float32_whatever_the_output_dtype():
    # bf16 tables are the float32 ones rounded once, not cos of bf16 angles
    theta = inv_freq(64, 500000.0)
    pos = torch.arange(100_000, 100_016)
    c16, s16 = cos_sin(pos, theta, dtype=torch.bfloat16)
    c32, s32 = cos_sin(pos, theta, dtype=torch.float32)
    assert torch.equal(c16, c32.bfloat16()) and torch.equal(s16, s32.bfloat16())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_partial_rotary_passes_the_rest_through(layout):
    x = torch.randn(2, 5, 12, dtype=F64)
    cos, sin = cos_sin(torch.arange(5) + 100, inv_freq(8, dtype=F64), layout=layout, dtype=F64)
    out = apply_rotary(x, cos, sin, rotary_dim=8, layout=layout)
    assert torch.equal(out[..., 8:], x[..., 8:])
    torch.testing.assert_close(out[..., :8], pair_rotation(x[..., :8], cos, sin, layout),
                               rtol=0, atol=1e-12)


# Errors ------------------------------------------------------------------------

def test_cos_sin_shape_mismatch_named():
    x = torch.randn(2, 5, 8)
    cos, sin = cos_sin(torch.arange(6), inv_freq(8))
    with pytest.raises(ValueError, match=r"cos of shape \(6, 8\) does not broadcast to x of shape "
                                         r"\(2, 5, 8\)"):
        apply_rotary(x, cos, sin)
    cos, sin = cos_sin(torch.arange(5), inv_freq(4))
    with pytest.raises(ValueError, match=r"cos's last axis must be rotary_dim = 8 .* got \(5, 4\)"):
        apply_rotary(x, cos, sin)
    with pytest.raises(ValueError, match=r"cos and sin must have the same shape"):
        apply_rotary(x, torch.ones(5, 8), torch.zeros(1, 8))


def test_cos_sin_batch_mismatch_has_hint():
    x = torch.randn(2, 4, 5, 8)
    cos, sin = cos_sin(torch.arange(15).reshape(3, 5), inv_freq(8))
    with pytest.raises(ValueError, match=r"does not broadcast.*cos\.unsqueeze\(1\).*unsqueeze_dim"):
        apply_rotary(x, cos, sin)
    cos, sin = cos_sin(torch.arange(5), inv_freq(8))  # (seq, dim) against (batch, seq, heads, dim)
    with pytest.raises(ValueError, match=r"\(seq, 1, dim\) for x \(batch, seq, heads, dim\)"):
        apply_rotary(torch.randn(2, 5, 4, 8), cos, sin)


def test_unknown_layout():
    with pytest.raises(ValueError, match=r"layout must be one of \('half_split', 'interleaved'\), got 'neox'"):
        cos_sin(torch.arange(3), inv_freq(8), layout="neox")
    x = torch.randn(3, 8)
    cos, sin = cos_sin(torch.arange(3), inv_freq(8))
    with pytest.raises(ValueError, match="got 'gptj'"):
        apply_rotary(x, cos, sin, layout="gptj")


def test_bad_x():
    cos, sin = cos_sin(torch.arange(3), inv_freq(8))
    with pytest.raises(ValueError, match=r"x's last axis \(dim\) must be even, got shape \(3, 7\)"):
        apply_rotary(torch.randn(3, 7), cos, sin)
    with pytest.raises(TypeError, match="x must be a floating-point tensor, got dtype torch.int64"):
        apply_rotary(torch.ones(3, 8, dtype=torch.long), cos, sin)
    with pytest.raises(ValueError, match=r"rotary_dim must be even and in \(0, 8\]"):
        apply_rotary(torch.randn(3, 8), cos, sin, rotary_dim=5)


def test_float_positions_in_cos_sin():
    with pytest.raises(TypeError, match="integer dtype"):
        cos_sin(torch.tensor([0.0, 1.5]), inv_freq(8))


# Properties -----------------------------------------------------------------------

dims = st.integers(1, 32).map(lambda h: 2 * h)
positions = st.integers(0, 100_000)


@given(dim=dims, m=positions, seed=st.integers(0, 2**31 - 1), layout=st.sampled_from(LAYOUTS))
def test_norm_preserved(dim, m, seed, layout):
    x = torch.randn(3, 1, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    out = rope(x, [m], layout)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=0)


@given(dim=dims, m=positions, n=positions, shift=positions, seed=st.integers(0, 2**31 - 1),
       layout=st.sampled_from(LAYOUTS))
def test_score_depends_only_on_distance(dim, m, n, shift, seed, layout):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, dim, generator=g, dtype=F64), torch.randn(1, dim, generator=g, dtype=F64)
    score = (rope(q, [m], layout) * rope(k, [n], layout)).sum()
    shifted = (rope(q, [m + shift], layout) * rope(k, [n + shift], layout)).sum()
    assert float(shifted) == pytest.approx(float(score), abs=1e-9 * (1 + float(q.norm() * k.norm())))


@given(dim=dims, seed=st.integers(0, 2**31 - 1))
def test_rotate_half_is_a_quarter_turn(dim, seed):
    x = torch.randn(dim, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(rotate_half(rotate_half(x)), -x)
    assert torch.equal(rotate_interleaved(rotate_interleaved(x)), -x)
    assert abs(float((rotate_half(x) * x).sum())) < 1e-4 * float(x.norm() ** 2 + 1)


# Where the position axis is: (batch, heads, seq, dim), (batch, seq, heads, dim), packed tokens --


@pytest.fixture(params=["kernel", "torch"])
def path(request, monkeypatch):
    """Run a test through the fused CPU kernel and again through the torch path (GPU, no compiler)."""
    kernels._calls.clear()  # nothing remembered from other tests: each call planned here
    if request.param == "torch":
        monkeypatch.setattr(cpu, "plan", lambda *args: None)
        yield request.param
        return
    if not cpu.status()["available"]:
        pytest.skip(f"fused kernel unavailable: {cpu.status()['reason']}")
    ran = []
    planner = cpu.plan

    def plan(*args):
        runner = planner(*args)
        if runner is None:
            return None
        return lambda *a: ran.append(runner(*a)) or ran[-1]

    monkeypatch.setattr(cpu, "plan", plan)
    yield request.param
    assert any(ran), "the kernel declined every call: this test did not run it"


def axis_cases(layout, dtype):
    """(x, cos, sin) with the position axis where each caller keeps it, positions per row."""
    g = torch.Generator().manual_seed(7)
    b, h, s, d = 2, 3, 9, 16
    pos = torch.arange(s) + torch.tensor([[0], [500]])  # (batch, seq): two rows, two offsets
    cos, sin = cos_sin(pos, inv_freq(d), layout=layout, dtype=dtype)  # (batch, seq, dim)
    one = slice(0, 1)
    return {
        "bhsd": (torch.randn(b, h, s, d, generator=g).to(dtype), cos[one], sin[one]),
        "bhsd per row": (torch.randn(b, h, s, d, generator=g).to(dtype), cos[:, None], sin[:, None]),
        "bshd": (torch.randn(b, s, h, d, generator=g).to(dtype), cos[0][:, None], sin[0][:, None]),
        "bshd per row": (torch.randn(b, s, h, d, generator=g).to(dtype),
                         cos.unsqueeze(2), sin.unsqueeze(2)),
        "bshd as a view": (torch.randn(b, h, s, d, generator=g).to(dtype).transpose(1, 2),
                           cos.unsqueeze(2), sin.unsqueeze(2)),
        "packed": (torch.randn(b * s, h, d, generator=g).to(dtype),
                   cos.flatten(0, 1)[:, None], sin.flatten(0, 1)[:, None]),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype, ulp", [(torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7)])
@pytest.mark.parametrize("case", ["bhsd", "bhsd per row", "bshd", "bshd per row", "bshd as a view",
                                  "packed"])
@pytest.mark.parametrize("use_out", [False, True])
def test_tables_broadcast_with_the_position_axis_anywhere(layout, dtype, ulp, case, use_out, path):
    x, cos, sin = axis_cases(layout, dtype)[case]
    out = torch.empty_like(x) if use_out else None
    got = apply_rotary(x, cos, sin, layout=layout, out=out)
    assert got.shape == x.shape and got.dtype == dtype and (out is None or got is out)
    exact = pair_rotation(x, cos, sin, layout)  # tables already in x's dtype
    assert float((got.double() - exact).abs().max()) <= 2 * ulp * float(x.abs().max())


def test_bshd_equals_bhsd_transposed(path):
    x, cos, sin = axis_cases("half_split", torch.float32)["bshd"]
    got = apply_rotary(x, cos, sin)
    transposed = apply_rotary(x.transpose(1, 2).contiguous(), cos[:, 0], sin[:, 0])
    assert torch.equal(got, transposed.transpose(1, 2))


# Agreement with transformers' LLaMA rotary code ------------------------------------


@pytest.fixture(scope="module")
def llama():
    """transformers' LLaMA rotary code, or a skip of the tests that need it (only those)."""
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    def rotary(head_dim=16, heads=4, base=10000.0):
        config = LlamaConfig(hidden_size=head_dim * heads, num_attention_heads=heads,
                             num_key_value_heads=heads, max_position_embeddings=4096,
                             rope_parameters={"rope_type": "default", "rope_theta": base})
        return modeling_llama.LlamaRotaryEmbedding(config)

    return rotary, modeling_llama.apply_rotary_pos_emb


@pytest.mark.parametrize("dtype, ulp", [(torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7)])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("position_ids", [
    torch.arange(7)[None],                              # prefill
    torch.arange(7)[None] + 1000,                       # decoding with an offset
    torch.tensor([[0, 0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6]]),  # per-row, left padded
    torch.tensor([[70000, 70001, 70002, 70003, 70004, 70005, 70006]]),  # far positions
])
def test_matches_transformers_llama(llama, dtype, ulp, base, position_ids):
    hf_rotary, apply_rotary_pos_emb = llama
    g = torch.Generator().manual_seed(0)
    batch = position_ids.shape[0]
    q = torch.randn(batch, 4, 7, 16, generator=g).to(dtype)
    k = torch.randn(batch, 4, 7, 16, generator=g).to(dtype)
    hf_cos, hf_sin = hf_rotary(base=base)(q, position_ids)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)

    cos, sin = cos_sin(position_ids, inv_freq(16, base), dtype=dtype)
    # same float32 θ and angles as transformers: bit-identical tables
    assert torch.equal(cos, hf_cos) and torch.equal(sin, hf_sin)
    out_q = apply_rotary(q, cos[:, None], sin[:, None])
    out_k = apply_rotary(k, cos[:, None], sin[:, None])
    # the fused path rounds fewer times than x*cos + rotate_half(x)*sin: within 2 ulps of the largest output
    atol = 2 * ulp * float(torch.cat((q, k)).abs().max())
    torch.testing.assert_close(out_q, hf_q, atol=atol, rtol=0)
    torch.testing.assert_close(out_k, hf_k, atol=atol, rtol=0)
    if dtype == torch.float32 and cpu.status()["available"]:  # the CPU kernel: transformers' bits exactly
        assert torch.equal(out_q, hf_q) and torch.equal(out_k, hf_k)


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
def test_matches_transformers_unsqueeze_dim(llama, unsqueeze_dim, path):
    # transformers' unsqueeze_dim=2 is x (batch, seq, heads, dim) with tables (batch, seq, 1, dim)
    hf_rotary, apply_rotary_pos_emb = llama
    g = torch.Generator().manual_seed(1)
    position_ids = torch.tensor([[3, 4, 5, 6, 7], [0, 0, 1, 2, 3]])
    shape = (2, 4, 5, 16) if unsqueeze_dim == 1 else (2, 5, 4, 16)
    q, k = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    hf_cos, hf_sin = hf_rotary()(q, position_ids)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin, unsqueeze_dim=unsqueeze_dim)
    cos, sin = hf_cos.unsqueeze(unsqueeze_dim), hf_sin.unsqueeze(unsqueeze_dim)
    torch.testing.assert_close(apply_rotary(q, cos, sin), hf_q, rtol=0, atol=1e-6)
    torch.testing.assert_close(apply_rotary(k, cos, sin), hf_k, rtol=0, atol=1e-6)


# The fast paths against the reference formula and the exact rotation (09_performance) ----


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype, ulp", [(torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7),
                                        (F64, 2.0**-52), (torch.float16, 2.0**-10)])
@pytest.mark.parametrize("shape", [(2, 4, 33, 16), (1, 3, 1, 64), (5, 8)])
def test_fast_path_equals_plain_formula_within_rounding(layout, dtype, ulp, shape, path):
    g = torch.Generator().manual_seed(1)
    x = (4 * torch.randn(shape, generator=g, dtype=F64)).to(dtype)
    cos, sin = cos_sin(torch.arange(shape[-2]) + 1000, inv_freq(shape[-1]), layout=layout)
    got = apply_rotary(x, cos, sin, layout=layout)
    ref = rotate(x, cos.to(dtype), sin.to(dtype), layout)
    exact = pair_rotation(x, cos.to(dtype), sin.to(dtype), layout)
    scale = float(x.abs().max())
    # each within two roundings of the exact rotation on the same (rounded) tables
    assert float((got.double() - exact).abs().max()) <= 2 * ulp * scale
    assert float((ref.double() - exact).abs().max()) <= 2 * ulp * scale


@pytest.mark.parametrize("layout", LAYOUTS)
def test_out_and_non_contiguous_inputs(layout, path):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 7, 4, 16, generator=g).transpose(1, 2)  # (batch, heads, seq, dim), seq-major storage
    cos, sin = cos_sin(torch.arange(7), inv_freq(16), layout=layout)
    exact = pair_rotation(x, cos, sin, layout)
    close = dict(rtol=0, atol=1e-5, check_dtype=False)
    torch.testing.assert_close(apply_rotary(x, cos, sin, layout=layout), exact, **close)
    buf = torch.empty_like(x)
    res = apply_rotary(x, cos, sin, layout=layout, out=buf)
    assert res is buf
    torch.testing.assert_close(buf, exact, **close)
    odd = torch.randn(2, 4, 7, 17, generator=g)[..., 1:]  # odd storage offset: no complex view
    torch.testing.assert_close(apply_rotary(odd, cos, sin, layout=layout),
                               pair_rotation(odd, cos, sin, layout), **close)
    columns = torch.randn(16, 7, generator=g).T  # channels 7 elements apart: the kernel declines
    torch.testing.assert_close(apply_rotary(columns, cos, sin, layout=layout),
                               pair_rotation(columns, cos, sin, layout), **close)


def test_out_errors():
    x = torch.randn(3, 8)
    cos, sin = cos_sin(torch.arange(3), inv_freq(8))
    with pytest.raises(ValueError, match="out must not overlap x unless it is x itself"):
        apply_rotary(x[:, :6], cos[:, :6], sin[:, :6], out=x[:, 2:])  # x, shifted
    with pytest.raises(ValueError, match="out must not overlap x unless it is x itself"):
        square = torch.randn(8, 8)
        apply_rotary(square, cos[:1], sin[:1], out=square.T)  # same bytes, other order
    with pytest.raises(ValueError, match=r"out must match x: shape \(3, 8\), torch.float32"):
        apply_rotary(x, cos, sin, out=torch.empty(3, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        apply_rotary(x, cos, sin, out=[0.0] * 24)
    table = sin.clone()
    with pytest.raises(ValueError, match="out must not overlap cos or sin"):
        apply_rotary(x, cos, table, out=table)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_out_may_share_a_buffer_with_x_without_overlapping_it(layout, path):
    # x and out are disjoint column blocks of one buffer (a fused QKV projection's output, say)
    buf = torch.randn(3, 5, 32)
    x, out = buf[..., :16], buf[..., 16:]
    cos, sin = cos_sin(torch.arange(5), inv_freq(16), layout=layout)
    expected = pair_rotation(x, cos, sin, layout)
    assert apply_rotary(x, cos, sin, layout=layout, out=out) is out
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5, check_dtype=False)
    # rows of x interleaved with rows of out in one buffer: disjoint, accepted
    rows = torch.randn(10, 16)
    apply_rotary(rows[0::2], cos, sin, layout=layout, out=rows[1::2])
    # real overlap is refused, however partial: a shift by one channel, one shared row
    buf = torch.randn(6, 40)
    with pytest.raises(ValueError, match="out must not overlap x"):
        apply_rotary(buf[:5, :16], cos, sin, layout=layout, out=buf[:5, 1:17])
    with pytest.raises(ValueError, match="out must not overlap x"):
        apply_rotary(buf[:5, :16], cos, sin, layout=layout, out=buf.view(-1)[160:240].view(5, 16))
    tables = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match="out must not overlap cos or sin"):
        apply_rotary(x[0], tables[0], tables[1], layout=layout, out=tables.view(-1)[40:120].view(5, 16))


views = st.tuples(st.lists(st.integers(1, 4), min_size=1, max_size=3),
                  st.lists(st.integers(0, 9), min_size=3, max_size=3), st.integers(0, 30))


@given(a=views, b=views, b_dtype=st.sampled_from([torch.float32, torch.float16, torch.float64]),
       shift=st.sampled_from([None, 0, 1, 8, 40]))
def test_overlap_is_exactly_a_shared_byte(a, b, b_dtype, shift):
    # out= is refused exactly when it shares a byte with x: compared with the sets of bytes
    # that the two strided views of one buffer cover, listed element by element; the
    # second view may come through a storage of its own that starts `shift` bytes into
    # the buffer (torch.from_numpy of a slice of the array)
    buf = torch.zeros(1024, dtype=torch.uint8)  # room for every view below
    other = buf if shift is None else torch.from_numpy(buf.numpy()[shift : shift + 960])

    def view(spec, dtype, buf=buf):
        sizes, strides, offset = spec
        es = torch.empty((), dtype=dtype).element_size()
        t = buf.view(dtype)
        strides = strides[: len(sizes)]
        return t.as_strided(sizes, strides, offset), es

    (ta, ea), (tb, eb) = view(a, torch.float32), view(b, b_dtype, other)

    def bytes_of(t, es, start=0):
        idx = torch.zeros(t.shape, dtype=torch.long)
        for d, (n, stride) in enumerate(zip(t.shape, t.stride())):
            idx = idx + (torch.arange(n) * stride).reshape([-1 if i == d else 1 for i in range(t.ndim)])
        return {start + (t.storage_offset() + int(i)) * es + k for i in idx.flatten() for k in range(es)}

    shared = bytes_of(ta, ea) & bytes_of(tb, eb, shift or 0)
    assert overlaps(ta, tb) == bool(shared)
    assert not overlaps(ta, torch.zeros(3))  # another buffer


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch.func's own import
def test_forward_mode_ad_and_torch_func_see_the_plain_formula(layout):
    # The fused kernel is opaque to forward-mode AD and torch.func, so apply_rotary takes the plain formula
    # for them. RoPE is linear in x, so the tangent of apply_rotary(x) along t is the rotation of t.
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(4)
    x, t = torch.randn(2, 3, 7, 16, generator=g, dtype=F64), torch.randn(2, 3, 7, 16, generator=g, dtype=F64)
    cos, sin = cos_sin(torch.arange(7), inv_freq(16, dtype=F64), layout=layout, dtype=F64)
    rope = lambda v: apply_rotary(v, cos, sin, layout=layout)  # noqa: E731
    close = dict(rtol=0, atol=1e-14)
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(rope(fwAD.make_dual(x, t)))
    torch.testing.assert_close(primal, pair_rotation(x, cos, sin, layout), **close)
    assert tangent is not None
    torch.testing.assert_close(tangent, pair_rotation(t, cos, sin, layout), **close)
    _, jvp_tangent = torch.func.jvp(rope, (x,), (t,))
    torch.testing.assert_close(jvp_tangent, pair_rotation(t, cos, sin, layout), **close)
    torch.testing.assert_close(torch.func.vmap(rope)(x), pair_rotation(x, cos, sin, layout), **close)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_apply_rotary_is_differentiable_in_x_and_in_the_tables(layout, rotary_dim):
    # Training backpropagates through q and k, and RoPE-Mixed (10_multi_axis) learns the frequencies
    # behind cos/sin.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g, dtype=F64, requires_grad=True)
    theta = torch.rand(4, generator=g, dtype=F64, requires_grad=True)
    rd = rotary_dim or 8
    a = torch.arange(5, dtype=F64)[:, None] * theta[: rd // 2]
    a = torch.cat((a, a), -1) if layout == "half_split" else a.repeat_interleave(2, -1)
    out = apply_rotary(x, a.cos(), a.sin(), layout=layout, rotary_dim=rotary_dim)
    expected = pair_rotation(x.detach()[..., :rd], a.detach().cos(), a.detach().sin(), layout)
    torch.testing.assert_close(out[..., :rd].detach(), expected, rtol=0, atol=1e-14)
    assert torch.equal(out[..., rd:].detach(), x.detach()[..., rd:])
    # d out_a/dθ_j = m·(−a s − b c) = −m·out_b and d out_b/dθ_j = m·out_a: the gradient of Σ w·out
    w = torch.randn(5, 8, generator=g, dtype=F64)
    (out * w).sum().backward()
    ia, ib = pair_indices(rd, layout)
    o, m = out.detach(), torch.arange(5, dtype=F64)[:, None]
    d_theta = (m * (o[:, ia] * w[:, ib] - o[:, ib] * w[:, ia])).sum(0)
    torch.testing.assert_close(theta.grad[: rd // 2], d_theta, rtol=0, atol=1e-12)
    # and d(Σ w·out)/dx is w rotated back by −θ (the transpose of a rotation)
    back = pair_rotation(w[..., :rd], a.detach().cos(), -a.detach().sin(), layout)
    torch.testing.assert_close(x.grad[..., :rd], back, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="out= cannot be used when x, cos, sin or out require grad"):
        apply_rotary(x, a.cos(), a.sin(), layout=layout, rotary_dim=rotary_dim,
                     out=torch.empty(5, 8, dtype=F64))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", ["bhsd", "bshd", "packed"])
def test_gradients_through_the_fast_paths_pass_gradcheck(layout, case, path):
    # numerical derivatives of apply_rotary in float64 against its backward (the rotation by
    # −θ through the same dispatch, and the tables' sums), first and second order; the angles
    # are the inputs, as when frequencies are learnt (RoPE-Mixed, 10_multi_axis)
    g = torch.Generator().manual_seed(9)
    shape, a_shape = {"bhsd": ((2, 2, 3, 8), (3, 4)), "bshd": ((2, 3, 2, 8), (3, 1, 4)),
                      "packed": ((5, 2, 8), (5, 1, 4))}[case]
    x = torch.randn(shape, generator=g, dtype=F64, requires_grad=True)
    a = torch.randn(a_shape, generator=g, dtype=F64, requires_grad=True)

    def rope(x, a):
        a2 = torch.cat((a, a), -1) if layout == "half_split" else a.repeat_interleave(2, -1)
        return apply_rotary(x, a2.cos(), a2.sin(), layout=layout)

    assert torch.autograd.gradcheck(rope, (x, a))
    assert torch.autograd.gradgradcheck(rope, (x, a))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_is_exact_for_tables_whose_pairs_differ(layout):
    # the backward's rotation by −θ swaps the two sin entries of each pair, so it is the
    # transpose for any tables, not only for those whose pairs share an angle (the fused
    # kernel's forward takes such tables entry by entry)
    if not cpu.status()["available"]:
        pytest.skip(f"fused kernel unavailable: {cpu.status()['reason']}")
    g = torch.Generator().manual_seed(10)
    x = torch.randn(2, 3, 5, 8, generator=g, dtype=F64, requires_grad=True)
    cos = torch.randn(5, 8, generator=g, dtype=F64, requires_grad=True)
    sin = torch.randn(5, 8, generator=g, dtype=F64, requires_grad=True)
    w = torch.randn(2, 3, 5, 8, generator=g, dtype=F64)
    got = torch.autograd.grad((apply_rotary(x, cos, sin, layout=layout) * w).sum(), (x, cos, sin))
    want = torch.autograd.grad((rotate(x, cos, sin, layout) * w).sum(), (x, cos, sin))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_compile_sees_one_graph_forward_and_backward(layout):
    # fullgraph: no graph break anywhere in apply_rotary (the C kernel steps aside while
    # torch traces); aot_eager runs the traced graph and its backward without code generation
    x = torch.randn(2, 4, 9, 16, dtype=F64, requires_grad=True)
    cos, sin = cos_sin(torch.arange(9), inv_freq(16, dtype=F64), layout=layout, dtype=F64)
    compiled = torch.compile(lambda v: apply_rotary(v, cos, sin, layout=layout), fullgraph=True,
                             backend="aot_eager")
    y = compiled(x)
    torch.testing.assert_close(y, pair_rotation(x.detach(), cos, sin, layout), rtol=0, atol=1e-12)
    w = torch.randn(2, 4, 9, 16, dtype=F64)
    (grad,) = torch.autograd.grad((y * w).sum(), x)
    torch.testing.assert_close(grad, pair_rotation(w, cos, -sin, layout), rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_symbolic_tracing_sees_the_formula(layout):
    # make_fx with symbolic sizes (as AOTAutograd and export trace): sizes are SymInts,
    # which the checks' cache cannot hash, and the kernel steps aside for the torch path
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(2, 4, 9, 16)
    cos, sin = cos_sin(torch.arange(9), inv_freq(16), layout=layout)
    graph = make_fx(lambda v, c, s: apply_rotary(v, c, s, layout=layout),
                    tracing_mode="symbolic")(x, cos, sin)
    y = torch.randn(3, 4, 5, 16)  # other sizes through the same graph
    c5, s5 = cos[:5], sin[:5]
    torch.testing.assert_close(graph(y, c5, s5), pair_rotation(y, c5, s5, layout).float(),
                               rtol=0, atol=1e-6)


def test_training_goes_through_the_fast_path_both_ways(path):
    x = torch.randn(2, 4, 9, 16, requires_grad=True)
    cos, sin = cos_sin(torch.arange(9), inv_freq(16))
    calls = []
    original = kernels._dispatch
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "_dispatch", lambda *a, **k: calls.append(a[1].shape) or original(*a, **k))
        y = apply_rotary(x, cos, sin)
        y.backward(torch.ones_like(y))
    assert len(calls) == 2  # the forward pass and the gradient's rotation by −θ
    torch.testing.assert_close(x.grad, pair_rotation(torch.ones_like(x), cos, -sin, "half_split"),
                               rtol=0, atol=1e-6, check_dtype=False)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape, per_row", [((3, 4, 700, 128), False),   # blocks of whole heads
                                            ((1, 2, 5000, 128), False),  # blocks of rows, ragged last one
                                            ((3, 4, 700, 128), True)])   # per-row tables: no block view
def test_cache_blocked_path_equals_plain_formula(layout, dtype, shape, per_row, path):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g).to(dtype)
    pos = torch.arange(shape[-2]) + torch.arange(shape[0])[:, None] * 7 if per_row else torch.arange(shape[-2])
    cos, sin = cos_sin(pos, inv_freq(shape[-1]), layout=layout, dtype=dtype)
    if per_row:
        cos, sin = cos[:, None], sin[:, None]
    got, ref = apply_rotary(x, cos, sin, layout=layout), rotate(x, cos, sin, layout)
    ulp = 2.0**-23 if dtype == torch.float32 else 2.0**-7
    exact = pair_rotation(x, cos, sin, layout)
    assert float((got.double() - exact).abs().max()) <= 2 * ulp * float(x.abs().max())
    torch.testing.assert_close(got, ref, rtol=2 * ulp, atol=2 * ulp * float(x.abs().max()))
