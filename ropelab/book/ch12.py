"""Chapter 12's plumbing (positions in practice): the drift of keys that a
streaming cache moves step by step, in float32 and bfloat16; generation with
transformers' dynamic-NTK LLaMA and its cache, and its base and score tables;
the packing-leak and checkpoint-conversion tables, and llama.cpp's NORM rotation
written for transformers' LLaMA."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

import torch
from torch import Tensor

from ropelab import apply_rotary, cos_sin, rerotate_keys

__all__ = [
    "DRIFT_WAYS",
    "base_table",
    "conversion_table",
    "drift_table",
    "dynamic_ntk_generation",
    "key_drift_table",
    "llama_and_gguf_copy",
    "logits_by_rope_type",
    "packing_leak_table",
    "query_weights",
    "rerotation_drift",
    "rope_norm",
    "score_gaps",
    "show",
    "weight_gaps",
]

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


def show(err: float, rounding: float = 1e-6) -> str:
    """A difference as printed in the chapter's tables: ``err`` in ``.1e``, or
    ``"< rounding"`` where it is below the rounding of the dtype."""
    return f"{err:.1e}" if err >= rounding else f"< {rounding:.0e}"


def packing_leak_table(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, inv_freq: Tensor
) -> str:
    """How much a packed row's attention differs from each document alone.

    Packs the documents of ``cu_seqlens`` into one row and attends, for each
    mask (per document, causal only) and each choice of positions (restarting
    at each document, eq. ``pos-packed``, or running on), comparing with every
    document attended on its own (causal mask, positions from 0).

    Args:
        q, k, v: ``(heads, total_tokens, dim)`` unrotated queries, keys, values.
        cu_seqlens: ``(docs + 1,)`` cumulative lengths from 0.
        inv_freq: ``(dim // 2,)`` the frequencies.

    Returns:
        The table as text, one row per (mask, positions), and a last line that
        counts the keys one query of the second document reads under each mask.
    """
    from ropelab import packed_positions

    cu = [int(c) for c in cu_seqlens]
    total, d = cu[-1], q.shape[-1]
    lengths = torch.tensor([b - a for a, b in zip(cu[:-1], cu[1:])])
    doc = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    causal = torch.ones(total, total, dtype=torch.bool).tril()

    def attend(positions, allowed, sl=slice(None)):
        cos, sin = cos_sin(positions, inv_freq)
        qr, kr = apply_rotary(q[:, sl], cos, sin), apply_rotary(k[:, sl], cos, sin)
        s = (qr @ kr.transpose(-1, -2)) / d**0.5
        return torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v[:, sl]

    alone = torch.cat(
        [attend(range(b - a), causal[: b - a, : b - a], slice(a, b))
         for a, b in zip(cu[:-1], cu[1:])],
        dim=1,
    )
    per_doc = causal & (doc[:, None] == doc[None, :])
    restart, running = packed_positions(cu), torch.arange(total)
    lines = [f"{'mask':26} {'positions':11} max |output − each document alone|"]
    for mask_name, allowed in (("per document", per_doc), ("causal only", causal)):
        for pos_name, p in (("restart", restart), ("running", running)):
            err = float((attend(p, allowed) - alone).abs().max())
            lines.append(f"{mask_name:26} {pos_name:11} {show(err)}")
    t = cu[1] + 3  # a query of the second document
    lines.append(
        f"the query at flat index {t} (sequence {int(doc[t])}, position "
        f"{int(restart[t])}) reads {int(causal[t].sum())} keys under the causal "
        f"mask, {int(per_doc[t].sum())} under the per-document mask"
    )
    return "\n".join(lines)


def llama_and_gguf_copy() -> tuple:
    """A tiny random LLaMA in transformers and its llama.cpp-style copy.

    Two layers, 4 query heads, 2 key/value heads, head size 16, weights large
    enough that attention is sharp (drawn from torch's global generator). The
    copy has ``W_q`` and ``W_k`` un-permuted per head, as ``convert_hf_to_gguf``
    does for LLaMA, so it holds Meta's (interleaved) row order.

    Returns:
        ``(transformers_model, gguf_model)``, both in eval mode.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    from ropelab import unpermute_qk_weight

    config = LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        attn_implementation="eager", initializer_range=0.25,
    )
    hf_model = LlamaForCausalLM(config).eval()
    gguf_model = LlamaForCausalLM(config).eval()
    gguf_model.load_state_dict(hf_model.state_dict())
    with torch.no_grad():
        for layer in gguf_model.model.layers:
            a = layer.self_attn
            a.q_proj.weight.copy_(unpermute_qk_weight(a.q_proj.weight, 4))
            a.k_proj.weight.copy_(unpermute_qk_weight(a.k_proj.weight, 2))
    return hf_model, gguf_model


def logits_by_rope_type(models: dict, tokens: Tensor, rope_norm) -> dict:
    """Each model's logits under each rope type: NEOX is transformers' own
    ``apply_rotary_pos_emb`` (half-split), NORM swaps in ``rope_norm`` (the same
    angles on adjacent pairs). Returns ``{(model name, rope type): logits}``."""
    from unittest import mock

    from transformers.models.llama import modeling_llama

    runs = {}
    with torch.no_grad():
        for name, model in models.items():
            runs[name, "NEOX"] = model(tokens).logits
            with mock.patch.object(modeling_llama, "apply_rotary_pos_emb", rope_norm):
                runs[name, "NORM"] = model(tokens).logits
    return runs


def conversion_table(runs: dict, reference: Tensor) -> str:
    """The logit gap and top-1 agreement of each run against ``reference``."""
    head = f"{'weights':26} {'rope type':9} {'max |Δ logit|':>14} {'same top-1':>11}"
    lines = [head]
    for (w_name, rope_type), out in runs.items():
        gap = float((out - reference).abs().max())
        same = float((out.argmax(-1) == reference.argmax(-1)).float().mean())
        gap_text = show(gap, 1e-4)
        lines.append(f"{w_name:26} {rope_type:9} {gap_text:>14} {same:>11.0%}")
    return "\n".join(lines)


def base_table(base_at: Callable[[int], float], original_max: int, factor: float,
               total: int) -> str:
    """The dynamic-NTK base ``base_at(s)`` (eq. ``pos-ntk``) at a few lengths
    ``s``: ``original_max`` L, L + 1, 40, ``total`` and ``factor`` · L (the one
    length at which vLLM evaluates it), each with what it stands for."""
    today, vllm = total, int(factor * original_max)
    notes = {original_max: "  up to L: the original base",
             today: f"  today (m = {today - 1})", vllm: "  s = αL: vLLM's single base"}
    lines = [f"{'length s':>8}   base b(s)"]
    for s in (original_max, original_max + 1, 40, today, vllm):
        lines.append(f"{s:>8}   {base_at(s):>9,.0f}{notes.get(s, '')}")
    return "\n".join(lines)


def score_gaps(scores: dict[str, Tensor], original_max: int) -> str:
    """For each way of holding the keys after the first (the reference), the
    largest |score − reference| over the keys at positions below ``original_max`` (L)
    and over those from L on;
    ``scores[name]`` is ``(keys,)``."""
    names = list(scores)
    ref = scores[names[0]]
    lines = []
    for name in names[1:]:
        gap = (scores[name] - ref).abs()
        lines.append(f"{name:22} max |Δ score| on keys 0..L−1: "
                     f"{float(gap[:original_max].max()):.3f}, "
                     f"L..: {float(gap[original_max:].max()):.3f}")
    return "\n".join(lines)


def rope_norm(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int = 1
) -> tuple[Tensor, Tensor]:
    """llama.cpp's NORM rope type for transformers' LLaMA: the angles of
    transformers' half-split tables ``cos``, ``sin`` ``(batch, seq, dim)``,
    applied to adjacent pairs (2i, 2i+1) of ``q`` and ``k`` ``(batch, heads,
    seq, dim)``; a drop-in for ``apply_rotary_pos_emb``."""
    half = cos.shape[-1] // 2
    c = cos[..., :half].repeat_interleave(2, -1).unsqueeze(unsqueeze_dim)
    s = sin[..., :half].repeat_interleave(2, -1).unsqueeze(unsqueeze_dim)
    return (apply_rotary(q, c, s, layout="interleaved"),
            apply_rotary(k, c, s, layout="interleaved"))


def weight_gaps(
    weights: Callable[[int, Sequence[int]], Tensor],
    cases: dict[str, tuple[int, Sequence[int]]],
) -> str:
    """The left-padding table: for each case ``name -> (query position, key
    positions)``, the largest |weights(case) − weights(first case)|, where
    ``weights(query_pos, key_pos)`` returns one query's attention weights."""
    first = weights(*next(iter(cases.values())))
    lines = [f"{'prompt keys / new query':45} max |Δ attention weight|"]
    for name, (query_pos, key_pos) in cases.items():
        gap = float((weights(query_pos, key_pos) - first).abs().max())
        lines.append(f"{name:45} {show(gap)}")
    return "\n".join(lines)


def query_weights(
    q: Tensor, k: Tensor, inv_freq: Tensor
) -> Callable[[int, Sequence[int]], Tensor]:
    """One query's attention weights as a function of the positions.

    Args:
        q: ``(dim,)`` the unrotated query; k: ``(n, dim)`` the unrotated keys.
        inv_freq: ``(dim // 2,)`` the frequencies.

    Returns:
        ``weights(query_pos, key_pos)``: the ``(n,)`` softmax over the keys of
        the scores of q rotated at ``query_pos`` and k rotated at ``key_pos``
        (``n`` positions), divided by √dim.
    """
    dim = q.shape[-1]

    def weights(query_pos: int, key_pos: Sequence[int]) -> Tensor:
        qr = apply_rotary(q[None], *cos_sin([query_pos], inv_freq))
        kr = apply_rotary(k, *cos_sin(key_pos, inv_freq))
        return torch.softmax((kr @ qr[0]) / dim**0.5, dim=0)

    return weights


def key_drift_table(cached: Tensor, today: Tensor, original_max: int) -> str:
    """How far the cached keys are from the same keys rotated with today's base, by
    when they were written: the prompt (positions below ``original_max``, L), the
    first and second halves of the steps past L, and today's step. ``cached``,
    ``today``: ``(..., keys, d)``; each row is the largest |Δ| over its keys."""
    gap = (cached - today).abs().flatten(end_dim=-3).amax(dim=(0, -1))  # (keys,)
    total = gap.numel()
    if not 0 < original_max < total - 2:
        raise ValueError(f"original_max={original_max} must lie in 1..{total - 3}")
    mid = (original_max + total - 1) // 2
    ends = [0, original_max, mid, total - 1, total]
    spans = list(zip(ends, ends[1:]))
    lines = [f"{'keys written at':20} max |cached − today's|"]
    for a, b in spans:
        name = f"{a}..{b - 1}" if b - a > 1 else f"{a}"
        name += " (the prompt)" if a == 0 else " (today)" if b == total else ""
        lines.append(f"{name:20} {float(gap[a:b].max()):.3f}")
    return "\n".join(lines)
