"""Tests for ropelab.rotary: cos/sin tables, rotate_half and apply_rotary in both layouts."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab.kernels import cpu as _native
from ropelab import apply_rotary, cos_sin, inv_freq, rotate_half, to_half_split
from ropelab.rotary import rotate_interleaved

LAYOUTS = ["half_split", "interleaved"]
F64 = torch.float64


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


def test_tables_computed_in_float32_whatever_the_output_dtype():
    # bf16 tables are the float32 ones rounded once, not cos of bf16 angles
    theta = inv_freq(64, 500000.0)
    pos = torch.arange(100_000, 100_016)
    c16, s16 = cos_sin(pos, theta, dtype=torch.bfloat16)
    c32, s32 = cos_sin(pos, theta, dtype=torch.float32)
    assert torch.equal(c16, c32.bfloat16()) and torch.equal(s16, s32.bfloat16())


def test_partial_rotary_passes_the_rest_through():
    x = torch.randn(2, 5, 12)
    cos, sin = cos_sin(torch.arange(5), inv_freq(8))
    out = apply_rotary(x, cos, sin, rotary_dim=8)
    assert torch.equal(out[..., 8:], x[..., 8:])
    torch.testing.assert_close(out[..., :8], apply_rotary(x[..., :8].contiguous(), cos, sin))


# Errors ------------------------------------------------------------------------

def test_cos_sin_shape_mismatch_named():
    x = torch.randn(2, 5, 8)
    cos, sin = cos_sin(torch.arange(6), inv_freq(8))
    with pytest.raises(ValueError, match=r"cos must have shape \(\.\.\., seq, rotary_dim\) = \(\.\.\., 5, 8\).*got \(6, 8\)"):
        apply_rotary(x, cos, sin)
    cos, sin = cos_sin(torch.arange(5), inv_freq(4))
    with pytest.raises(ValueError, match=r"got \(5, 4\)"):
        apply_rotary(x, cos, sin)


def test_cos_sin_batch_mismatch_has_hint():
    x = torch.randn(2, 4, 5, 8)
    cos, sin = cos_sin(torch.arange(15).reshape(3, 5), inv_freq(8))
    with pytest.raises(ValueError, match=r"does not broadcast.*cos\[:, None\]"):
        apply_rotary(x, cos, sin)


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


@given(dim=dims, m=positions, seed=st.integers(0, 2**31 - 1))
def test_layouts_are_the_same_rotation_relabelled(dim, m, seed):
    x = torch.randn(2, dim, generator=torch.Generator().manual_seed(seed), dtype=F64)
    torch.testing.assert_close(to_half_split(rope(x, [m, m + 1], "interleaved")),
                               rope(to_half_split(x), [m, m + 1], "half_split"), rtol=0, atol=1e-12)


@given(dim=dims, seed=st.integers(0, 2**31 - 1))
def test_rotate_half_is_a_quarter_turn(dim, seed):
    x = torch.randn(dim, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(rotate_half(rotate_half(x)), -x)
    assert torch.equal(rotate_interleaved(rotate_interleaved(x)), -x)
    assert abs(float((rotate_half(x) * x).sum())) < 1e-4 * float(x.norm() ** 2 + 1)


# Agreement with transformers' LLaMA rotary code ------------------------------------

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)


def hf_rotary(head_dim=16, heads=4, base=10000.0):
    config = LlamaConfig(hidden_size=head_dim * heads, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=4096, rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("dtype, ulp", [(torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7)])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("position_ids", [
    torch.arange(7)[None],                              # prefill
    torch.arange(7)[None] + 1000,                       # decoding with an offset
    torch.tensor([[0, 0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6]]),  # per-row, left padded
    torch.tensor([[70000, 70001, 70002, 70003, 70004, 70005, 70006]]),  # far positions
])
def test_matches_transformers_llama(dtype, ulp, base, position_ids):
    g = torch.Generator().manual_seed(0)
    batch = position_ids.shape[0]
    q = torch.randn(batch, 4, 7, 16, generator=g).to(dtype)
    k = torch.randn(batch, 4, 7, 16, generator=g).to(dtype)
    hf = hf_rotary(base=base)
    hf_cos, hf_sin = hf(q, position_ids)
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
    if dtype == torch.float32 and _native.status()["available"]:  # the CPU kernel: transformers' bits exactly
        assert torch.equal(out_q, hf_q) and torch.equal(out_k, hf_k)


# The fast path against the plain formula (09_performance) -----------------------------


@pytest.fixture(params=["kernel", "torch"])
def path(request, monkeypatch):
    """Run a test through the fused CPU kernel and again through the torch path (GPU, no compiler)."""
    if request.param == "torch":
        monkeypatch.setattr(_native, "rotate", lambda *args: False)
        yield request.param
        return
    if not _native.status()["available"]:
        pytest.skip(f"fused kernel unavailable: {_native.status()['reason']}")
    ran = []
    rotate = _native.rotate
    monkeypatch.setattr(_native, "rotate", lambda *args: ran.append(rotate(*args)) or ran[-1])
    yield request.param
    assert any(ran), "the kernel declined every call: this test did not run it"

def plain(x, cos, sin, layout):
    rot = rotate_half if layout == "half_split" else rotate_interleaved
    return x * cos.to(x.dtype) + rot(x) * sin.to(x.dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype, ulp", [(torch.float32, 2.0**-23), (torch.bfloat16, 2.0**-7), (F64, 2.0**-52),
                                        (torch.float16, 2.0**-10)])
@pytest.mark.parametrize("shape", [(2, 4, 33, 16), (1, 3, 1, 64), (5, 8)])
def test_fast_path_equals_plain_formula_within_rounding(layout, dtype, ulp, shape, path):
    g = torch.Generator().manual_seed(1)
    x = (4 * torch.randn(shape, generator=g, dtype=F64)).to(dtype)
    cos, sin = cos_sin(torch.arange(shape[-2]) + 1000, inv_freq(shape[-1]), layout=layout)
    got, ref = apply_rotary(x, cos, sin, layout=layout), plain(x, cos, sin, layout)
    exact = plain(x.double(), cos.to(dtype).double(), sin.to(dtype).double(), layout)
    scale = float(x.abs().max())
    # each within two roundings of the exact result on the same (rounded) tables
    assert float((got.double() - exact).abs().max()) <= 2 * ulp * scale
    assert float((ref.double() - exact).abs().max()) <= 2 * ulp * scale


@pytest.mark.parametrize("layout", LAYOUTS)
def test_out_and_non_contiguous_inputs(layout, path):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 7, 4, 16, generator=g).transpose(1, 2)  # (batch, heads, seq, dim), seq-major storage
    cos, sin = cos_sin(torch.arange(7), inv_freq(16), layout=layout)
    ref = plain(x, cos, sin, layout)
    torch.testing.assert_close(apply_rotary(x, cos, sin, layout=layout), ref)
    buf = torch.empty_like(x)
    res = apply_rotary(x, cos, sin, layout=layout, out=buf)
    assert res is buf
    torch.testing.assert_close(buf, ref)
    odd = torch.randn(2, 4, 7, 17, generator=g)[..., 1:]  # odd storage offset: no complex view
    torch.testing.assert_close(apply_rotary(odd, cos, sin, layout=layout), plain(odd, cos, sin, layout))


def test_out_errors():
    x = torch.randn(3, 8)
    cos, sin = cos_sin(torch.arange(3), inv_freq(8))
    with pytest.raises(ValueError, match="out must not share memory with x"):
        apply_rotary(x, cos, sin, out=x)
    with pytest.raises(ValueError, match=r"out must match x: shape \(3, 8\), torch.float32"):
        apply_rotary(x, cos, sin, out=torch.empty(3, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        apply_rotary(x, cos, sin, out=[0.0] * 24)
    table = sin.clone()
    with pytest.raises(ValueError, match="out must not share memory with cos or sin"):
        apply_rotary(x, cos, table, out=table)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch.func's own import
def test_forward_mode_ad_and_torch_func_see_the_plain_formula(layout):
    # The fused kernel is opaque to forward-mode AD and torch.func, so apply_rotary takes the plain formula
    # for them. RoPE is linear in x, so the tangent of apply_rotary(x) along t is apply_rotary(t).
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(4)
    x, t = torch.randn(2, 3, 7, 16, generator=g, dtype=F64), torch.randn(2, 3, 7, 16, generator=g, dtype=F64)
    cos, sin = cos_sin(torch.arange(7), inv_freq(16, dtype=F64), layout=layout, dtype=F64)
    rope = lambda v: apply_rotary(v, cos, sin, layout=layout)  # noqa: E731
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(rope(fwAD.make_dual(x, t)))
    torch.testing.assert_close(primal, plain(x, cos, sin, layout), rtol=0, atol=1e-15)
    assert tangent is not None
    torch.testing.assert_close(tangent, plain(t, cos, sin, layout), rtol=0, atol=1e-15)
    _, jvp_tangent = torch.func.jvp(rope, (x,), (t,))
    torch.testing.assert_close(jvp_tangent, plain(t, cos, sin, layout), rtol=0, atol=1e-15)
    torch.testing.assert_close(torch.func.vmap(rope)(x), plain(x, cos, sin, layout), rtol=0, atol=1e-15)


# --- chapter 10 additions ---


@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [None, 4])
def test_apply_rotary_is_differentiable_in_x_and_in_the_tables(layout, rotary_dim):
    # Training backpropagates through q and k, and RoPE-Mixed (10_multi_axis) learns the frequencies behind cos/sin.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    theta = torch.rand(4, generator=g, dtype=torch.float64, requires_grad=True)
    theta_rot = theta[: (rotary_dim or 8) // 2]
    a = torch.arange(5, dtype=torch.float64)[:, None] * theta_rot
    a = torch.cat((a, a), -1) if layout == "half_split" else a.repeat_interleave(2, -1)
    out = apply_rotary(x, a.cos(), a.sin(), layout=layout, rotary_dim=rotary_dim)
    with torch.no_grad():
        expected = apply_rotary(x, a.cos(), a.sin(), layout=layout, rotary_dim=rotary_dim)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)
    out.square().sum().backward()
    # rotations preserve norms, so d(Σ out²)/dx = 2x and the loss does not depend on the angles
    torch.testing.assert_close(x.grad, 2 * x.detach(), rtol=0, atol=1e-12)
    assert theta.grad is not None and float(theta.grad.abs().max()) < 1e-12
    with pytest.raises(ValueError, match="out= cannot be used when x, cos or sin require grad"):
        apply_rotary(x, a.cos(), a.sin(), layout=layout, rotary_dim=rotary_dim, out=torch.empty(5, 8, dtype=torch.float64))


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
    got, ref = apply_rotary(x, cos, sin, layout=layout), plain(x, cos, sin, layout)
    ulp = 2.0**-23 if dtype == torch.float32 else 2.0**-7
    exact = plain(x.double(), cos.to(dtype).double(), sin.to(dtype).double(), layout)
    assert float((got.double() - exact).abs().max()) <= 2 * ulp * float(x.abs().max())
    torch.testing.assert_close(got, ref, rtol=2 * ulp, atol=2 * ulp * float(x.abs().max()))
