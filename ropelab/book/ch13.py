"""Chapter 13's plumbing (current architectures): the layer plans of released
configs; Qwen2.5-VL's position ids for a prompt with a video, read off
transformers' model as it runs."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["plan_summary", "qwen25vl_video_positions"]


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
