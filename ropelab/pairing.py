"""Interleaved versus half-split pairing and checkpoint conversion (chapter 03_pairing).

Interleaved (RoFormer, Meta): pairs (2i, 2i+1). Half-split (transformers'
LLaMA): pairs (i, i + d/2). The permutation P that sends channel 2i to i and
2i+1 to i + d/2 turns one layout into the other (03_pairing, eq. ``permutation``):

    to_half_split(x) = x[..., perm],  perm = [0, 2, 4, ..., d-2, 1, 3, ..., d-1]

and rotating then permuting equals permuting then rotating with the other
layout. Because q·k is invariant under the same permutation of q and k,
a checkpoint can be converted by permuting the rows of its q and k projection
weights head by head; that is what transformers' LLaMA conversion script does.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_dim, check_tensor

__all__ = [
    "half_split_permutation",
    "to_half_split",
    "to_interleaved",
    "permute_qk_weight",
    "unpermute_qk_weight",
]


def half_split_permutation(dim: int) -> Tensor:
    """Indices ``perm`` with ``to_half_split(x) == x[..., perm]``:
    [0, 2, ..., d-2, 1, 3, ..., d-1].

    Returns:
        int64 tensor ``(dim,)``; its inverse is ``perm.argsort()``.
    """
    dim = check_dim(dim)
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))


def _check_last_even(x: Tensor, name: str) -> None:
    check_tensor(x, name)  # any dtype: a permutation moves values
    if x.ndim < 1 or x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(
            f"{name}'s last axis must be even and non-empty, got shape {tuple(x.shape)}"
        )


def to_half_split(x: Tensor) -> Tensor:
    """Reorder the last axis from interleaved pairs to half-split pairs
    (03_pairing, eq. ``permutation``).

    ``(x0, x1, x2, x3, ...)`` -> ``(x0, x2, ..., x1, x3, ...)``: the first
    member of every pair goes to the first half, the second to the second.

    Shapes: ``(..., dim)`` -> ``(..., dim)``, any dtype (a permutation moves
    values). Raises ``TypeError`` for an x that is not a dense tensor,
    ``ValueError`` for a last axis that is missing, odd or empty.
    """
    _check_last_even(x, "x")
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


def to_interleaved(x: Tensor) -> Tensor:
    """Inverse of :func:`to_half_split`: ``(a0..a_{h-1}, b0..b_{h-1})`` ->
    ``(a0, b0, a1, b1, ...)``.

    Shapes: ``(..., dim)`` -> ``(..., dim)``. Raises as :func:`to_half_split`.
    """
    _check_last_even(x, "x")
    first, second = x.chunk(2, dim=-1)
    return torch.stack((first, second), dim=-1).flatten(-2)


def _check_weight(weight: Tensor, n_heads: int, bias: bool) -> int:
    check_tensor(weight, "weight")  # any dtype (a quantised weight too)
    if bias and weight.ndim != 1:
        raise ValueError(
            f"with bias=True, weight must be a 1-D bias (n_heads * head_dim,), "
            f"got shape {tuple(weight.shape)}"
        )
    if not bias and weight.ndim != 2:
        hint = "; to permute a bias, pass bias=True" if weight.ndim == 1 else ""
        raise ValueError(
            f"weight must be a 2-D projection (n_heads * head_dim, in_features), "
            f"got shape {tuple(weight.shape)}{hint}"
        )
    if isinstance(n_heads, bool) or not isinstance(n_heads, int):
        raise TypeError(f"n_heads must be an int, got {type(n_heads).__name__}")
    if n_heads <= 0:
        raise ValueError(f"n_heads must be positive, got {n_heads}")
    rows = weight.shape[0]
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(
            f"weight has {rows} rows, which do not split into n_heads={n_heads} heads "
            f"of even size (rows / n_heads = {rows / n_heads:g})"
        )
    return rows // n_heads


def permute_qk_weight(weight: Tensor, n_heads: int, *, bias: bool = False) -> Tensor:
    """Convert a Meta (interleaved) q or k projection to the half-split layout
    (03_pairing, eq. ``weightperm``).

    Within each head the output rows are reordered by
    :func:`~ropelab.pairing.half_split_permutation`, so that
    ``x @ permute_qk_weight(W).T`` equals ``to_half_split`` of ``x @ W.T`` head by head.
    Half-split RoPE on the converted weights then gives exactly the attention scores of
    interleaved RoPE on the original ones. The same as transformers'
    ``convert_llama_weights_to_hf.permute``. For grouped-query attention pass the number
    of key/value heads for k.

    Args:
        weight: ``(n_heads * head_dim, in_features)``, or with ``bias=True``
            a bias ``(n_heads * head_dim,)`` (so that a flattened matrix is
            never taken for a bias).
        n_heads: number of heads the rows split into.
        bias: whether ``weight`` is the projection's 1-D bias.

    Returns:
        Tensor of ``weight``'s shape, dtype and device (any dtype: a quantised
        weight too).

    Raises:
        TypeError: ``weight`` not a dense tensor; ``n_heads`` not an int.
        ValueError: ``weight`` not 2-D (1-D with ``bias=True``); ``n_heads`` not
            positive, or the rows not ``n_heads`` heads of even size.
    """
    head_dim = _check_weight(weight, n_heads, bias)
    rows = weight.shape[0]
    w = weight.reshape(n_heads, head_dim // 2, 2, *weight.shape[1:])
    return w.transpose(1, 2).reshape(rows, *weight.shape[1:])


def unpermute_qk_weight(weight: Tensor, n_heads: int, *, bias: bool = False) -> Tensor:
    """Inverse of :func:`permute_qk_weight`: half-split q/k projection back to Meta's
    interleaved layout.

    Args:
        weight: ``(n_heads * head_dim, in_features)``, or with ``bias=True``
            a bias ``(n_heads * head_dim,)``.
        n_heads: number of heads the rows split into.
        bias: whether ``weight`` is the projection's 1-D bias.

    Returns:
        Tensor of ``weight``'s shape, dtype and device.

    Raises:
        TypeError, ValueError: as :func:`permute_qk_weight`.
    """
    head_dim = _check_weight(weight, n_heads, bias)
    rows = weight.shape[0]
    w = weight.reshape(n_heads, 2, head_dim // 2, *weight.shape[1:])
    return w.transpose(1, 2).reshape(rows, *weight.shape[1:])
