"""ropelab.variants against the models' own code in transformers 5.24 and by hand.

Tiny configs, seeded random weights, nothing downloaded. Each model test
captures q and k where the attention layer hands them to attention (its
``eager_attention_forward`` replaced by a recorder), once with the identity
rotation (cos = 1, sin = 0) to read them unrotated, and compares the
rotated ones with ropelab; the MLA test compares whole attention outputs.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ropelab import apply_rotary, cos_sin, inv_freq
from ropelab.attention import is_toeplitz
from test_conventions import attention_qk
from ropelab.variants import (
    RemapPass,
    dual_chunk_passes,
    passes_rho,
    rerope_passes,
    self_extend_passes,
    alibi_bias,
    alibi_slopes,
    dual_chunk_positions,
    hope_inv_freq,
    interleaved_mrope_axes,
    layer_rope_plan,
    llama4_attn_scales,
    mean_cos_score,
    mla_scores,
    p_rope_inv_freq,
    partial_inv_freq,
    remapped_scores,
    rerope_positions,
    self_extend_positions,
    time_aligned_ids,
    xpos_decay,
)

transformers = pytest.importorskip("transformers")

from transformers.models.bloom.modeling_bloom import build_alibi_tensor  # noqa: E402
from transformers.models.cohere2 import modeling_cohere2 as cohere2  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek_v3  # noqa: E402
from transformers.models.gemma3 import modeling_gemma3 as gemma3  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402
from transformers.models.llama4 import modeling_llama4 as llama4  # noqa: E402
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next  # noqa: E402
from transformers.models.smollm3 import configuration_smollm3 as smollm3  # noqa: E402

BATCH, SEQ = 2, 7
POSITIONS = torch.tensor([[100, 101, 102, 103, 104, 105, 106], [0, 0, 0, 1, 2, 3, 4]])
ATOL = 1e-5


# (q, k) as a transformers attention layer hands them to attention
qk = attention_qk


def hidden_states(width, seed=0):
    return torch.randn(BATCH, SEQ, width, generator=torch.Generator().manual_seed(seed))


def close(a, b, atol=ATOL):
    torch.testing.assert_close(a, b, rtol=0, atol=atol)


# --- partial rotary, p-RoPE, HoPE ------------------------------------------------------

def test_partial_inv_freq_matches_qwen3_next(monkeypatch):
    """Qwen3-Next: the first 25 % of each head rotates, with a spectrum for that width."""
    torch.manual_seed(0)
    config = qwen3_next.Qwen3NextConfig(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32, num_hidden_layers=4,
        intermediate_size=32, moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=2,
        num_experts_per_tok=1, linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8,
        linear_value_head_dim=8, vocab_size=32)
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    assert [p["rope"] for p in layer_rope_plan(config)] == [False, False, False, True]
    rotary = qwen3_next.Qwen3NextRotaryEmbedding(config)
    theta = partial_inv_freq(32, 0.25, config.rope_parameters["rope_theta"])
    assert torch.equal(rotary.inv_freq, theta[:4]) and torch.equal(theta[4:], torch.zeros(12))
    attn = qwen3_next.Qwen3NextAttention(config, layer_idx=3)
    h = hidden_states(64)
    cos, sin = rotary(h, POSITIONS)
    q0, k0 = qk(monkeypatch, qwen3_next, attn, h, (torch.ones_like(cos), torch.zeros_like(sin)))
    q, k = qk(monkeypatch, qwen3_next, attn, h, (cos, sin))
    r_cos, r_sin = cos_sin(POSITIONS, theta[:4])
    close(q, apply_rotary(q0, r_cos[:, None], r_sin[:, None], rotary_dim=8))
    close(k, apply_rotary(k0, r_cos[:, None], r_sin[:, None], rotary_dim=8))
    assert torch.equal(q[..., 8:], q0[..., 8:])  # 24 of 32 channels pass through


def test_p_rope_matches_transformers_proportional():
    """p-RoPE is transformers' 'proportional' type: full-head exponents, slowest pairs zeroed."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    config = llama.LlamaConfig(hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=1,
                               rope_parameters={"rope_type": "proportional", "rope_theta": 1e6,
                                                "partial_rotary_factor": 0.25})
    theirs, a = ROPE_INIT_FUNCTIONS["proportional"](config)
    assert a == 1.0
    assert torch.equal(p_rope_inv_freq(32, 0.25, 1e6), theirs)
    # not the partial-rotary spectrum: the kept pairs are the full head's fastest
    assert not torch.equal(partial_inv_freq(32, 0.25, 1e6), theirs)


def test_hope_keeps_the_pairs_that_turn_within_the_context():
    theta = hope_inv_freq(128, 10000.0, 4096)
    kept = theta > 0
    assert torch.all(2 * math.pi / theta[kept] <= 4096)
    assert torch.all(2 * math.pi / inv_freq(128)[~kept] > 4096)
    assert int(kept.sum()) == 46  # wavelengths 2π·10^(j/16) ≤ 4096 for j ≤ 45


def test_pass_through_pairs_give_a_floor():
    """A pair with θ = 0 adds 1 to the q = k score at every distance: floor 1 - f."""
    d = torch.arange(0, 20000, 7)
    s = mean_cos_score(d, partial_inv_freq(128, 0.25))
    full = mean_cos_score(d, inv_freq(32))
    close(s, 0.75 + 0.25 * full, 1e-12)


# --- remapped positions ----------------------------------------------------------------

@given(st.integers(0, 2**31 - 1))
def test_remapped_scores_with_m_minus_n_is_rope(seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 9, 16, generator=g, dtype=torch.float64), torch.randn(2, 9, 16, generator=g,
                                                                                  dtype=torch.float64)
    pos = torch.arange(9) * 13 + 5
    theta = inv_freq(16, dtype=torch.float64)
    c, s = cos_sin(pos, theta, dtype=torch.float64)
    direct = apply_rotary(q, c, s) @ apply_rotary(k, c, s).transpose(-1, -2)
    rho = (pos[:, None] - pos[None]).double()
    close(remapped_scores(q, k, rho, theta), direct, 1e-10)


def test_rerope_worked_example():
    r = rerope_positions(6, 3)
    assert r[5].tolist() == [3, 3, 3, 2, 1, 0]
    leaky = rerope_positions(6, 3, leak=2.0)
    assert leaky[5].tolist() == [4.0, 3.5, 3.0, 2.0, 1.0, 0.0]
    assert is_toeplitz(torch.tril(r)) and is_toeplitz(torch.tril(leaky))


def test_self_extend_matches_longlm_positions():
    """SelfExtend (LongLM): neighbour positions in the window, grouped q/k positions beyond it."""
    G, W, S = 4, 8, 40
    rho = self_extend_positions(S, G, W)
    pos = torch.arange(S)
    group_q = pos // G + W - W / G  # LongLM: query_position // g1 + g2 - g2 / g1
    group_k = pos // G
    expected = torch.where(pos[:, None] - pos[None] < W, (pos[:, None] - pos[None]).double(),
                           (group_q[:, None] - group_k[None]).double())
    assert torch.equal(rho, expected)
    assert not is_toeplitz(torch.tril(rho))  # floors make it depend on m, not only m - n
    assert torch.equal(torch.diagonal(rho, -3), torch.full((S - 3,), 3.0))  # exact in the window


def test_dual_chunk_worked_example():
    s, c = 4, 6  # chunk 4, pre-training length 6, local window c - s = 2
    rho = dual_chunk_positions(12, s, c)
    # query 9 (chunk 2, i = 1): own chunk keys 8, 9; chunk 1 keys 4..7; chunk 0 keys 0..3
    assert rho[9, 8:10].tolist() == [1, 0]
    assert rho[9, 4:8].tolist() == [5, 4, 3, 2]  # min(4 + 1, 5) - (0..3): the true distance
    assert rho[9, 0:4].tolist() == [5, 4, 3, 2]  # c - 1 - (0..3): capped, not 9..6
    assert rho[11, 4:8].tolist() == [5, 4, 3, 2]  # i = 3: min(7, 5) = 5 caps the successive chunk
    assert rho.max() <= c - 1
    m, n = torch.tril_indices(12, 12)
    exact = rho[m, n] == (m - n).double()
    assert torch.all(exact[(m - n) < c - s])  # every distance inside the local window is exact


@pytest.mark.parametrize(
    "name, passes, rho",
    [
        ("rerope", lambda S: rerope_passes(S, 7), lambda S: rerope_positions(S, 7)),
        ("leaky", lambda S: rerope_passes(S, 7, leak=3.0),
         lambda S: rerope_positions(S, 7, leak=3.0)),
        ("self_extend", lambda S: self_extend_passes(S, 4, 8),
         lambda S: self_extend_positions(S, 4, 8)),
        ("dual_chunk", lambda S: dual_chunk_passes(S, 5, 9),
         lambda S: dual_chunk_positions(S, 5, 9)),
    ],
)
@pytest.mark.parametrize("seq", [1, 9, 40])
def test_passes_compute_the_same_rho(name, passes, rho, seq):
    """Each method's mask-merged RoPE passes give its ρ(m, n) on every causal entry."""
    got, want = passes_rho(passes(seq)), rho(seq)
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    # exact for integer positions; leaky ReRoPE's m/k - n/k differs in the last bit
    torch.testing.assert_close(got[causal], want[causal], atol=1e-12, rtol=0)
    assert torch.isnan(got[~causal]).all()


def test_passes_rho_rejects_gaps_and_overlaps():
    seq = 6
    everywhere = torch.ones(seq, seq, dtype=torch.bool)
    pos = torch.arange(seq).double()
    with pytest.raises(ValueError, match="exactly once"):
        passes_rho([RemapPass(pos, pos, everywhere), RemapPass(pos, pos, everywhere)])
    with pytest.raises(ValueError, match="exactly once"):
        passes_rho([RemapPass(pos, pos, everywhere.triu(1))])
    with pytest.raises(ValueError, match="at least one"):
        passes_rho([])


# --- explicit decay -----------------------------------------------------------------------

@pytest.mark.parametrize("heads", [8, 12])
def test_alibi_matches_bloom(heads):
    """BLOOM's tensor slope_h·n differs from -slope_h·(m - n) by a per-row constant."""
    S = 9
    bloom = build_alibi_tensor(torch.ones(1, S), heads, torch.float32).view(heads, S)
    ours = alibi_bias(S, heads)
    m, n = torch.tril_indices(S, S)
    close(ours[:, m, n], bloom[:, n] - bloom[:, m])
    close(alibi_slopes(heads), bloom[:, 1])


def test_xpos_scaled_rope_scores_decay_by_zeta_per_pair():
    """xPos as applied: q at m scaled by ζ^(m/B), k at n by ζ^(-n/B), then rotated."""
    d, B = 16, 512.0
    z = xpos_decay(d)
    # torchscale's form of the same scale: (arange(0, d, 2) + 0.4 d) / (1.4 d)
    close(z, (torch.arange(0, d, 2, dtype=torch.float64) + 0.4 * d) / (1.4 * d), 1e-12)
    assert float(z.max()) < 1
    pos = torch.tensor([0, 300, 700, 2000])
    theta = inv_freq(d, dtype=torch.float64)
    c, s = cos_sin(pos, theta, dtype=torch.float64)
    scale = torch.cat([z, z])[None] ** (pos[:, None].double() / B)  # pair j: j, j + d/2
    ones = torch.ones(len(pos), d, dtype=torch.float64)
    scores = apply_rotary(ones * scale, c, s) @ apply_rotary(ones / scale, c, s).T
    # q = k = ones: every pair has |h_j| = 2, so the score is d times the probe mean
    delta = (pos[:, None] - pos[None]).double().flatten()
    expected = d * mean_cos_score(delta, theta, z ** (1 / B)).view(len(pos), len(pos))
    close(scores, expected, 1e-9)


# --- multi-head latent attention ----------------------------------------------------------

def deepseek_config(**kw):
    return deepseek_v3.DeepseekV3Config(
        hidden_size=32, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None, kv_lora_rank=12,
        qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, num_hidden_layers=1, **kw)


def test_mla_absorbed_equals_deepseek_v3_attention():
    """transformers' DeepSeek-V3 attention output, rebuilt from ropelab's absorbed MLA scores."""
    torch.manual_seed(0)
    config = deepseek_config(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config._attn_implementation = "eager"
    attn = deepseek_v3.DeepseekV3Attention(config, layer_idx=0).eval()
    h = hidden_states(32)[:1]
    pos = torch.arange(SEQ)[None] + 40
    cos, sin = deepseek_v3.DeepseekV3RotaryEmbedding(config)(h, pos)
    mask = torch.full((SEQ, SEQ), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        out, _ = attn(h, position_embeddings=(cos, sin), attention_mask=mask)
        H, dn, dr, r, dv = 2, 16, 8, 12, 16
        q = attn.q_proj(h).view(1, SEQ, H, dn + dr).transpose(1, 2)
        ckv, k_rope = attn.kv_a_proj_with_mqa(h).split([r, dr], dim=-1)
        ckv = attn.kv_a_layernorm(ckv)
        w = attn.kv_b_proj.weight.view(H, dn + dv, r)
        w_uk, w_uv = w[:, :dn], w[:, dn:]
        theta = inv_freq(dr)
        s_abs = mla_scores(q[..., :dn], q[..., dn:], ckv, k_rope, w_uk, pos[0], theta, absorbed=True)
        s_naive = mla_scores(q[..., :dn], q[..., dn:], ckv, k_rope, w_uk, pos[0], theta)
        p = torch.softmax(s_abs * attn.scaling + mask, dim=-1)
        o_lat = p @ ckv.unsqueeze(1)  # attention over the cached latents
        o = (o_lat @ w_uv.transpose(-1, -2)).transpose(1, 2).reshape(1, SEQ, H * dv)  # W_UV after
        ours = attn.o_proj(o)
    close(s_abs, s_naive, 1e-4)
    close(ours, out, 1e-5)


def test_mla_caches_the_latent_and_one_rope_key():
    """What DeepSeek-V3's layer caches per token: kv_lora_rank + qk_rope_head_dim numbers."""
    from transformers.cache_utils import DynamicCache
    torch.manual_seed(0)
    config = deepseek_config(rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config._attn_implementation = "eager"
    attn = deepseek_v3.DeepseekV3Attention(config, layer_idx=0)
    h = hidden_states(32)[:1]
    cache = DynamicCache(config=config)
    tables = deepseek_v3.DeepseekV3RotaryEmbedding(config)(h, torch.arange(SEQ)[None])
    with torch.no_grad():
        attn(h, position_embeddings=tables, attention_mask=None, cache=cache)
    layer = cache.layers[0]
    assert layer.keys.shape == (1, 1, SEQ, 12) and layer.values.shape == (1, 1, SEQ, 8)
    full = deepseek_v3.DeepseekV3Config()  # the released model's shape, no weights
    assert (full.kv_lora_rank, full.qk_rope_head_dim) == (512, 64)


def test_rope_on_the_compressed_key_blocks_absorption():
    """With R_n on k_nope, W_UKᵀ R_{n-m} q depends on the distance: no single absorbed matrix."""
    g = torch.Generator().manual_seed(0)
    w_uk = torch.randn(16, 12, generator=g, dtype=torch.float64)
    q = torch.randn(16, generator=g, dtype=torch.float64)
    theta = inv_freq(16, dtype=torch.float64)

    def absorbed(delta):  # W_UKᵀ R_δ q for δ = n - m
        c, s = cos_sin(torch.tensor([delta]), theta, dtype=torch.float64)
        return apply_rotary(q[None], c, s)[0] @ w_uk

    assert float((absorbed(0) - absorbed(5)).abs().max()) > 0.1


# --- layers without position ----------------------------------------------------------------

def test_llama4_layers_temperature_and_pairing(monkeypatch):
    """Llama 4: interleaved RoPE on 3 of 4 layers; the 4th has none and a tuned query temperature."""
    torch.manual_seed(0)
    config = llama4.Llama4TextConfig(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_hidden_layers=4,
        intermediate_size=32, intermediate_size_mlp=32, num_local_experts=2, use_qk_norm=False,
        floor_scale=3, attn_scale=0.1, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    plan = layer_rope_plan(config)
    assert [p["rope"] for p in plan] == [True, True, True, False]
    assert config.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    h = hidden_states(64)
    freqs = llama4.Llama4TextRotaryEmbedding(config)(h, POSITIONS)
    rope_layer = llama4.Llama4TextAttention(config, layer_idx=0)
    q0, k0 = qk(monkeypatch, llama4, rope_layer, h, torch.ones_like(freqs))
    q, k = qk(monkeypatch, llama4, rope_layer, h, freqs)
    c, s = cos_sin(POSITIONS, inv_freq(16, 500000.0), layout="interleaved")
    close(q, apply_rotary(q0, c[:, None], s[:, None], layout="interleaved"))
    close(k, apply_rotary(k0, c[:, None], s[:, None], layout="interleaved"))
    nope_layer = llama4.Llama4TextAttention(config, layer_idx=3)
    qn, kn = qk(monkeypatch, llama4, nope_layer, h, freqs)
    with torch.no_grad():
        q_raw = nope_layer.q_proj(h).view(BATCH, SEQ, 4, 16).transpose(1, 2)
        k_raw = nope_layer.k_proj(h).view(BATCH, SEQ, 2, 16).transpose(1, 2)
    temp = llama4_attn_scales(torch.arange(SEQ), floor_scale=3, attn_scale=0.1)
    assert temp.tolist()[:2] == [1.0, 1.0] and temp[2] > 1  # ⌊(m+1)/3⌋ ≥ 1 from m = 2 on
    close(qn, q_raw * temp[:, None])
    assert torch.equal(kn, k_raw)  # keys: no rotation, no temperature


def test_gemma3_two_bases(monkeypatch):
    """Gemma 3: base 10,000 on the 5 sliding layers, 1,000,000 on every 6th (global) one."""
    torch.manual_seed(0)
    config = gemma3.Gemma3TextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                     num_hidden_layers=6, intermediate_size=32, vocab_size=32)
    plan = layer_rope_plan(config)
    assert [p["base"] for p in plan] == [10000.0] * 5 + [1e6]
    rotary = gemma3.Gemma3RotaryEmbedding(config)
    h = hidden_states(64)
    for i, p in enumerate(plan):
        cos, sin = rotary(h, POSITIONS, config.layer_types[i])
        r_cos, r_sin = cos_sin(POSITIONS, inv_freq(16, p["base"]))
        assert torch.equal(cos, r_cos) and torch.equal(sin, r_sin)
    attn = gemma3.Gemma3Attention(config, layer_idx=5)
    cos, sin = rotary(h, POSITIONS, "full_attention")
    q0, _ = qk(monkeypatch, gemma3, attn, h, (torch.ones_like(cos), torch.zeros_like(sin)))
    q, _ = qk(monkeypatch, gemma3, attn, h, (cos, sin))
    close(q, apply_rotary(q0, cos[:, None], sin[:, None]))
    assert attn.scaling == config.query_pre_attn_scalar ** -0.5


def test_cohere2_rope_on_sliding_layers_only(monkeypatch):
    """Cohere2: interleaved RoPE on the 3 sliding layers of 4, none on the global one."""
    torch.manual_seed(0)
    config = cohere2.Cohere2Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                   num_hidden_layers=4, intermediate_size=32, vocab_size=32)
    assert [p["rope"] for p in layer_rope_plan(config)] == [True, True, True, False]
    rotary = cohere2.Cohere2RotaryEmbedding(config)
    h = hidden_states(64)
    cos, sin = rotary(h, POSITIONS)
    identity = (torch.ones_like(cos), torch.zeros_like(sin))
    local = cohere2.Cohere2Attention(config, layer_idx=0)
    q0, k0 = qk(monkeypatch, cohere2, local, h, identity)
    q, k = qk(monkeypatch, cohere2, local, h, (cos, sin))
    c, s = cos_sin(POSITIONS, inv_freq(32, config.rope_parameters["rope_theta"]), layout="interleaved")
    close(q, apply_rotary(q0, c[:, None], s[:, None], layout="interleaved"))
    close(k, apply_rotary(k0, c[:, None], s[:, None], layout="interleaved"))
    glob = cohere2.Cohere2Attention(config, layer_idx=3)
    qg0, kg0 = qk(monkeypatch, cohere2, glob, h, identity)
    qg, kg = qk(monkeypatch, cohere2, glob, h, (cos, sin))
    assert torch.equal(qg, qg0) and torch.equal(kg, kg0)


def test_smollm3_no_rope_every_fourth_layer(monkeypatch):
    """SmolLM3: half-split RoPE on 3 layers of 4; the 4th hands q and k to attention unrotated."""
    from transformers.models.smollm3 import modeling_smollm3
    config = smollm3.SmolLM3Config(num_hidden_layers=8)
    assert [p["rope"] for p in layer_rope_plan(config)] == [True, True, True, False] * 2
    assert config.rope_parameters["rope_theta"] == 2_000_000.0
    torch.manual_seed(0)
    tiny = smollm3.SmolLM3Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=1,
                                 num_hidden_layers=4, intermediate_size=32, vocab_size=32)
    h = hidden_states(64)
    cos, sin = modeling_smollm3.SmolLM3RotaryEmbedding(tiny)(h, POSITIONS)
    identity = (torch.ones_like(cos), torch.zeros_like(sin))
    rope_layer = modeling_smollm3.SmolLM3Attention(tiny, layer_idx=0)
    q0, _ = qk(monkeypatch, modeling_smollm3, rope_layer, h, identity)
    q, _ = qk(monkeypatch, modeling_smollm3, rope_layer, h, (cos, sin))
    c, s = cos_sin(POSITIONS, inv_freq(32, 2_000_000.0))
    close(q, apply_rotary(q0, c[:, None], s[:, None]))
    nope_layer = modeling_smollm3.SmolLM3Attention(tiny, layer_idx=3)
    qn0, kn0 = qk(monkeypatch, modeling_smollm3, nope_layer, h, identity)
    qn, kn = qk(monkeypatch, modeling_smollm3, nope_layer, h, (cos, sin))
    assert torch.equal(qn, qn0) and torch.equal(kn, kn0)


# --- video ------------------------------------------------------------------------------------

def test_interleaved_mrope_matches_qwen3_vl():
    """Qwen3-VL's tables: pair j turns with the position id of axis interleaved_mrope_axes[j]."""
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3_vl
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    section = [6, 5, 5]
    config = Qwen3VLTextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                               num_hidden_layers=1, intermediate_size=32, vocab_size=32,
                               rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                                "mrope_section": section, "mrope_interleaved": True})
    rotary = qwen3_vl.Qwen3VLTextRotaryEmbedding(config)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 500, (3, 1, 9), generator=g)  # distinct t, h, w ids per token
    cos, sin = rotary(torch.zeros(1), ids)
    axes = interleaved_mrope_axes(section)
    per_pair = ids[axes, 0].T  # (seq, pairs): the id each pair turns with
    theta = inv_freq(32, 5e6)
    angles = per_pair * theta
    assert torch.equal(cos[0], torch.cat([angles.cos(), angles.cos()], -1))
    assert torch.equal(sin[0], torch.cat([angles.sin(), angles.sin()], -1))
    assert axes[:9].tolist() == [0, 1, 2] * 3 and (axes == 0).sum() == 6


def test_time_aligned_ids_match_qwen2_5_vl():
    """Qwen2.5-VL: temporal ids = grid index × seconds per grid × tokens_per_second."""
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as q25
    for fps, tps in ((2.0, 2), (0.5, 2), (4.0, 25)):
        seconds_per_grid = 2 / fps  # temporal_patch_size 2
        ids = q25.Qwen2_5_VLModel.get_vision_position_ids(
            None, 0, torch.tensor([5, 2, 2]), 1, 1, time_interval=seconds_per_grid * tps)
        assert torch.equal(ids[0].view(5, 4)[:, 0], time_aligned_ids(5, seconds_per_grid, tps))
