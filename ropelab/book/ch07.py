"""Chapter 07's plumbing (context extension): transformers' rope functions on a tiny
config, an mpmath reference, and the chapter's printed tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ropelab.rotary import apply_rotary, cos_sin
from ropelab.scaling import pairs_beyond_training, yarn_correction_range, yarn_ramp

__all__ = [
    "extrapolation_ratio",
    "hf_rope",
    "llama3_band_table",
    "llama_config",
    "logn_table",
    "midpoint_deviation_mpmath",
    "ramp_differences",
    "rotate",
    "worked_table",
]


def hf_rope(
    params: Mapping, dim: int, base: float, original: int, seq_len: int | None = None
) -> tuple[Tensor, float]:
    """transformers' (inv_freq, attention factor) for a rope dict (eqs. ``ext-pi`` to
    ``ext-longrope``), from its ``ROPE_INIT_FUNCTIONS`` on a tiny LLaMA config.

    transformers' ``dynamic`` type takes L from the model config's
    ``max_position_embeddings``; the other types from the dict.
    """
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = llama_config(dim, base, params, original)
    return ROPE_INIT_FUNCTIONS[params["rope_type"]](config, None, seq_len)


def llama_config(dim: int, base: float, params: Mapping, original: int):
    """A tiny LLaMA config (no weights) with rope dict ``params``: head size ``dim``,
    base ``base``, max_position_embeddings factor·L (L itself for ``dynamic``, whose
    transformers rule reads L there and not in the dict)."""
    from transformers import LlamaConfig

    params = dict(params)
    if params["rope_type"] == "dynamic":
        params.pop("original_max_position_embeddings", None)
        max_pos = original
    else:
        max_pos = int(params.get("factor", 1) * original)
    return LlamaConfig(
        hidden_size=2 * dim,
        num_attention_heads=2,
        max_position_embeddings=max_pos,
        rope_parameters={"rope_theta": base, **params},
    )


def rotate(x: Tensor, positions: Tensor, freqs: Tensor) -> Tensor:
    """RoPE in float64 with interleaved pairs, the layout of eq. ``cplx-head``:
    ``x`` ``(..., seq, d)``, ``positions`` ``(seq,)``, ``freqs`` ``(d/2,)``."""
    cos, sin = cos_sin(positions, freqs, layout="interleaved", dtype=torch.float64)
    return apply_rotary(x, cos, sin, layout="interleaved")


def midpoint_deviation_mpmath(dim: int, base: float, digits: int = 30) -> float:
    """|a(1/2) − (a(0) + a(1))/2| for h_j = 1, a(Δ) = Σ_j cos(Δθ_j), in mpmath at
    ``digits`` digits (eq. ``ext-pi-bound`` at its worst case)."""
    import mpmath

    with mpmath.workdps(digits):
        theta = [
            mpmath.mpf(base) ** (-mpmath.mpf(2 * j) / dim) for j in range(dim // 2)
        ]

        def a(delta):
            return mpmath.fsum(mpmath.cos(delta * t) for t in theta)

        return float(abs(a(mpmath.mpf(1) / 2) - (a(0) + a(1)) / 2))


def ramp_differences(
    dim: int, factor: float, settings: Sequence[tuple[float, int]]
) -> list[str]:
    """Lines comparing YaRN's code ramp with the paper's for each (base, L): the
    code's ramp pairs, the pairs that differ, the largest |γ_code − γ_paper| and the
    range of θ'_code/θ'_paper (eqs. ``ext-yarn-ramp``, ``ext-yarn-index``)."""
    lines = [
        f"{'b':>8} {'L':>5} {'ramp j':>7} {'differ':>7} {'max |Δγ|':>15}"
        f" {'θ ratio':>12}"
    ]
    for base, length in settings:
        g_code = yarn_ramp(dim, base, length, form="code", dtype=torch.float64)
        g_paper = yarn_ramp(dim, base, length, form="paper", dtype=torch.float64)
        ratio = ((1 - g_code) / factor + g_code) / ((1 - g_paper) / factor + g_paper)
        gap = (g_code - g_paper).abs()
        differ = (gap > 1e-9).nonzero().flatten().tolist()
        if len(differ) != differ[-1] - differ[0] + 1:
            raise AssertionError("the two ramps should differ on one run of pairs")
        lo, hi = yarn_correction_range(dim, base, length)
        lines.append(
            f"{base:>8,.0f} {length:>5} {f'{lo}..{hi}':>7}"
            f" {f'{differ[0]}..{differ[-1]}':>7}"
            f" {f'{gap.max():.3f} at j = {int(gap.argmax())}':>15}"
            f" {f'{ratio.min():.2f} to {ratio.max():.2f}':>12}"
        )
    return lines


def llama3_band_table(lam: Tensor, counts: Sequence[int]) -> list[str]:
    """Lines of Llama 3's bands (eq. ``ext-llama3``): for each of kept, blended and
    divided, the number of pairs, their indices and their wavelengths ``lam``."""
    lines = [f"{'band':>9} {'pairs':>6} {'j':>9} {'wavelengths (tokens)':>22}"]
    first = 0
    for name, n in zip(("kept", "blended", "divided"), counts):
        span = f"{lam[first]:.0f} .. {lam[first + n - 1]:.0f}"
        lines.append(f"{name:>9} {n:>6} {f'{first}..{first + n - 1}':>9} {span:>22}")
        first += n
    return lines


def worked_table(
    theta: Tensor, methods: Mapping[str, Tensor], train_len: int, run_len: int
) -> list[str]:
    """Lines of the worked example: per method, the slow pairs that run past their
    trained arc by more than a position (eq. ``ext-beyond`` with slack 1), the largest
    overshoot in positions, the fast pairs it slows by more than 1 %, and the
    geometric-mean slowdown θ_j/θ'_j of the fast pairs."""
    slow = (train_len - 1) * theta < 2 * math.pi
    lines = [
        f"{'method':<24} {'slow past':>9} {'overshoot':>10} {'fast slowed':>11}"
        f" {'mean':>6}"
    ]
    for name, run in methods.items():
        past = pairs_beyond_training(theta, run, train_len, run_len, slack=1)
        overshoot = ((run_len - 1) * run / theta - (train_len - 1))[slow].max()
        slowdown = (theta / run)[~slow]
        slowed = int((slowdown > 1.01).sum())
        mean = float(slowdown.log().mean().exp())
        lines.append(
            f"{name:<24} {past:>9} {float(overshoot):>10.1f}"
            f" {f'{slowed} of {int((~slow).sum())}':>11} {mean:>6.2f}"
        )
    return lines


def logn_table(train_len: int, positions: Sequence[int]) -> list[str]:
    """Lines of the logit multiplier of the n-th token's query (n = position + 1) for
    Qwen's log-n scaling, max(1, log_L n), and Llama 4's in its layers without RoPE,
    1 + 0.1·ln(1 + ⌊n/8192⌋) (eq. ``ext-entropy``)."""
    lines = [f"{'token n':>11} {'log_L n (Qwen)':>15} {'Llama 4':>8}"]
    for n in positions:
        qwen = max(1.0, math.log(n) / math.log(train_len))
        llama4 = 1.0 + 0.1 * math.log1p(math.floor(n / 8192))
        lines.append(f"{n:>11,} {qwen:>15.3f} {llama4:>8.3f}")
    return lines


def extrapolation_ratio(h: Tensor, dim: int, base: float, train_len: int,
                        run_len: int) -> str:
    """A line with max_j |h_{j+1} − h_j| and the range, over the distances
    L..L'−1, of RoFormer's extrapolation bound (d/2)·max|Δh|·B(Δ) (chapter 06)
    divided by the interpolation bound d·max|h|/(32 ln b) (eq. ``ext-pi-bound``)."""
    from ropelab.attention import decay_bound

    h = h.detach().cpu()
    dh = (torch.cat((h, h.new_zeros(1)))[1:] - torch.cat((h, h.new_zeros(1)))[:-1])
    dh = dh.abs().max()
    extra = dh * (dim // 2) * decay_bound(torch.arange(train_len, run_len), dim, base)
    interp = dim * h.abs().max() / (32 * math.log(base))
    ratio = extra / interp
    return (
        f"max_j |h_(j+1) - h_j| = {dh:.2f}; extrapolation bound / interpolation "
        f"bound over Δ = L..L'-1: {ratio.min():.0f} to {ratio.max():.0f}"
    )
