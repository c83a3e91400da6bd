"""Chapter 13's plumbing (current architectures): the partial-rotary table; the
layer plans of the families' transformers configs; xPos's probe score, the
probe-score and band tables; Qwen2.5-VL's position ids for a prompt with a
video, read off transformers' model as it runs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

__all__ = [
    "band_table",
    "family_configs",
    "partial_table",
    "plan_summary",
    "qwen25vl_video_positions",
    "released_configs",
    "score_table",
    "xpos_score",
    "xpos_summary",
]

# Qwen3-Next's checkpoint rotates 25 % of each head at base 10,000,000
# (transformers' class default base is 10,000).
QWEN3_NEXT_ROPE = {"rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
                                       "partial_rotary_factor": 0.25}}


def partial_table(
    families: Mapping[str, tuple[object, int]], base: float = 10000.0
) -> str:
    """The partial-rotary table: for each family ``name -> (config, head width)``,
    the config's ``partial_rotary_factor`` f, the head width d, the rotated
    channels f·d and the slowest rotated pair's wavelength at ``base``
    (eq. ``var-partial``, via :func:`ropelab.variants.partial_inv_freq`)."""
    from ropelab.variants import partial_inv_freq

    lines = [f"{'family':<11} {'fraction':>8} {'head':>5} {'rotated':>8}"
             f" {'slowest wavelength, base 10,000':>32}"]
    for name, (cfg, head) in families.items():
        f = cfg.rope_parameters["partial_rotary_factor"]
        theta = partial_inv_freq(head, f, base)
        slowest = 2 * math.pi / float(theta[theta > 0].min())
        lines.append(f"{name:<11} {f:>8.2f} {head:>5} {int(f * head):>8}"
                     f" {slowest:>28,.0f} tok")
    return "\n".join(lines)


def family_configs(num_layers: int = 12) -> dict[str, object]:
    """transformers configs of ``num_layers`` layers for the five families of
    the layer-plan figure (Llama 4, Cohere2, SmolLM3, Gemma 3, Qwen3-Next with
    its checkpoint's rope parameters), each with its class defaults otherwise."""
    from transformers.models.cohere2 import configuration_cohere2 as cohere2
    from transformers.models.gemma3 import configuration_gemma3 as gemma3
    from transformers.models.llama4 import configuration_llama4 as llama4
    from transformers.models.qwen3_next import configuration_qwen3_next as qwen3_next
    from transformers.models.smollm3 import configuration_smollm3 as smollm3

    n = {"num_hidden_layers": num_layers}
    return {
        "Llama 4": llama4.Llama4TextConfig(**n),
        "Cohere2": cohere2.Cohere2Config(**n),
        "SmolLM3": smollm3.SmolLM3Config(**n),
        "Gemma 3": gemma3.Gemma3TextConfig(**n),
        "Qwen3-Next": qwen3_next.Qwen3NextConfig(**n, **QWEN3_NEXT_ROPE),
    }


def released_configs() -> dict[str, object]:
    """transformers configs with the layer counts of three released models
    (Llama 4 Scout: 48, Gemma 3 4B: 34, Qwen3-Next-80B-A3B: 48)."""
    from transformers.models.gemma3 import configuration_gemma3 as gemma3
    from transformers.models.llama4 import configuration_llama4 as llama4
    from transformers.models.qwen3_next import configuration_qwen3_next as qwen3_next

    return {
        "Llama 4 Scout": llama4.Llama4TextConfig(num_hidden_layers=48),
        "Gemma 3 4B": gemma3.Gemma3TextConfig(num_hidden_layers=34),
        "Qwen3-Next-80B-A3B": qwen3_next.Qwen3NextConfig(
            num_hidden_layers=48, **QWEN3_NEXT_ROPE),
    }


def score_table(curves: Mapping[str, Tensor], at: Sequence[int]) -> str:
    """One row per curve: its value at each distance in ``at`` (curves indexed
    by distance), in ``6.3f``."""
    rows = []
    for name, cv in curves.items():
        row = "  ".join(f"{float(cv[t]):6.3f}" for t in at)
        rows.append(f"{name:<24} {row}")
    return "\n".join(rows)


def band_table(axes: Mapping[str, Tensor], wavelengths: Tensor) -> str:
    """For each way ``name -> axis of each pair (d/2,)`` of cutting the pairs
    among time (0), height (1) and width (2), the range of wavelengths each
    axis gets, one row per axis."""
    names = list(axes)
    lines = [f"{'axis':<7} " + " ".join(f"{n:>26}" for n in names)]
    for a, axis in enumerate(("time", "height", "width")):
        cells = []
        for n in names:
            wl = wavelengths[axes[n] == a]
            cells.append(f"{float(wl.min()):>11,.0f} – {float(wl.max()):>11,.0f}")
        lines.append(f"{axis:<7} " + " ".join(cells))
    return "\n".join(lines)


def qwen25vl_video_positions(
    grid_thw: tuple[int, int, int],
    seconds_per_grid: float,
    *,
    text_before: int = 3,
    text_after: int = 4,
    tokens_per_second: int = 2,
) -> tuple[Tensor, Tensor]:
    """The (t, h, w) ids a tiny random Qwen2.5-VL hands its rotary embedding.

    Builds transformers' ``Qwen2_5_VLForConditionalGeneration`` on a tiny
    configuration (random weights, nothing downloaded), runs it on a prompt of
    ``text_before`` text tokens, one video of patch grid ``grid_thw`` (merged
    2 x 2 into tokens, as the model does) and ``text_after`` text tokens, then
    generates one token from the cache. The position ids are recorded where
    the language model's rotary embedding receives them, so they are the ones
    the model really rotates with, from ``get_rope_index`` and ``rope_deltas``.

    Args:
        grid_thw: the video's (temporal, height, width) patch grid; height and
            width even (the merge is 2 x 2).
        seconds_per_grid: seconds one temporal patch spans
            (``second_per_grid_ts``).
        text_before, text_after: text tokens before and after the video (the
            vision start and end markers count as text).
        tokens_per_second: the vision config's ``tokens_per_second``.

    Returns:
        ``(prompt_ids, next_ids)``: ``(3, seq)`` ids of the prompt and ``(3,)``
        ids of the first generated token.
    """
    import transformers
    from transformers import Qwen2_5_VLConfig
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen25vl

    t, h, w = grid_thw
    if h % 2 or w % 2:
        raise ValueError(f"grid_thw must have even height and width, got {grid_thw}")
    transformers.logging.set_verbosity_error()
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the random weights; the ids do not depend on them
    config = Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
            num_hidden_layers=1, intermediate_size=16, vocab_size=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                             "mrope_section": [2, 3, 3]},
        ),
        vision_config=dict(
            depth=1, hidden_size=16, intermediate_size=16, num_heads=2,
            out_hidden_size=32, fullatt_block_indexes=[0],
            tokens_per_second=tokens_per_second,
        ),
        image_token_id=60, video_token_id=61, vision_start_token_id=62,
        vision_end_token_id=63,
    )
    model = qwen25vl.Qwen2_5_VLForConditionalGeneration(config).eval()
    n_video = t * h * w // 4
    types = [0] * text_before + [2] * n_video + [0] * text_after
    ids = [1] * (text_before - 1) + [62] + [61] * n_video  # text, vision start, video
    ids += [63] + [1] * (text_after - 1)  # vision end, text
    vision = config.vision_config
    patch = 3 * vision.temporal_patch_size * vision.patch_size**2  # values per patch
    pixels = torch.randn(t * h * w, patch, generator=gen)
    seen: list[Tensor] = []
    rotary = model.model.language_model.rotary_emb
    forward = rotary.forward

    def record(x, position_ids, *args, **kwargs):
        seen.append(position_ids.detach().clone())
        return forward(x, position_ids, *args, **kwargs)

    rotary.forward = record
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([ids]), mm_token_type_ids=torch.tensor([types]),
            pixel_values_videos=pixels, video_grid_thw=torch.tensor([list(grid_thw)]),
            second_per_grid_ts=torch.tensor([seconds_per_grid]), use_cache=True,
        )
        model(input_ids=out.logits[:, -1:].argmax(-1), cache=out.past_key_values,
              use_cache=True)
    return seen[0][:, 0], seen[-1][:, 0, 0]


def plan_summary(config) -> str:
    """How many layers of a transformers config rotate, and with which bases.

    Reads the config with :func:`ropelab.variants.layer_rope_plan`, the way the
    model does (``no_rope_layers``, ``layer_types``, per-type
    ``rope_parameters``), e.g. ``"36 of 48 layers rotate, bases 500,000 on 36"``.
    """
    from ropelab.variants import layer_rope_plan

    plan = layer_rope_plan(config)
    bases = sorted({p["base"] for p in plan if p["rope"]})
    per_base = ", ".join(
        f"{b:,.0f} on {sum(p['base'] == b for p in plan)}" for b in bases
    )
    rotating = sum(p["rope"] for p in plan)
    return f"{rotating:>2} of {len(plan)} layers rotate, bases {per_base}"


def xpos_summary(zeta: Tensor, at: int, scale: float) -> str:
    """xPos's per-pair decay bases ``zeta`` (d/2,) in one line: the fastest and
    slowest pair's ζ_j and the share ζ^(at/scale) of its term that the slowest
    pair keeps at distance ``at`` (eq. ``var-xpos``)."""
    fast, slow = float(zeta[0]), float(zeta[-1])
    return (f"xPos ζ_j from {fast:.3f} (fastest pair) to {slow:.3f} (slowest);"
            f" at {at:,} tokens the slowest pair keeps {slow ** (at / scale):.2f}"
            " of its term")


def xpos_score(distances: Tensor, dim: int, scale: float = 512.0) -> Tensor:
    """xPos's probe score for q = k, all pairs equal: RoPE's (base 10,000) with each
    pair's term decayed, (1/(d/2)) Σ_j ζ_j^(δ/B) cos(δ θ_j), B = ``scale``
    (eq. ``var-xpos``). Computed by :func:`ropelab.variants.mean_cos_score` in units
    of B: distance δ/B and frequencies θ_j·B keep the angle δθ_j.

    Args:
        distances: ``(n,)`` distances δ in tokens.
        dim: head dimension d.
        scale: xPos's B.

    Returns:
        ``(n,)`` float64, 1 at distance 0.
    """
    from ropelab.frequencies import inv_freq
    from ropelab.variants import mean_cos_score, xpos_decay

    d = torch.as_tensor(distances)
    return mean_cos_score(d / scale, inv_freq(dim) * scale, xpos_decay(dim))
