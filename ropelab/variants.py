"""RoPE as current models change it (chapter 13_current_architectures).

Five families of change, each reduced to what it does to the score
s(m, n) = Re Σ_j h_j e^{i ρ(m, n) θ_j}, h_j = q_j · conj(k_j)
(chapter 06): which frequencies θ_j a head keeps, and which relative position
ρ(m, n) a query at m sees a key at n.

* Frequencies (``partial_inv_freq``, ``p_rope_inv_freq``, ``hope_inv_freq``):
  a pair with θ_j = 0 is not rotated; its term is position-free content.
* Positions (``rerope_positions``, ``self_extend_positions``,
  ``dual_chunk_positions``): ρ(m, n) replaces m - n, and ``remapped_scores``
  computes the scores for any ρ. Each of these ρ is also a few ordinary RoPE
  attentions with their own query and key positions, merged by masks, as the
  methods run in practice (``RemapPass``, ``rerope_passes``,
  ``self_extend_passes``, ``dual_chunk_passes``, ``passes_rho``).
* Decay made explicit (``alibi_bias``, ``xpos_decay``) and the score for q = k
  with equal pairs (``mean_cos_score``) that chapter 06 plots.
* Multi-head latent attention (``mla_scores``): DeepSeek-V2/V3's decoupled RoPE,
  naive and with W_UK absorbed into the query.
* Layers without position (``layer_rope_plan``, ``llama4_attn_scales``): which
  layers of a transformers config rotate, with which base, and Llama 4's
  attention-temperature factor on its no-RoPE layers.
* Video (``time_aligned_ids``, ``interleaved_mrope_axes``): Qwen2.5-VL's
  temporal ids in seconds, Qwen3-VL's axis-per-pair assignment.

Pairs are half-split unless a function says otherwise; positions are integers
(or reals for leaky ReRoPE). Shapes: q, k are ``(..., seq, dim)``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import torch
from torch import Tensor

from ._checks import check_base, check_dim
from .frequencies import inv_freq
from .rotary import apply_rotary, cos_sin

__all__ = [
    "partial_inv_freq",
    "p_rope_inv_freq",
    "hope_inv_freq",
    "mean_cos_score",
    "remapped_scores",
    "rerope_positions",
    "self_extend_positions",
    "dual_chunk_positions",
    "RemapPass",
    "rerope_passes",
    "self_extend_passes",
    "dual_chunk_passes",
    "passes_rho",
    "alibi_slopes",
    "alibi_bias",
    "xpos_decay",
    "mla_scores",
    "llama4_attn_scales",
    "layer_rope_plan",
    "interleaved_mrope_axes",
    "time_aligned_ids",
]


def _fraction(value: object, name: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


# --- frequencies: which pairs rotate -----------------------------------------------

def partial_inv_freq(head_dim: int, fraction: float, base: float = 10000.0) -> Tensor:
    """θ for a head that rotates only its first ``fraction`` (GPT-NeoX, Qwen3-Next).

    The rotated width r = fraction·head_dim gets the full spectrum of a head of
    width r, θ_j = base^(-2j/r), j < r/2; the other (head_dim - r)/2 pairs have
    θ = 0 (pass-through). Returns ``(head_dim//2,)`` float32, rotated pairs first.
    """
    head_dim, base = check_dim(head_dim, "head_dim"), check_base(base)
    rot = int(_fraction(fraction, "fraction") * head_dim)
    if rot < 2 or rot % 2:
        raise ValueError(
            f"fraction={fraction} rotates {rot} of {head_dim} channels; "
            "need an even count >= 2"
        )
    return torch.cat([inv_freq(rot, base), torch.zeros((head_dim - rot) // 2)])


def p_rope_inv_freq(head_dim: int, p: float, base: float = 10000.0) -> Tensor:
    """p-RoPE: keep the fastest fraction p of a full head's frequencies, zero the rest.

    θ_j = base^(-2j/head_dim) for j < p·head_dim/2, else 0 (Barbero et al.,
    2025; transformers' ``proportional`` rope type). Unlike partial rotary the
    kept θ_j are the full head's, so the slowest ones are removed, not squeezed.
    Returns ``(head_dim//2,)`` float32.
    """
    head_dim, base = check_dim(head_dim, "head_dim"), check_base(base)
    keep = int(_fraction(p, "p") * head_dim // 2)
    theta = inv_freq(head_dim, base)
    theta[keep:] = 0.0
    return theta


def hope_inv_freq(head_dim: int, base: float, context_len: int) -> Tensor:
    """HoPE-style spectrum: keep the pairs that turn at least once in ``context_len``.

    A pair whose wavelength 2π/θ_j exceeds the training context never
    completes a turn there; HoPE (Chen et al., 2025) replaces such components
    with position-independent ones, θ_j = 0. Returns ``(head_dim//2,)`` float32.
    """
    if not isinstance(context_len, int) or context_len < 1:
        raise ValueError(f"context_len must be a positive int, got {context_len!r}")
    theta = inv_freq(check_dim(head_dim, "head_dim"), check_base(base))
    theta[2 * math.pi / theta.double() > context_len] = 0.0
    return theta


def mean_cos_score(
    distances: Tensor, theta: Tensor, decay: Tensor | None = None
) -> Tensor:
    """Probe score for q = k with all pairs equal: (1/(d/2)) Σ_j ζ_j^δ cos(δ θ_j).

    The "q = k" curve of chapter 06 (there ζ_j = 1). ``decay``: optional
    per-pair ``ζ_j`` (xPos, see :func:`xpos_decay`). Pairs with θ_j = 0
    contribute 1 at every distance. Returns ``(len(distances),)`` float64.
    """
    d = torch.as_tensor(distances, dtype=torch.float64)[:, None]
    th = theta.to(torch.float64)[None]
    terms = torch.cos(d * th)
    if decay is not None:
        terms = terms * decay.to(torch.float64)[None] ** d
    return terms.mean(-1)


# --- positions: which relative position a query sees ---------------------------------

def remapped_scores(q: Tensor, k: Tensor, rho: Tensor, theta: Tensor) -> Tensor:
    """Scores at relative positions ρ(m, n) instead of m - n: Re Σ_j h_j e^{iρθ_j}.

    q ``(..., Sq, d)``, k ``(..., Sk, d)`` half-split; ``rho`` ``(Sq, Sk)``
    (any real values); ``theta`` ``(d/2,)``. Returns ``(..., Sq, Sk)`` in
    q's dtype, computed in float64. With ρ = m - n this is ordinary RoPE.
    """
    h = q.shape[-1] // 2
    if theta.shape != (h,) or rho.dim() != 2:
        raise ValueError(
            f"theta must be ({h},) and rho 2-D, "
            f"got {tuple(theta.shape)} and {tuple(rho.shape)}"
        )
    q64, k64 = q.to(torch.float64), k.to(torch.float64)
    qc = torch.complex(q64[..., :h], q64[..., h:])
    kc = torch.complex(k64[..., :h], k64[..., h:])
    angle = rho.to(torch.float64)[..., None] * theta.double()
    phase = torch.polar(torch.ones((), dtype=torch.float64), angle)
    # Σ_j q_j conj(k_j) e^{iρθ_j}, with e^{iρθ} rotating the key back by ρ
    s = torch.einsum("...mj,...nj,mnj->...mn", qc, kc.conj(), phase).real
    return s.to(q.dtype)


def _grid(seq: int) -> tuple[Tensor, Tensor]:
    if not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq must be a positive int, got {seq!r}")
    m = torch.arange(seq)[:, None]
    return m, torch.arange(seq)[None]


def rerope_positions(seq: int, window: int, leak: float | None = None) -> Tensor:
    """ReRoPE's relative positions: m - n inside ``window``, ``window`` beyond it.

    Leaky ReRoPE (``leak`` = k > 1): window + (m - n - window)/k beyond it.
    Causal part only (n ≤ m); entries above the diagonal are m - n (masked by
    attention anyway). Returns ``(seq, seq)`` float64.
    """
    m, n = _grid(seq)
    delta = (m - n).double()
    if leak is None:
        far = torch.full_like(delta, float(window))
    else:
        far = window + (delta - window) / leak
    return torch.where(delta < window, delta, far)


def self_extend_positions(seq: int, group: int, window: int) -> Tensor:
    """SelfExtend's relative positions: m - n inside ``window``, grouped beyond it.

    Beyond the neighbour window the query sits at ⌊m/G⌋ + W - W/G and the
    key at ⌊n/G⌋ (Jin et al., 2024), so ρ = ⌊m/G⌋ - ⌊n/G⌋ + W - W/G.
    Returns ``(seq, seq)`` float64.
    """
    m, n = _grid(seq)
    grouped = (m // group - n // group).double() + window - window / group
    return torch.where(m - n < window, (m - n).double(), grouped)


def dual_chunk_positions(seq: int, chunk: int, context: int) -> Tensor:
    """Dual chunk attention's relative positions (An et al., 2024; Qwen2.5-1M).

    Keys sit at n mod s (s = ``chunk``). A query at i = m mod s uses i in its
    own chunk (intra), min(s + i, c - 1) for the chunk before (successive,
    c = ``context``, the pre-training length) and c - 1 for older chunks
    (inter). Returns ``(seq, seq)`` float64.
    """
    if not 0 < chunk <= context:
        raise ValueError(f"need 0 < chunk <= context, got {chunk=}, {context=}")
    m, n = _grid(seq)
    i, j = m % chunk, n % chunk
    cm, cn = m // chunk, n // chunk
    successive = torch.clamp(chunk + i, max=context - 1)
    older = torch.full_like(i, context - 1)
    q_pos = torch.where(cm == cn, i, torch.where(cm - cn == 1, successive, older))
    return (q_pos - j).double()


class RemapPass(NamedTuple):
    """One ordinary RoPE attention of a remapping method.

    Queries rotate at ``q_pos`` ``(seq,)``, keys at ``k_pos`` ``(seq,)`` (float64,
    possibly fractional), and the pass owns the scores where ``where``
    ``(seq, seq)`` bool is True: there ρ(m, n) = q_pos[m] - k_pos[n].
    """

    q_pos: Tensor
    k_pos: Tensor
    where: Tensor


def _pass(q_pos: Tensor, k_pos: Tensor, where: Tensor) -> RemapPass:
    return RemapPass(q_pos.double().flatten(), k_pos.double().flatten(), where)


def rerope_passes(seq: int, window: int, leak: float | None = None) -> list[RemapPass]:
    """:func:`rerope_positions` as two passes: exact inside ``window``, remapped beyond.

    ReRoPE's far pass puts every query at ``window`` and every key at 0;
    leaky ReRoPE's puts the query at m/k + w - w/k and the key at n/k.
    """
    m, n = _grid(seq)
    near = m - n < window
    pos = torch.arange(seq)
    if leak is None:
        far_q, far_k = torch.full((seq,), float(window)), torch.zeros(seq)
    else:
        scaled = pos.double() / leak
        far_q, far_k = scaled + window - window / leak, scaled
    return [_pass(pos, pos, near), _pass(far_q, far_k, ~near)]


def self_extend_passes(seq: int, group: int, window: int) -> list[RemapPass]:
    """:func:`self_extend_positions` as two passes: neighbour and grouped attention.

    The grouped pass puts the query at ⌊m/G⌋ + W - W/G and the key at ⌊n/G⌋.
    """
    m, n = _grid(seq)
    near = m - n < window
    pos = torch.arange(seq)
    grouped_q = (pos // group).double() + window - window / group
    return [_pass(pos, pos, near), _pass(grouped_q, pos // group, ~near)]


def dual_chunk_passes(seq: int, chunk: int, context: int) -> list[RemapPass]:
    """:func:`dual_chunk_positions` as three passes: intra, successive and inter chunk.

    Keys always sit at n mod s; the query at i = m mod s, min(s + i, c - 1)
    and c - 1 respectively.
    """
    if not 0 < chunk <= context:
        raise ValueError(f"need 0 < chunk <= context, got {chunk=}, {context=}")
    m, n = _grid(seq)
    pos = torch.arange(seq)
    i, gap = pos % chunk, m // chunk - n // chunk
    return [
        _pass(i, i, gap == 0),
        _pass(torch.clamp(chunk + i, max=context - 1), i, gap == 1),
        _pass(torch.full((seq,), context - 1), i, gap >= 2),
    ]


def passes_rho(passes: Sequence[RemapPass]) -> Tensor:
    """The ρ(m, n) = q_pos[m] - k_pos[n] that ``passes`` compute, ``(seq, seq)``.

    Raises ValueError unless the passes own every causal entry (n ≤ m)
    exactly once; entries above the diagonal are NaN.
    """
    if not passes:
        raise ValueError("need at least one pass")
    seq = passes[0].q_pos.shape[0]
    rho = torch.full((seq, seq), float("nan"), dtype=torch.float64)
    owners = torch.zeros(seq, seq, dtype=torch.int64)
    for p in passes:
        rho = torch.where(p.where, p.q_pos[:, None] - p.k_pos[None], rho)
        owners += p.where.long()
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    if not bool((owners[causal] == 1).all()):
        raise ValueError("the passes must own each causal entry (n <= m) exactly once")
    return rho.masked_fill(~causal, float("nan"))


# --- explicit decay -----------------------------------------------------------------

def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's head slopes: the geometric sequence 2^(-8h/H), h = 1..H (Press et al.).

    For H not a power of two, the slopes of the next lower power of two
    followed by every other slope of the next higher one (as BLOOM).
    Returns ``(n_heads,)`` float32.
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    p = 2 ** math.floor(math.log2(n_heads))
    slopes = [2.0 ** (-8.0 * h / p) for h in range(1, p + 1)]
    extra = [2.0 ** (-4.0 * h / p) for h in range(1, 2 * p + 1, 2)][: n_heads - p]
    return torch.tensor(slopes + extra, dtype=torch.float32)


def alibi_bias(seq: int, n_heads: int) -> Tensor:
    """ALiBi's additive score bias -slope_h·(m - n), causal part: ``(H, seq, seq)``."""
    m, n = _grid(seq)
    return -alibi_slopes(n_heads)[:, None, None] * (m - n).clamp(min=0).float()


def xpos_decay(dim: int, gamma: float = 0.4) -> Tensor:
    """xPos's per-pair decay ζ_j = (2j/d + γ)/(1 + γ) (Sun et al., 2023).

    q at m is scaled by ζ^(m/B), k at n by ζ^(-n/B), so the score of pair j is
    multiplied by ζ_j^((m-n)/B) (B = 512 in the paper). Returns ``(dim//2,)``.
    """
    dim = check_dim(dim)
    return (torch.arange(0, dim, 2, dtype=torch.float64) / dim + gamma) / (1 + gamma)


# --- multi-head latent attention ----------------------------------------------------

def mla_scores(
    q_nope: Tensor,
    q_rope: Tensor,
    c_kv: Tensor,
    k_rope: Tensor,
    w_uk: Tensor,
    positions: Tensor,
    theta: Tensor,
    *,
    absorbed: bool = False,
) -> Tensor:
    """Unscaled MLA scores with decoupled RoPE (DeepSeek-V2/V3), interleaved rope pairs.

    score_h(m, n) = q_nope,h(m)·(W_UK,h c(n)) + (R_m q_rope,h(m))·(R_n k_rope(n)).
    With ``absorbed`` the first term is computed as (W_UK,hᵀ q_nope,h(m))·c(n),
    the inference form that never materialises per-head keys.

    Shapes: q_nope ``(..., H, S, dn)``, q_rope ``(..., H, S, dr)``, c_kv
    ``(..., S, r)``, k_rope ``(..., S, dr)`` (one head shared by all),
    w_uk ``(H, dn, r)``, positions ``(S,)``, theta ``(dr/2,)``.
    Returns ``(..., H, S, S)``.
    """
    cos, sin = cos_sin(positions, theta, layout="interleaved")
    qr = apply_rotary(q_rope, cos, sin, layout="interleaved")
    kr = apply_rotary(k_rope, cos, sin, layout="interleaved").unsqueeze(-3)
    rope = qr @ kr.transpose(-1, -2)
    if absorbed:
        q_lat = q_nope @ w_uk  # (..., H, S, r): W_UKᵀ folded into the query
        nope = q_lat @ c_kv.unsqueeze(-3).transpose(-1, -2)
    else:
        k_nope = c_kv.unsqueeze(-3) @ w_uk.transpose(-1, -2)  # (..., H, S, dn)
        nope = q_nope @ k_nope.transpose(-1, -2)
    return nope + rope


# --- layers without position ----------------------------------------------------------

def llama4_attn_scales(
    positions: Tensor, floor_scale: float = 8192.0, attn_scale: float = 0.1
) -> Tensor:
    """Llama 4's query temperature on no-RoPE layers: 1 + β·ln(1 + ⌊(m + 1)/F⌋).

    F = ``floor_scale``, β = ``attn_scale``; 1 for the first F - 1 positions,
    then growing with the log of the position. Returns float32, positions' shape.
    """
    p = torch.as_tensor(positions, dtype=torch.float64)
    steps = torch.floor((p + 1.0) / floor_scale)
    return (1.0 + attn_scale * torch.log1p(steps)).float()


def _theta_of(params: dict[str, Any] | None, default: float | None) -> float | None:
    if params is None:
        return default
    return float(params.get("rope_theta", default))


def layer_rope_plan(config: Any) -> list[dict[str, Any]]:
    """Per layer of a transformers text config: does it rotate, with which base.

    Reads the keys the models themselves read: ``no_rope_layers`` (Llama 4,
    SmolLM3), ``layer_types`` with per-type ``rope_parameters`` (Gemma 3) or
    with RoPE on sliding layers only (Cohere2), ``linear_attention`` layers
    (Qwen3-Next: no softmax attention, so no RoPE), else every layer.
    Returns one dict per layer: ``{"type", "rope", "base", "fraction"}``.
    """
    n = config.num_hidden_layers
    types = list(getattr(config, "layer_types", None) or ["full_attention"] * n)
    rp = config.rope_parameters
    kinds = {"full_attention", "sliding_attention", "chunked_attention"}
    per_type = isinstance(rp, dict) and set(rp) <= kinds
    model = getattr(config, "model_type", "")
    plan = []
    for i in range(n):
        t = types[i]
        params = rp[t] if per_type else rp
        rope = True
        if getattr(config, "no_rope_layers", None) is not None:
            rope = bool(config.no_rope_layers[i])  # 1 = uses RoPE, as models read it
        elif model.startswith("cohere2"):
            rope = t == "sliding_attention"
        elif t == "linear_attention":
            rope = False
        fraction = float((params or {}).get("partial_rotary_factor", 1.0))
        plan.append({
            "type": t,
            "rope": rope,
            "base": _theta_of(params, None) if rope else None,
            "fraction": fraction if rope else 0.0,
        })
    return plan


# --- video: time-aligned ids and interleaved M-RoPE ---------------------------------

def time_aligned_ids(
    n_grids: int, seconds_per_grid: float, tokens_per_second: float
) -> Tensor:
    """Qwen2.5-VL's temporal ids ⌊g · seconds_per_grid · tokens_per_second⌋, g < n.

    One temporal id step is 1/tokens_per_second seconds of video, whatever
    the frame rate, so the same time gap gives the same id gap. Returns int64.
    """
    return (torch.arange(n_grids) * (seconds_per_grid * tokens_per_second)).long()


def interleaved_mrope_axes(mrope_section: list[int]) -> Tensor:
    """Qwen3-VL's interleaved M-RoPE: the axis (0 = t, 1 = h, 2 = w) of each pair j.

    Pairs cycle t, h, w (j mod 3 = 0, 1, 2) while the h and w sections last
    (j < 3·section[1], j < 3·section[2]); the remaining pairs go to t. Chapter
    10's chunked M-RoPE gives each axis one consecutive band instead.
    Returns int64 ``(sum(mrope_section),)``.
    """
    if len(mrope_section) != 3:
        raise ValueError(f"mrope_section must hold 3 counts, got {mrope_section!r}")
    j = torch.arange(sum(mrope_section))
    axes = torch.zeros_like(j)
    for axis in (1, 2):
        axes[(j % 3 == axis) & (j < 3 * mrope_section[axis])] = axis
    return axes
