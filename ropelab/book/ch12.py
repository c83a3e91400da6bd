"""Chapter 12's plumbing (positions in practice): the drift of keys that a
streaming cache moves step by step, in float32 and bfloat16; generation with
transformers' dynamic-NTK LLaMA and its cache."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import torch
from torch import Tensor

from ropelab import apply_rotary, cos_sin, rerotate_keys

__all__ = ["DRIFT_WAYS", "drift_table", "dynamic_ntk_generation", "rerotation_drift"]

DRIFT_WAYS = ("step by step", "once by the total", "encoded afresh")


def rerotation_drift(
    raw: Tensor,
    inv_freq: Tensor,
    start: int,
    marks: Sequence[int],
    *,
    dtype: torch.dtype,
) -> tuple[dict[str, list[float]], float]:
    """Move keys encoded at ``start..start+n-1`` down one position at a time.

    The keys are held in ``dtype``: encoded with exact (float64) angles and
    rounded to ``dtype`` once, then moved by ``rerotate_keys(k, -1)`` after
    every eviction, as a cache of rotated keys does (eq. ``pos-rerotate``).
    After ``s`` moves, for each ``s`` in ``marks``, the largest error against
    the exact key at ``start - s`` (float64) is measured for three ways of
    holding it: moved step by step, moved once by ``-s`` from the first
    encoding, and encoded afresh from ``raw``.

    Args:
        raw: unrotated keys ``(..., n, dim)``, float64.
        inv_freq: ``(dim // 2,)`` float32 frequencies, as a model holds them.
        start: the position of the first key; ``max(marks)`` must not exceed it.
        marks: the numbers of moves at which to measure.
        dtype: the dtype the cache holds its keys in.

    Returns:
        ``(errors, norm_ratio)``: ``errors[way]`` lists max |key - exact key| at
        each mark (keys in ``DRIFT_WAYS`` order), and ``norm_ratio`` is the mean
        of |key moved step by step| / |raw key| after ``max(marks)`` moves.
    """
    if max(marks) > start:
        raise ValueError(f"marks reach {max(marks)}, past start = {start}")
    n = raw.shape[-2]
    positions = torch.arange(start, start + n)
    f64 = inv_freq.double()

    def encode(pos: Tensor) -> Tensor:  # exact angles, rounded to dtype once
        cos, sin = cos_sin(pos, f64, dtype=torch.float32)
        return apply_rotary(raw.float(), cos, sin).to(dtype)

    def exact(pos: Tensor) -> Tensor:
        return apply_rotary(raw, *cos_sin(pos, f64, dtype=torch.float64))

    errors: dict[str, list[float]] = {way: [] for way in DRIFT_WAYS}
    k0 = encode(positions)
    k = k0
    for s in range(1, max(marks) + 1):
        k = rerotate_keys(k, -1, inv_freq)
        if s in marks:
            ref = exact(positions - s)
            ways = (k, rerotate_keys(k0, -s, inv_freq), encode(positions - s))
            for way, val in zip(DRIFT_WAYS, ways):
                errors[way].append(float((val.double() - ref).abs().max()))
    norm_ratio = float((k.double().norm(dim=-1) / raw.norm(dim=-1)).mean())
    return errors, norm_ratio


def drift_table(
    marks: Sequence[int], drift: dict[str, dict[str, list[float]]], rows: Sequence[int]
) -> str:
    """The errors of :func:`rerotation_drift` for several dtypes, one row per move
    count in ``rows``: step by step and once by the total, for each dtype."""
    names = list(drift)
    head = f"{'moves s':>7} " + " ".join(
        f"{n + ', ' + w.split()[0]:>15}" for n in names for w in DRIFT_WAYS[:2]
    )
    lines = [head]
    for s in rows:
        i = list(marks).index(s)
        vals = [drift[n][w][i] for n in names for w in DRIFT_WAYS[:2]]
        lines.append(f"{s:>7} " + " ".join(f"{v:>15.1e}" for v in vals))
    return "\n".join(lines)


def dynamic_ntk_generation(
    original_max: int, factor: float, head_dim: int, total: int
) -> SimpleNamespace:
    """Generate with transformers' dynamic-NTK LLaMA and keep what its cache holds.

    A one-layer LLaMA with two heads of ``head_dim`` (random weights, nothing
    downloaded) and ``rope_type="dynamic"`` prefills ``original_max`` random
    tokens into a ``DynamicCache``, then decodes one token at a time up to
    ``total`` tokens. Draws the weights and the tokens from torch's global
    generator.

    Returns:
        A namespace with ``config``, ``cached_keys`` ``(1, 2, total, head_dim)``
        (the rotated keys in the cache, each rotated at the step that wrote
        it) and ``q_raw``, ``k_raw`` ``(1, 2, total, head_dim)``, the layer's
        queries and keys before rotation.
    """
    from transformers import DynamicCache, LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=50, hidden_size=2 * head_dim, intermediate_size=64,
        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        max_position_embeddings=original_max, initializer_range=0.3,
        rope_parameters={"rope_type": "dynamic", "factor": factor,
                         "rope_theta": 10000.0},
        attn_implementation="eager",
    )
    model = LlamaModel(config).eval()
    ids = torch.randint(0, 50, (1, total))
    cache = DynamicCache(config=config)
    with torch.no_grad():
        model(ids[:, :original_max], cache=cache, use_cache=True)  # prefill
        for t in range(original_max, total):  # decode, one token at a time
            model(ids[:, t : t + 1], cache=cache, use_cache=True)
        attn = model.layers[0].self_attn
        hidden = model.layers[0].input_layernorm(model.embed_tokens(ids))
        k_raw = attn.k_proj(hidden).view(1, total, 2, head_dim).transpose(1, 2)
        q_raw = attn.q_proj(hidden).view(1, total, 2, head_dim).transpose(1, 2)
    return SimpleNamespace(
        config=config, cached_keys=cache.layers[0].keys, q_raw=q_raw, k_raw=k_raw
    )
