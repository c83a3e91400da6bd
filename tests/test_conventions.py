"""Each row of book/conventions.md, checked against the model's own rotary code.

For every family whose rotary code ships with transformers (5.24, pinned by the
test extra in pyproject.toml), a SMALL config of that family builds the model's own
rotary embedding and attention layer (random weights, nothing downloaded).
The attention layer's q and k are captured just before attention (its
``eager_attention_forward`` is replaced by a function that records them), so
the checks see everything the model does to q and k: which channels it
rotates, in which pairing, and how it orders them afterwards. Each test then
asserts that the ropelab call named in the table produces the same rotated
q and k:

* the functional path, ``cos_sin`` from float32 θ (the model's own
  arithmetic): the cos/sin tables are bit-identical and the rotated q, k
  agree to two float32 roundings of the largest entry (``apply_rotary``
  rounds fewer times than ``x*cos + rotate_half(x)*sin``);
* the module path, :class:`ropelab.RotaryEmbedding`, whose tables come from
  float64 angles while the model's come from float32 angles: they differ by
  the float32 rounding of m·θ_j, at most a few times m·2^-24 (see ``tol``).

Meta's original LLaMA and Llama 3.1 code is not in transformers: its
``precompute_freqs_cis``/``apply_rotary_emb`` (and Llama 3.1's
``apply_scaling``) are written out once in ``ropelab.book.reference``, from
meta-llama/llama ``llama/model.py`` and meta-llama/llama-models
``models/llama3/reference_impl/model.py``.
Qwen2-VL's M-RoPE is multi-axis: chapter 10 and tests/test_multi_axis.py check it.
"""

from __future__ import annotations

import math

import pytest
import torch

from ropelab import (
    RotaryEmbedding,
    apply_rotary,
    apply_rotary_complex,
    cos_sin,
    inv_freq,
    permute_qk_weight,
    scaled_inv_freq,
    to_half_split,
)
from ropelab.book import reference
from ropelab.scaling import yarn_mscale

try:  # the model families' own code; Meta's rows are checked without it
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek_v3
    from transformers.models.gpt_neox import modeling_gpt_neox as gpt_neox
    from transformers.models.gptj import modeling_gptj as gptj
    from transformers.models.llama import modeling_llama as llama
    from transformers.models.mistral import modeling_mistral as mistral
    from transformers.models.phi import modeling_phi as phi
    from transformers.models.phi3 import modeling_phi3 as phi3
except ImportError:
    deepseek_v3 = gpt_neox = gptj = llama = mistral = phi = phi3 = None
needs_transformers = pytest.mark.skipif(llama is None, reason="transformers is not installed")

F32_ULP = 2.0**-23  # spacing of float32 numbers in [1, 2)
BATCH, SEQ = 2, 7
# decoding with a KV-cache offset, and a left-padded batch with per-row positions
POSITIONS = torch.tensor([[100, 101, 102, 103, 104, 105, 106], [0, 0, 0, 1, 2, 3, 4]])


# Helpers ----------------------------------------------------------------------------

class _Captured(Exception):
    """Raised by the fake attention function to stop the layer once q and k are seen."""

    def __init__(self, query, key):
        super().__init__("captured")
        self.query, self.key = query.detach().clone(), key.detach().clone()


def _capture(*args, **kwargs):
    # eager_attention_forward(module, query, key, value, attention_mask, ...)
    raise _Captured(args[1], args[2])


def attention_qk(monkeypatch, modeling, attn, hidden, position_embeddings, **kwargs):
    """(q, k) exactly as the attention layer hands them to attention: (batch, heads, seq, head_dim)."""
    monkeypatch.setattr(modeling, "eager_attention_forward", _capture)
    attn.config._attn_implementation = "eager"
    with pytest.raises(_Captured) as got, torch.no_grad():
        attn(hidden, position_embeddings=position_embeddings, attention_mask=None, **kwargs)
    return got.value.query, got.value.key


def identity_tables(cos, sin):
    """cos = 1, sin = 0: the model's rotation leaves q and k as projected (position 0 for every token)."""
    return torch.ones_like(cos), torch.zeros_like(sin)


def functional_tol(*xs):
    """Two float32 roundings of the largest entry: ropelab's fused rotation vs the model's plain formula."""
    return 2 * F32_ULP * max(float(x.abs().max()) for x in xs)


def tol(*xs, max_position, scale=1.0):
    """Bound for RotaryEmbedding (float64 angles) against a model's float32 angles.

    The model's angle fl(m·fl(θ_j)) differs from the exact m·θ_j by at most
    about 3·m·θ_j·2^-24 (θ_j ≤ 1 rounded by pow and division, the product
    rounded once; the larger relative error ln(b)·(2j/d)·2^-24 of the slow
    pairs is outweighed by their smaller θ_j). cos and sin each add a
    rounding, and the rotation of a pair of norm ≤ √2·max|x| moves each
    output by at most the pair's norm times the angle error, times the
    attention scaling that multiplies the tables.
    """
    pair = math.sqrt(2) * max(float(x.abs().max()) for x in xs)
    return scale * pair * (4 * max_position + 8) * 2.0**-24


def random_hidden(hidden_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, SEQ, hidden_size, generator=g)


def close(actual, expected, atol):
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol)


def half_split_family(monkeypatch, modeling, rotary_cls, attn_cls, config, rope, rotary_dim, base, scaling=None,
                      positions=POSITIONS):
    """Shared check for the LLaMA-style families (half-split pairs, maybe partial, maybe scaled).

    ``rope`` is the ropelab RotaryEmbedding the table names; ``rotary_dim``,
    ``base`` and ``scaling`` the functional call's arguments.
    """
    torch.manual_seed(0)
    rotary = rotary_cls(config)
    attn = attn_cls(config, layer_idx=0)
    hidden = random_hidden(config.hidden_size)
    cos, sin = rotary(hidden, positions)
    q0, k0 = attention_qk(monkeypatch, modeling, attn, hidden, identity_tables(cos, sin))
    q, k = attention_qk(monkeypatch, modeling, attn, hidden, (cos, sin))
    head_dim = q0.shape[-1]

    # the functional call: float32 θ, transformers' own arithmetic -> identical tables
    theta, attention_scaling = scaled_inv_freq(head_dim, base, scaling, seq_len=int(positions.max()) + 1)
    assert theta.shape == (rotary_dim // 2,)
    r_cos, r_sin = cos_sin(positions, theta, attention_scaling=attention_scaling)
    if scaling is None or scaling.get("rope_type", "default") == "default":
        assert torch.equal(r_cos, cos) and torch.equal(r_sin, sin)
    else:  # a scaled θ is rounded differently (e.g. θ/s vs 1/(s·b^(2j/d))): a few float32 ulps of θ
        close(r_cos, cos, tol(cos, max_position=int(positions.max())))
        close(r_sin, sin, tol(sin, max_position=int(positions.max())))
    out_q = apply_rotary(q0, r_cos[:, None], r_sin[:, None], rotary_dim=rotary_dim)
    out_k = apply_rotary(k0, r_cos[:, None], r_sin[:, None], rotary_dim=rotary_dim)
    if scaling is None or scaling.get("rope_type", "default") == "default":
        close(out_q, q, functional_tol(q0, k0))
        close(out_k, k, functional_tol(q0, k0))
    else:
        close(out_q, q, tol(q0, k0, max_position=int(positions.max()), scale=attention_scaling))
        close(out_k, k, tol(q0, k0, max_position=int(positions.max()), scale=attention_scaling))

    # the module: float64 angles, so within the float32 angle rounding of the model
    assert rope.dim == rotary_dim
    m_q, m_k = rope(q0, k0, positions)
    atol = tol(q0, k0, max_position=int(positions.max()), scale=rope.attention_scaling)
    close(m_q, q, atol)
    close(m_k, k, atol)
    # the channels past rotary_dim are not touched, by the model or by ropelab
    assert torch.equal(q[..., rotary_dim:], q0[..., rotary_dim:]) and torch.equal(m_q[..., rotary_dim:], q0[..., rotary_dim:])
    return rotary, attn


# Meta's original code (not in transformers), written out once in ropelab.book.reference ---

meta_precompute_freqs_cis = reference.precompute_freqs_cis  # LLaMA 1/2, llama/model.py
meta3_precompute_freqs_cis = reference.precompute_freqs_cis  # Llama 3.1, with use_scaled
meta_apply_scaling = reference.apply_scaling
meta_apply_rotary_emb = reference.apply_rotary_emb


def meta_rotate(precompute, head_dim, base, start_pos, **kw):
    """Meta's forward for one decoding step of SEQ tokens from start_pos; returns inputs and outputs in ropelab's (b, h, s, d)."""
    g = torch.Generator().manual_seed(1)
    xq = torch.randn(BATCH, SEQ, 4, head_dim, generator=g)  # Meta's (batch, seq, heads, head_dim)
    xk = torch.randn(BATCH, SEQ, 4, head_dim, generator=g)
    freqs_cis = precompute(head_dim, 2 * 256 + 2 * start_pos, base, **kw)[start_pos : start_pos + SEQ]
    oq, ok = meta_apply_rotary_emb(xq, xk, freqs_cis)
    return xq.transpose(1, 2), xk.transpose(1, 2), oq.transpose(1, 2), ok.transpose(1, 2)


def test_meta_llama_original():
    """Meta LLaMA 1/2: interleaved pairs, base 10,000, the whole head, no scaling."""
    start = 100
    q0, k0, q, k = meta_rotate(meta_precompute_freqs_cis, 32, 10000.0, start)
    pos = torch.arange(SEQ) + start
    cos, sin = cos_sin(pos, inv_freq(32), layout="interleaved")
    close(apply_rotary(q0, cos, sin, layout="interleaved"), q, functional_tol(q0, k0))
    close(apply_rotary(k0, cos, sin, layout="interleaved"), k, functional_tol(q0, k0))
    # the Euler form is Meta's own formulation
    close(apply_rotary_complex(q0, pos, inv_freq(32)), q, functional_tol(q0, k0))
    rope = RotaryEmbedding(32, 10000.0, layout="interleaved")
    m_q, m_k = rope(q0, k0, offset=start)
    close(m_q, q, tol(q0, k0, max_position=start + SEQ))
    close(m_k, k, tol(q0, k0, max_position=start + SEQ))


@needs_transformers
def test_meta_llama_checkpoint_to_transformers():
    """LLaMA in transformers: the same model after permute_qk_weight, rotated half-split, gives the same scores."""
    torch.manual_seed(0)
    heads, head_dim = 4, 32
    config = llama.LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=heads,
                               intermediate_size=64, num_hidden_layers=1,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    w_q = torch.randn(heads * head_dim, heads * head_dim) / head_dim
    w_k = torch.randn(heads * head_dim, heads * head_dim) / head_dim
    x = random_hidden(heads * head_dim)
    pos = torch.arange(SEQ) + 100
    # Meta: interleaved pairs on the checkpoint's own q/k projections
    xq = (x @ w_q.T).view(BATCH, SEQ, heads, head_dim)
    xk = (x @ w_k.T).view(BATCH, SEQ, heads, head_dim)
    mq, mk = meta_apply_rotary_emb(xq, xk, meta_precompute_freqs_cis(head_dim, 512)[100 : 100 + SEQ])
    # transformers: the converted checkpoint (rows permuted head by head), its own attention layer
    attn = llama.LlamaAttention(config, layer_idx=0)
    with torch.no_grad():
        attn.q_proj.weight.copy_(permute_qk_weight(w_q, heads))
        attn.k_proj.weight.copy_(permute_qk_weight(w_k, heads))
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, pos[None].expand(BATCH, -1))
    mp = pytest.MonkeyPatch()
    try:
        hq, hk = attention_qk(mp, llama, attn, x, (cos, sin))
    finally:
        mp.undo()
    # channel for channel: transformers' head = Meta's head reordered to half-split
    atol = 4 * functional_tol(mq, mk)
    close(hq, to_half_split(mq.transpose(1, 2)), atol)
    close(hk, to_half_split(mk.transpose(1, 2)), atol)
    close(hq @ hk.transpose(-1, -2), mq.transpose(1, 2) @ mk.transpose(1, 2).transpose(-1, -2), 1e-4)


def test_meta_llama31_original():
    """Meta's Llama 3.1 reference code: interleaved, base 500,000, llama3 scaling (factor 8, bands 1 and 4, 8192)."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    head_dim = 32  # wavelengths up to 2π·500000^(30/32): all three llama3 bands are present
    theta, a = scaled_inv_freq(head_dim, 500000.0, scaling)
    meta_theta = meta_apply_scaling(1.0 / (500000.0 ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim)))
    torch.testing.assert_close(theta, meta_theta, rtol=2**-22, atol=0)
    assert a == 1.0
    wavelen = 2 * math.pi / inv_freq(head_dim, 500000.0, dtype=torch.float64)  # before scaling
    # kept (λ < 8192/4), blended (8192/4 <= λ <= 8192), divided by 8 (λ > 8192): every band is exercised
    assert (wavelen < 2048).any() and ((wavelen >= 2048) & (wavelen <= 8192)).any() and (wavelen > 8192).any()
    start = 5000
    q0, k0, q, k = meta_rotate(meta3_precompute_freqs_cis, head_dim, 500000.0, start, use_scaled=True)
    pos = torch.arange(SEQ) + start
    cos, sin = cos_sin(pos, theta, layout="interleaved")
    close(apply_rotary(q0, cos, sin, layout="interleaved"), q, tol(q0, k0, max_position=start + SEQ))
    close(apply_rotary(k0, cos, sin, layout="interleaved"), k, tol(q0, k0, max_position=start + SEQ))
    rope = RotaryEmbedding(head_dim, 500000.0, scaling=scaling, layout="interleaved")
    m_q, m_k = rope(q0, k0, offset=start)
    close(m_q, q, tol(q0, k0, max_position=start + SEQ))
    close(m_k, k, tol(q0, k0, max_position=start + SEQ))


# transformers' families --------------------------------------------------------------

@needs_transformers
def test_llama_transformers(monkeypatch):
    """LLaMA in transformers: half-split, rope_theta, the whole head."""
    config = llama.LlamaConfig(hidden_size=4 * 32, num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
                               num_hidden_layers=1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    half_split_family(monkeypatch, llama, llama.LlamaRotaryEmbedding, llama.LlamaAttention, config,
                      RotaryEmbedding(32, 10000.0), rotary_dim=32, base=10000.0)


@needs_transformers
def test_llama31_transformers(monkeypatch):
    """Llama 3.1 in transformers: half-split, base 500,000, rope_type llama3."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    config = llama.LlamaConfig(hidden_size=4 * 32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                               num_hidden_layers=1, max_position_embeddings=131072,
                               rope_parameters={**scaling, "rope_theta": 500000.0})
    half_split_family(monkeypatch, llama, llama.LlamaRotaryEmbedding, llama.LlamaAttention, config,
                      RotaryEmbedding(32, 500000.0, scaling=scaling), rotary_dim=32, base=500000.0, scaling=scaling)


@needs_transformers
def test_mistral(monkeypatch):
    """Mistral 7B v0.2+: LLaMA's convention (half-split, whole head) with base 1,000,000."""
    config = mistral.MistralConfig(hidden_size=4 * 32, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                   intermediate_size=64, num_hidden_layers=1,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    half_split_family(monkeypatch, mistral, mistral.MistralRotaryEmbedding, mistral.MistralAttention, config,
                      RotaryEmbedding(32, 1e6), rotary_dim=32, base=1e6)


@needs_transformers
def test_gpt_neox(monkeypatch):
    """GPT-NeoX (and Pythia): half-split on the first rotary_pct = 25% of each head."""
    config = gpt_neox.GPTNeoXConfig(hidden_size=4 * 32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=1)
    assert config.rope_parameters["partial_rotary_factor"] == 0.25  # the config default, as GPT-NeoX-20B
    rope = RotaryEmbedding(32, 10000.0, scaling={"partial_rotary_factor": 0.25})
    half_split_family(monkeypatch, gpt_neox, gpt_neox.GPTNeoXRotaryEmbedding, gpt_neox.GPTNeoXAttention, config,
                      rope, rotary_dim=8, base=10000.0, scaling={"partial_rotary_factor": 0.25})


@needs_transformers
def test_phi2(monkeypatch):
    """Phi-2: half-split on the first partial_rotary_factor = 40% of each head (32 of 80)."""
    config = phi.PhiConfig(hidden_size=4 * 40, num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
                           num_hidden_layers=1, partial_rotary_factor=0.4)
    rope = RotaryEmbedding(40, 10000.0, scaling={"partial_rotary_factor": 0.4})
    half_split_family(monkeypatch, phi, phi.PhiRotaryEmbedding, phi.PhiAttention, config,
                      rope, rotary_dim=16, base=10000.0, scaling={"partial_rotary_factor": 0.4})


def longrope_params(half):
    short = [1.0 + 0.05 * j for j in range(half)]
    long = [1.0 + 0.5 * j for j in range(half)]
    # Phi-3-mini-128k: original 4096, max 131072, so factor 32; here 64 and 256: factor 4
    return {"rope_type": "longrope", "short_factor": short, "long_factor": long, "factor": 4.0,
            "original_max_position_embeddings": 64}


@needs_transformers
@pytest.mark.parametrize("positions, which", [(POSITIONS, "long"), (POSITIONS % 50, "short")])
def test_phi3_longrope(monkeypatch, positions, which):
    """Phi-3 (128k): half-split, whole head, longrope: short factors up to the original context, long ones past it."""
    scaling = longrope_params(8)
    config = phi3.Phi3Config(hidden_size=4 * 16, num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
                             num_hidden_layers=1, max_position_embeddings=256,
                             # Phi-3 configs keep the pre-training length at the top level; it wins over the dict's
                             original_max_position_embeddings=64,
                             rope_parameters={**scaling, "rope_theta": 10000.0})
    assert config.rope_parameters["original_max_position_embeddings"] == 64
    rotary, _ = half_split_family(monkeypatch, phi3, phi3.Phi3RotaryEmbedding, phi3.Phi3Attention, config,
                                  RotaryEmbedding(16, 10000.0, scaling=scaling), rotary_dim=16, base=10000.0,
                                  scaling=scaling, positions=positions)
    theta, a = scaled_inv_freq(16, 10000.0, scaling, seq_len=int(positions.max()) + 1)
    torch.testing.assert_close(rotary.inv_freq, theta, rtol=2**-22, atol=0)
    assert a == pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(64)))
    expected = scaling[f"{which}_factor"]
    torch.testing.assert_close(theta, inv_freq(16) / torch.tensor(expected), rtol=2**-22, atol=0)


@needs_transformers
def test_gptj(monkeypatch):
    """GPT-J: interleaved pairs (rotate_every_two) on the first rotary_dim channels (64 of 256 in GPT-J-6B)."""
    torch.manual_seed(0)
    config = gptj.GPTJConfig(n_embd=4 * 64, n_head=4, rotary_dim=16, n_layer=1)
    rotary = gptj.GPTJRotaryEmbedding(config)
    attn = gptj.GPTJAttention(config, layer_idx=0)
    hidden = random_hidden(config.n_embd)
    sin, cos = rotary(hidden, POSITIONS)  # GPT-J's order: (sin, cos), each (batch, seq, rotary_dim / 2)
    q0, k0 = attention_qk(monkeypatch, gptj, attn, hidden, (torch.zeros_like(sin), torch.ones_like(cos)))
    q, k = attention_qk(monkeypatch, gptj, attn, hidden, (sin, cos))

    r_cos, r_sin = cos_sin(POSITIONS, inv_freq(16), layout="interleaved")
    assert torch.equal(r_cos[..., 0::2], cos) and torch.equal(r_sin[..., 0::2], sin)  # one angle per pair
    atol = functional_tol(q0, k0)
    close(apply_rotary(q0, r_cos[:, None], r_sin[:, None], layout="interleaved", rotary_dim=16), q, atol)
    close(apply_rotary(k0, r_cos[:, None], r_sin[:, None], layout="interleaved", rotary_dim=16), k, atol)

    rope = RotaryEmbedding(16, 10000.0, layout="interleaved")  # on 64-dim heads: rotates 16, passes 48
    m_q, m_k = rope(q0, k0, POSITIONS)
    atol = tol(q0, k0, max_position=int(POSITIONS.max()))
    close(m_q, q, atol)
    close(m_k, k, atol)
    assert torch.equal(q[..., 16:], q0[..., 16:]) and torch.equal(m_q[..., 16:], q0[..., 16:])
    # and not the half-split pairing: that would be a different rotation
    hs_cos, hs_sin = cos_sin(POSITIONS, inv_freq(16))
    wrong = apply_rotary(q0, hs_cos[:, None], hs_sin[:, None], rotary_dim=16)
    assert float((wrong - q).abs().max()) > 0.1


DEEPSEEK_V3_YARN = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                    "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}


@needs_transformers
def test_deepseek_v3(monkeypatch):
    """DeepSeek-V3 (MLA): only the qk_rope_head_dim part (the LAST 64 of 192 channels) is rotated, yarn factor 40.

    The checkpoint keeps the reference code's interleaved pairs; transformers'
    ``apply_rotary_pos_emb_interleave`` rotates the pairs (2i, 2i+1) and
    returns them in half-split order, which permutes q and k alike and so
    leaves q·k unchanged. The yarn temperature is 1 on the tables
    (mscale = mscale_all_dim) and mscale(40)² on the softmax scale instead.
    """
    torch.manual_seed(0)
    nope, rope_dim, heads = 32, 16, 2
    config = deepseek_v3.DeepseekV3Config(
        hidden_size=64, num_attention_heads=heads, num_key_value_heads=heads, q_lora_rank=None, kv_lora_rank=16,
        qk_rope_head_dim=rope_dim, qk_nope_head_dim=nope, v_head_dim=32, num_hidden_layers=1,
        max_position_embeddings=4096 * 40, rope_parameters={**DEEPSEEK_V3_YARN, "rope_theta": 10000.0})
    assert config.rope_interleave and config.head_dim == rope_dim
    rotary = deepseek_v3.DeepseekV3RotaryEmbedding(config)
    attn = deepseek_v3.DeepseekV3Attention(config, layer_idx=0)
    hidden = random_hidden(config.hidden_size)
    cos, sin = rotary(hidden, POSITIONS)
    q, k = attention_qk(monkeypatch, deepseek_v3, attn, hidden, (cos, sin))
    with torch.no_grad():  # the un-rotated q and the shared rope key, straight from the projections
        q_raw = attn.q_proj(hidden).view(BATCH, SEQ, heads, nope + rope_dim).transpose(1, 2)
        k_rope_raw = attn.kv_a_proj_with_mqa(hidden)[..., config.kv_lora_rank:].view(BATCH, 1, SEQ, rope_dim)
    assert torch.equal(q[..., :nope], q_raw[..., :nope])  # the "nope" channels are not rotated

    theta, a = scaled_inv_freq(rope_dim, 10000.0, DEEPSEEK_V3_YARN)
    torch.testing.assert_close(theta, rotary.inv_freq, rtol=2**-22, atol=0)
    assert a == rotary.attention_scaling == 1.0
    assert attn.scaling == pytest.approx((nope + rope_dim) ** -0.5 * yarn_mscale(40.0, 1.0) ** 2, rel=1e-12)

    max_pos = int(POSITIONS.max())
    r_cos, r_sin = cos_sin(POSITIONS, theta, layout="interleaved")
    exp_q = to_half_split(apply_rotary(q_raw[..., nope:], r_cos[:, None], r_sin[:, None], layout="interleaved"))
    exp_k = to_half_split(apply_rotary(k_rope_raw, r_cos[:, None], r_sin[:, None], layout="interleaved"))
    atol = tol(q_raw, k_rope_raw, max_position=max_pos)
    close(q[..., nope:], exp_q, atol)
    close(k[..., nope:], exp_k.expand(-1, heads, -1, -1), atol)

    rope = RotaryEmbedding(rope_dim, 10000.0, scaling=DEEPSEEK_V3_YARN, layout="interleaved")
    m_q, m_k = rope(q_raw[..., nope:], k_rope_raw, POSITIONS)
    close(q[..., nope:], to_half_split(m_q), atol)
    close(k[..., nope:], to_half_split(m_k).expand(-1, heads, -1, -1), atol)
    # what attention sees is unchanged by the reordering: the reference code's interleaved scores
    scores = q[..., nope:] @ k[..., nope:].transpose(-1, -2)
    close(scores, m_q @ m_k.transpose(-1, -2), 1e-4 * float(scores.abs().max()))


# Families of 2024-2026 (book/conventions.md, second table) ------------------------------

from transformers.models.gemma3 import modeling_gemma3 as gemma3  # noqa: E402
from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss  # noqa: E402
from transformers.models.llama4 import modeling_llama4 as llama4  # noqa: E402
from transformers.models.qwen3 import modeling_qwen3 as qwen3  # noqa: E402
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next  # noqa: E402

LLAMA4_SCOUT = {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                "original_max_position_embeddings": 8192}


def test_llama4(monkeypatch):
    """Llama 4 Scout: interleaved pairs (complex form), base 500,000, llama3 x16, RoPE on 3 of 4 layers."""
    torch.manual_seed(0)
    config = llama4.Llama4TextConfig(
        hidden_size=4 * 32, num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_hidden_layers=4,
        intermediate_size=32, intermediate_size_mlp=32, num_local_experts=2, use_qk_norm=True,
        max_position_embeddings=10485760, rope_parameters={**LLAMA4_SCOUT, "rope_theta": 500000.0})
    # Scout RMS-normalises q and k after rotating them (no weight): a rotation keeps the norm, so
    # normalising the unrotated q0 and rotating it gives the same q
    assert config.no_rope_layers == [1, 1, 1, 0]
    rotary = llama4.Llama4TextRotaryEmbedding(config)
    attn = llama4.Llama4TextAttention(config, layer_idx=0)
    hidden = random_hidden(config.hidden_size)
    freqs = rotary(hidden, POSITIONS)  # complex e^{i m θ_j}, (batch, seq, head_dim / 2)
    q0, k0 = attention_qk(monkeypatch, llama4, attn, hidden, torch.ones_like(freqs))
    q, k = attention_qk(monkeypatch, llama4, attn, hidden, freqs)
    theta, a = scaled_inv_freq(32, 500000.0, LLAMA4_SCOUT)
    torch.testing.assert_close(theta, rotary.inv_freq, rtol=2**-22, atol=0)
    assert a == rotary.attention_scaling == 1.0 and attn.scaling == 32**-0.5
    rope = RotaryEmbedding(32, 500000.0, scaling=LLAMA4_SCOUT, layout="interleaved")
    m_q, m_k = rope(q0, k0, POSITIONS)
    atol = tol(q0, k0, max_position=int(POSITIONS.max()))
    close(m_q, q, atol)
    close(m_k, k, atol)
    # the no-RoPE layer hands q and k to attention unrotated, whatever the tables
    nope = llama4.Llama4TextAttention(config, layer_idx=3)
    nope.attn_temperature_tuning = False  # the temperature is chapter 13's test; here: no rotation
    qn0, kn0 = attention_qk(monkeypatch, llama4, nope, hidden, torch.ones_like(freqs))
    qn, kn = attention_qk(monkeypatch, llama4, nope, hidden, freqs)
    assert torch.equal(qn, qn0) and torch.equal(kn, kn0)


def test_gemma3(monkeypatch):
    """Gemma 3 (4B and up): half-split, 10,000 on sliding layers, 1,000,000 with linear x8 on global ones."""
    torch.manual_seed(0)
    params = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}
    config = gemma3.Gemma3TextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                     num_hidden_layers=6, intermediate_size=32, vocab_size=32,
                                     query_pre_attn_scalar=32, rope_parameters=params)
    rotary = gemma3.Gemma3RotaryEmbedding(config)
    hidden = random_hidden(config.hidden_size)
    for layer, layer_type in ((0, "sliding_attention"), (5, "full_attention")):
        assert config.layer_types[layer] == layer_type
        attn = gemma3.Gemma3Attention(config, layer_idx=layer)
        cos, sin = rotary(hidden, POSITIONS, layer_type)
        q0, k0 = attention_qk(monkeypatch, gemma3, attn, hidden, identity_tables(cos, sin))
        q, k = attention_qk(monkeypatch, gemma3, attn, hidden, (cos, sin))
        p = params[layer_type]
        scaling = None if p["rope_type"] == "default" else {"rope_type": "linear", "factor": 8.0}
        rope = RotaryEmbedding(32, p["rope_theta"], scaling=scaling)
        m_q, m_k = rope(q0, k0, POSITIONS)
        atol = tol(q0, k0, max_position=int(POSITIONS.max()))
        close(m_q, q, atol)
        close(m_k, k, atol)
        assert attn.scaling == config.query_pre_attn_scalar**-0.5


def test_qwen3(monkeypatch):
    """Qwen3: LLaMA's convention, base 1,000,000; q and k are RMS-normalised per head before rotation."""
    config = qwen3.Qwen3Config(hidden_size=4 * 32, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                               intermediate_size=64, num_hidden_layers=1,
                               rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    _, attn = half_split_family(monkeypatch, qwen3, qwen3.Qwen3RotaryEmbedding, qwen3.Qwen3Attention, config,
                                RotaryEmbedding(32, 1e6), rotary_dim=32, base=1e6)
    assert attn.scaling == 32**-0.5


def test_qwen3_next(monkeypatch):
    """Qwen3-Next: half-split on the first 25 % of each head (64 of 256), base 10,000,000."""
    config = qwen3_next.Qwen3NextConfig(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32, num_hidden_layers=4,
        intermediate_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=2,
        num_experts_per_tok=1, linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8,
        linear_value_head_dim=8, vocab_size=32,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25})
    scaling = {"partial_rotary_factor": 0.25}
    half_split_family(monkeypatch, qwen3_next, qwen3_next.Qwen3NextRotaryEmbedding, qwen3_next.Qwen3NextAttention,
                      config, RotaryEmbedding(32, 1e7, scaling=scaling), rotary_dim=8, base=1e7, scaling=scaling)


GPT_OSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096}


def test_gpt_oss(monkeypatch):
    """gpt-oss: half-split, base 150,000, YaRN x32 on 4,096 without truncation, tables times 0.1 ln 32 + 1."""
    torch.manual_seed(0)
    config = gpt_oss.GptOssConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                  num_hidden_layers=2, intermediate_size=32, num_local_experts=2,
                                  num_experts_per_tok=1, vocab_size=32)
    assert config.rope_parameters == {**GPT_OSS_YARN, "rope_theta": 150000.0}  # the config's defaults
    rotary = gpt_oss.GptOssRotaryEmbedding(config)
    attn = gpt_oss.GptOssAttention(config, layer_idx=0)
    with torch.no_grad():
        attn.sinks.normal_()
    hidden = random_hidden(config.hidden_size)
    cos, sin = rotary(hidden, POSITIONS)  # one angle per pair: (batch, seq, head_dim / 2)
    q0, k0 = attention_qk(monkeypatch, gpt_oss, attn, hidden, identity_tables(cos, sin))
    q, k = attention_qk(monkeypatch, gpt_oss, attn, hidden, (cos, sin))
    theta, a = scaled_inv_freq(16, 150000.0, GPT_OSS_YARN)
    torch.testing.assert_close(theta, rotary.inv_freq, rtol=2**-22, atol=0)
    assert a == pytest.approx(rotary.attention_scaling) and a == pytest.approx(0.1 * math.log(32) + 1)
    assert attn.scaling == 16**-0.5
    rope = RotaryEmbedding(16, 150000.0, scaling=GPT_OSS_YARN)
    m_q, m_k = rope(q0, k0, POSITIONS)
    atol = tol(q0, k0, max_position=int(POSITIONS.max()), scale=a)
    close(m_q, q, atol)
    close(m_k, k, atol)
