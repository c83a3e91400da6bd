"""The positions fed to RoPE in practice: padding, packing, moving a cache (chapter 12).

RoPE needs, for every token, the integer position it sits at in *its own*
sequence. Three batch layouts need three rules:

* left padding, ``(batch, seq)`` with an attention mask: the position of a
  real token is the number of real tokens before it (:func:`positions_from_mask`);
* packed documents, one flat row cut by ``cu_seqlens``: positions restart at
  0 at each cut (:func:`packed_positions`);
* a key cache whose tokens move (StreamingLLM's window): a key encoded at
  position p is turned into the key at p + δ without its pre-rotation value
  (:func:`rerotate_keys`), since R(p + δ) = R(δ) R(p).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ._checks import as_positions, check_inv_freq, check_layout, check_tensor, check_x
from .rotary import apply_rotary, cos_sin_from_angles

__all__ = ["packed_positions", "positions_from_mask", "rerotate_keys"]


def positions_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions of a padded batch: cumsum − 1 over the real tokens.

    05_cache_and_decoding, eq. ``cache-posids``; 12_positions_in_practice,
    eq. ``pos-mask``. The position of a real token (mask 1) is the number of
    real tokens before it in its row, so a left-padded row starts at 0 at
    its first real token, as if it had never been padded. Pad tokens (mask
    0) get 0, as transformers' ``generate`` gives them: their scores are
    masked out, so any in-range value serves. Left, right and interior
    padding alike; for left padding this is ``(cumsum - 1).clamp(min=0)``.

    Args:
        attention_mask: ``(..., seq)`` of 0 (padding) and 1 (token), integer
            or bool.

    Returns:
        int64 tensor of the mask's shape and device.

    Raises:
        TypeError: the mask is not a dense tensor, or is floating point (an
            additive mask of 0 and -inf is not a padding mask).
        ValueError: the mask has no sequence axis or holds a value other
            than 0 and 1.
    """
    check_tensor(attention_mask, "attention_mask")
    if attention_mask.is_floating_point() or attention_mask.is_complex():
        raise TypeError(
            "attention_mask must have an integer or bool dtype, got "
            f"{attention_mask.dtype}; an additive mask (0 / -inf) is not a padding "
            "mask, and a float mask of 0/1 converts with .long()"
        )
    if attention_mask.ndim < 1:
        raise ValueError("attention_mask must have shape (..., seq), "
                         f"got shape {tuple(attention_mask.shape)}")
    mask = attention_mask.long()
    if mask.numel() and bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("attention_mask must hold only 0 and 1, "
                         f"got values {sorted(set(mask.unique().tolist()))}")
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def packed_positions(cu_seqlens: Tensor | Sequence[int]) -> Tensor:
    """Positions of packed documents, restarting at 0 at each boundary.

    12_positions_in_practice, eq. ``pos-packed``.

    ``cu_seqlens`` is flash-attention's varlen convention: the cumulative
    document lengths, starting at 0, so document i holds the flat tokens
    ``cu_seqlens[i]:cu_seqlens[i+1]`` and the last entry is the total.
    Example: ``[0, 3, 7, 10]`` -> ``[0, 1, 2, 0, 1, 2, 3, 0, 1, 2]``.

    Args:
        cu_seqlens: 1-D integers ``(n_docs + 1,)``, 0 first, strictly
            increasing (every document holds at least one token).

    Returns:
        int64 tensor ``(cu_seqlens[-1],)`` on ``cu_seqlens``' device.

    Raises:
        TypeError: not integers, or a sparse tensor.
        ValueError: not 1-D, fewer than two entries, not starting at 0, or
            not strictly increasing.
    """
    cu = as_positions(cu_seqlens, name="cu_seqlens", nonnegative=False)
    if cu.ndim != 1 or cu.numel() < 2:
        raise ValueError(
            "cu_seqlens must be 1-D with at least two entries (0 and the total), "
            f"got shape {tuple(cu.shape)}"
        )
    if int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens must start at 0, got {int(cu[0])} first")
    lengths = cu.diff()
    if bool((lengths <= 0).any()):
        i = int((lengths <= 0).nonzero()[0])
        raise ValueError(
            "cu_seqlens must be strictly increasing (each document at least one "
            "token), "
            f"got {int(cu[i])} then {int(cu[i + 1])} at entries {i} and {i + 1}"
        )
    total = int(cu[-1])
    # the flat index at which each token's document starts
    starts = torch.repeat_interleave(cu[:-1], lengths)
    return torch.arange(total, device=cu.device) - starts


def rerotate_keys(
    k: Tensor, delta: int | Tensor, inv_freq: Tensor, *, layout: str = "half_split"
) -> Tensor:
    """Move RoPE-encoded keys from position p to p + delta.

    12_positions_in_practice, eq. ``pos-rerotate``.

    Rotations of a pair compose by adding angles, R(p + δ) = R(δ) R(p), so a
    key already rotated to position p becomes the key at p + δ by one more
    rotation by δ·θ_j, without its unrotated value. This is how a streaming
    cache (StreamingLLM, attention sinks) keeps its keys at the positions of
    the cache after it evicts tokens (δ < 0). The angles δ·θ_j are formed in
    float64 from ``inv_freq`` and rounded once into the tables, so each call
    adds only the rounding of one rotation of ``k``.

    Args:
        k: keys ``(..., seq, dim)``, encoded with ``inv_freq`` and ``layout``.
        delta: the shift, an int (any sign) or an integer tensor that
            broadcasts against ``k.shape[:-1]`` (one shift per token or row).
        inv_freq: ``(dim // 2,)`` the frequencies the keys were encoded with.
        layout: ``"half_split"`` or ``"interleaved"``, as for the keys.

    Returns:
        Tensor of ``k``'s shape, dtype and device.

    Raises:
        TypeError: ``delta`` is not an integer (a float is refused, even 2.0);
            ``k`` or ``inv_freq`` as :func:`ropelab.apply_rotary_complex` refuses
            ``x`` and ``inv_freq``.
        ValueError: ``inv_freq`` does not match ``dim``, is not finite (checked
            on the CPU), or ``delta`` does not broadcast or sits on the meta
            device with a real ``inv_freq``. The tables are moved to ``k``'s
            device.
    """
    k = check_x(k, "k")
    layout = check_layout(layout)
    inv_freq = check_inv_freq(inv_freq)
    if inv_freq.shape[0] * 2 != k.shape[-1]:
        raise ValueError(
            f"inv_freq has {inv_freq.shape[0]} frequencies, "
            f"so dim = {2 * inv_freq.shape[0]}, "
            f"but k has shape {tuple(k.shape)}"
        )
    is_float = isinstance(delta, Tensor) and delta.is_floating_point()
    if isinstance(delta, float) or is_float:
        raise TypeError(
            f"delta must be an integer shift in tokens, got {delta!r}; positions "
            "are token indices (fractional positions are a change of inv_freq, "
            "chapter 07)"
        )
    d = as_positions(delta, inv_freq.device, name="delta", nonnegative=False)
    try:
        torch.broadcast_shapes(tuple(d.shape), tuple(k.shape[:-1]))
    except RuntimeError:
        raise ValueError(
            f"delta of shape {tuple(d.shape)} does not broadcast against k's positions "
            f"{tuple(k.shape[:-1])} (k has shape {tuple(k.shape)})"
        ) from None
    # δ·θ_j, (..., dim // 2), formed in float64
    shift = d.to(torch.float64).unsqueeze(-1) * inv_freq.to(torch.float64)
    table_dtype = torch.float64 if k.dtype == torch.float64 else torch.float32
    cos, sin = cos_sin_from_angles(shift, layout=layout, dtype=table_dtype)
    if cos.device != k.device:
        cos, sin = cos.to(k.device), sin.to(k.device)
    return apply_rotary(k, cos, sin, layout=layout)
