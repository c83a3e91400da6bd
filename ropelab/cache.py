"""A RoPE module with a cos/sin cache, for prefill and KV-cache decoding
(chapter 05_cache_and_decoding).

:class:`RotaryEmbedding` holds the only state in ropelab: float32 tables
cos(m·θ_j) and sin(m·θ_j) for positions 0..capacity-1, built once and grown
(to the next power of two) when a larger position arrives. ``forward``
gathers the rows for the positions it is given and rotates q and k in their
own dtype.

The tables are cos and sin of the exact angles m·θ_j of the float32
frequencies θ_j that :func:`ropelab.inv_freq` returns (bit-identical to
transformers' ``inv_freq``, the frequencies a checkpoint was trained with):
the product m·θ_j is taken in float64, where it is exact for m < 2^29,
and cos/sin are rounded once to float32. Two other choices would change the
angles (chapter 08_numerics): float64 θ_j is a different frequency, off by
m·(θ64 − θ32), up to 9.7e-4 rad at position 32,767 (base 10,000); and the
float32 product that transformers computes rounds each angle by up to half
a float32 ulp of m·θ_j, about 4e-3 rad at position 100,000. The cache is
built once, so the wider arithmetic costs nothing per forward call.
``module.to(torch.bfloat16)`` moves the module but keeps its tables in
float32: a cast of the tables would throw that precision away.

Two pure helpers go with it: :func:`table_bytes` (the memory the tables
take) and :func:`positions_from_mask` (per-row position ids for a padded batch).

With a ``scaling`` dict (chapter 07) θ comes from
:func:`ropelab.scaled_inv_freq` and the tables are multiplied by its
attention scaling. ``dynamic`` recomputes θ when a sequence longer than any
seen so far (and than the original context) arrives and returns to the
original θ for a sequence shorter than the original context; ``longrope``
switches between its short and long factors at the original context
length. Both follow transformers' ``dynamic_rope_update``.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor, nn

from ._checks import (
    PositionsLike,
    as_positions,
    check_base,
    check_dim,
    check_layout,
    check_x,
)
from .positions import positions_from_mask  # kept here for chapter 05's imports
from .rotary import apply_rotary, cos_sin
from .scaling import normalize_scaling, scaled_inv_freq

__all__ = ["RotaryEmbedding", "positions_from_mask", "table_bytes"]


def table_bytes(
    dim: int, n_positions: int, dtype: torch.dtype = torch.float32, *, n_tables: int = 2
) -> int:
    """Bytes of a cos/sin cache: ``n_tables · n_positions · dim · itemsize``
    (05_cache_and_decoding, eq. ``cache-bytes``).

    The classic cache holds two tables (cos and sin), each ``(n_positions, dim)``
    with the angles duplicated across the two halves (eq. ``cache-cat``).
    For d = 128 and 32,768 positions in float32 that is 32 MiB.

    Args:
        dim: channels per row (the head dim, or ``rotary_dim``).
        n_positions: rows per table.
        dtype: element type of the tables.
        n_tables: 2 for cos and sin; 1 for one table (e.g. Meta's complex ``freqs_cis``
            of ``dim // 2`` complex64 entries is
            ``table_bytes(dim // 2, n, torch.complex64, n_tables=1)``).

    Returns:
        the size in bytes, an exact int.
    """
    dim = check_dim(dim)
    for name, value in (("n_positions", n_positions), ("n_tables", n_tables)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype, got {type(dtype).__name__} {dtype!r}"
        )
    return n_tables * n_positions * dim * dtype.itemsize


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for q and k with a cached, growable cos/sin table.

    Args:
        dim: the head dim the frequencies are computed for; the first
            ``dim * partial_rotary_factor`` channels are rotated (all of them
            unless the scaling dict says otherwise) and a q or k with a larger
            head dim passes its remaining channels through (partial rotary).
        base: frequency base b.
        scaling: a transformers-style rope dict (see :func:`ropelab.scaled_inv_freq`) or
            None.
        layout: ``"half_split"`` or ``"interleaved"``.
        max_position: initial cache capacity in positions.

    Call it as ``q, k = rope(q, k, positions=None, offset=0)``: see :meth:`forward`.

    Raises:
        TypeError: ``dim`` not an int, ``base`` not a number, ``scaling`` not a
            dict or None.
        ValueError: ``dim`` not positive and even; ``base`` not finite and > 1;
            a scaling dict that :func:`ropelab.scaled_inv_freq` refuses; an
            unknown ``layout``; ``max_position`` not a positive int.
    """

    inv_freq: Tensor
    cos_cached: Tensor
    sin_cached: Tensor

    def __init__(
        self,
        dim: int,
        base: float = 10000.0,
        *,
        scaling: Mapping[str, Any] | None = None,
        layout: str = "half_split",
        max_position: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = check_dim(dim)
        self.base = check_base(base)
        self.layout = check_layout(layout)
        self.scaling = normalize_scaling(scaling)
        if (
            isinstance(max_position, bool)
            or not isinstance(max_position, int)
            or max_position <= 0
        ):
            raise ValueError(
                f"max_position must be a positive int, got {max_position!r}"
            )
        self.rope_type: str = self.scaling["rope_type"]
        self.original_len: int | None = self.scaling.get(
            "original_max_position_embeddings"
        )
        self._theta_len: int | None = (
            None  # the seq_len θ was computed for (dynamic, longrope)
        )
        self._dynamic_seen = self.original_len or 0  # transformers' max_seq_len_cached
        theta, self.attention_scaling = scaled_inv_freq(
            self.head_dim, self.base, self.scaling
        )
        self.dim = 2 * theta.shape[0]  # rotated channels
        self.register_buffer("inv_freq", theta, persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, self.dim), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, self.dim), persistent=False)
        self._build(max_position)

    @property
    def capacity(self) -> int:
        """Number of positions the cached tables cover."""
        return self.cos_cached.shape[0]

    def _build(self, n: int) -> None:
        device = self.cos_cached.device
        theta32, attention = scaled_inv_freq(
            self.head_dim, self.base, self.scaling, seq_len=self._theta_len
        )
        self.inv_freq, self.attention_scaling = theta32.to(device), attention
        # the exact product m·θ32: float64 arithmetic on the float32 frequencies
        self.cos_cached, self.sin_cached = cos_sin(
            torch.arange(n, device=device),
            self.inv_freq.double(),
            layout=self.layout,
            attention_scaling=attention,
            dtype=torch.float32,
        )

    def _apply(self, fn, recurse=True):  # type: ignore[override]
        # nn.Module.to/half/bfloat16 would cast the float buffers;
        # move them, keep float32.
        super()._apply(fn, recurse)
        if (
            self.cos_cached.dtype != torch.float32
            or self.inv_freq.dtype != torch.float32
        ):
            self._build(self.capacity)
        return self

    def _update_theta(self, seq_len: int) -> None:
        """Recompute θ where the rope type depends on the sequence length, as
        transformers does."""
        before = self._theta_len
        if self.rope_type == "dynamic":
            if seq_len > self._dynamic_seen:  # growth beyond any length seen
                self._theta_len = self._dynamic_seen = seq_len
            elif (
                seq_len < self.original_len and self._dynamic_seen > self.original_len
            ):  # back to short
                self._theta_len, self._dynamic_seen = None, self.original_len
        elif self.rope_type == "longrope":
            self._theta_len = seq_len if seq_len > self.original_len else None
        if self._theta_len != before:
            self._build(max(self.capacity, seq_len))

    def _grow_to(self, needed: int) -> None:
        if needed > self.capacity:
            self._build(1 << (needed - 1).bit_length())

    def tables(self, positions: PositionsLike) -> tuple[Tensor, Tensor]:
        """float32 ``(cos, sin)`` rows for ``positions`` ``(..., seq)`` -> each
        ``(..., seq, dim)``.

        Grows the cache if needed and, for ``dynamic`` and ``longrope``,
        updates θ for the sequence length max(positions) + 1.
        """
        pos = as_positions(positions, self.cos_cached.device)
        if pos.numel():
            needed = int(pos.max()) + 1
            self._update_theta(needed)
            self._grow_to(needed)
        return self.cos_cached[pos], self.sin_cached[pos]

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        positions: PositionsLike | None = None,
        offset: int = 0,
    ) -> tuple[Tensor, Tensor]:
        """Rotate q and k by their positions, from the cached tables
        (05_cache_and_decoding).

        Args:
            q: ``(..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
            k: ``(..., seq, head_dim)``; its number of heads may differ from q's
                (grouped-query attention). Channels past the rotated ``dim``
                pass through unchanged (partial rotary).
            positions: ``(seq,)``, or per-row ``(batch, seq)`` integers; by
                default ``arange(seq)``.
            offset: added to every position: the number of tokens already in
                the KV cache when decoding.

        Returns:
            ``(q, k)`` rotated, each in its own dtype, shape and device. No tokens
            (seq = 0) give empty results.

        Raises:
            TypeError: q or k not a dense real floating tensor; positions not
                integers.
            ValueError: q or k without ``(seq, dim)`` axes, of another seq, with
                fewer channels than ``dim``, or on another device than the
                module; positions negative, not ``(seq,)`` or ``(batch, seq)``,
                or on the meta device; ``offset`` not a non-negative int.
        """
        q, k = check_x(q, "q"), check_x(k, "k")
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"q and k must have the same seq length, got q {tuple(q.shape)} and k "
                f"{tuple(k.shape)}"
            )
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] < self.dim:
                raise ValueError(
                    f"{name} has head dim {t.shape[-1]}, fewer than the {self.dim} "
                    "rotated channels"
                )
            if t.device != self.cos_cached.device:
                raise ValueError(
                    f"{name} is on {t.device} but the module is on "
                    f"{self.cos_cached.device}; call .to({name}.device)"
                )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative int, got {offset!r}")
        seq = q.shape[-2]
        pos = torch.arange(seq) if positions is None else as_positions(positions)
        if pos.ndim not in (1, 2) or pos.shape[-1] != seq:
            raise ValueError(
                f"positions must have shape (seq,) or (batch, seq) with seq={seq}, got "
                f"{tuple(pos.shape)}"
            )
        if pos.ndim == 2:
            if (
                q.ndim < 3
                or pos.shape[0] not in (1, q.shape[0])
                or k.shape[0] != q.shape[0]
            ):
                raise ValueError(
                    f"per-row positions of shape {tuple(pos.shape)} need q and k of "
                    "shape (batch, ..., seq, dim) with the same batch, got q "
                    f"{tuple(q.shape)} and k {tuple(k.shape)}"
                )
        cos, sin = self.tables(pos + offset)
        if (
            pos.ndim == 2
        ):  # (batch, seq, dim) -> (batch, 1, ..., seq, dim): broadcast over heads
            shape = (cos.shape[0],) + (1,) * (q.ndim - 3) + cos.shape[1:]
            cos, sin = cos.reshape(shape), sin.reshape(shape)
        q_out = apply_rotary(q, cos, sin, layout=self.layout, rotary_dim=self.dim)
        k_out = apply_rotary(k, cos, sin, layout=self.layout, rotary_dim=self.dim)
        return q_out, k_out

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
            f"rope_type={self.rope_type!r}, capacity={self.capacity}"
        )
