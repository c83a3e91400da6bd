"""A two-layer attention-only RoPE decoder and its passkey task (11_trained_model).

The task: a sequence of random filler tokens holds one ``MARKER`` followed by
a value (a filler token); the last token is ``QUERY`` and the model must
answer with the value. The contents never say where the value is, so the
only way to find it is by position: one head must notice "the token before
me is the marker" (a step of exactly one position back), and a second layer
must then fetch that token from wherever it sits. The first step is the
relative position m - n = 1; the second must work at any distance.

The model uses ropelab's parts only: frequencies from
:func:`ropelab.scaled_inv_freq` (a transformers-style rope dict, so PI,
NTK-aware, dynamic NTK, YaRN and Llama 3 plug in without retraining), angles
and tables from :func:`ropelab.cos_sin`, and the rotation by the book's
reference formula :func:`ropelab.rotary.rotate` (``x·cos + rot(x)·sin``, the
one :func:`ropelab.apply_rotary` is tested against). It runs in float32 on
the CPU, one thread count, with deterministic algorithms: training is
chaotic in the last bit, and only one arithmetic path (one device, one set
of vector kernels, one reduction order, one backward pass) reproduces
trained weights exactly (:data:`ropelab.book.extrapolate.SHIPPED_KERNELS`). The
fast paths behind ``apply_rotary`` depend on the machine (a C kernel here,
Triton on a GPU, the torch path elsewhere) and compute the backward pass
their own way, so the model keeps to the reference formula.

Shapes: tokens ``(batch, seq)``; hidden states ``(batch, seq, d_model)``;
per head ``(batch, heads, seq, head_dim)``; attention ``(batch, heads, seq, seq)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn

from ropelab.rotary import cos_sin, cos_sin_from_angles, rotate
from ropelab.scaling import scaled_inv_freq
from ropelab.variants import RemapPass, passes_rho

__all__ = [
    "ToyConfig",
    "ToyDecoder",
    "passkey_batch",
    "passkey_at",
    "train",
    "evaluate",
    "evaluate_by_distance",
    "rope_tables",
    "remap_tables",
    "attention_entropy",
    "query_attention",
    "deterministic",
]


@dataclass(frozen=True)
class ToyConfig:
    """Sizes of the decoder and task: ``vocab`` filler tokens, then MARKER, QUERY."""

    vocab: int = 32
    d_model: int = 64
    n_heads: int = 2
    n_layers: int = 2
    base: float = 100.0
    train_len: int = 64

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def marker(self) -> int:
        return self.vocab

    @property
    def query(self) -> int:
        return self.vocab + 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def deterministic(threads: int = 1) -> None:
    """Make CPU training reproducible: deterministic kernels, fixed threads.

    Runs match bit for bit on the same vector kernels; torch picks them by the
    CPU (AVX2, AVX-512) when it starts, see
    :data:`ropelab.book.extrapolate.SHIPPED_KERNELS`.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)


def passkey_batch(
    cfg: ToyConfig, batch: int, length: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``batch`` passkey sequences of ``length`` tokens and their answers.

    Filler tokens are uniform in 0..vocab-1. The marker sits at a uniform
    position p in 0..length-3, the value (uniform filler) at p + 1, the query
    at length - 1. The answer is the value, so the distance from the query
    back to it is uniform in 1..length-2.

    Returns:
        ``(tokens (batch, length) int64, answers (batch,) int64)``.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 3:
        raise ValueError(
            f"length must be an int >= 3 (marker, value, query), got {length!r}"
        )
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    tokens = torch.randint(cfg.vocab, (batch, length), generator=generator)
    answers = torch.randint(cfg.vocab, (batch,), generator=generator)
    where = torch.randint(length - 2, (batch,), generator=generator)
    rows = torch.arange(batch)
    tokens[rows, where] = cfg.marker
    tokens[rows, where + 1] = answers
    tokens[:, -1] = cfg.query
    return tokens, answers


def passkey_at(
    cfg: ToyConfig, length: int, value_pos: int, *, seed: int = 3
) -> tuple[Tensor, Tensor]:
    """One passkey sequence of ``length`` tokens with its value moved to ``value_pos``.

    The :func:`passkey_batch` sequence drawn from ``seed``, with its marker
    overwritten by filler token 0, the marker written at ``value_pos - 1`` and the
    answer at ``value_pos`` (1 <= value_pos <= length - 2: the query stays last).

    Returns:
        ``(tokens (1, length) int64, answer (1,) int64)``.
    """
    if not 1 <= value_pos <= length - 2:
        raise ValueError(
            f"value_pos must be in 1..length-2 = 1..{length - 2}, got {value_pos}"
        )
    tokens, answer = passkey_batch(cfg, 1, length, torch.Generator().manual_seed(seed))
    tokens[0, tokens[0] == cfg.marker] = 0
    tokens[0, value_pos - 1], tokens[0, value_pos] = cfg.marker, int(answer)
    return tokens, answer


def rope_tables(
    cfg: ToyConfig,
    length: int,
    scaling: Mapping[str, Any] | None = None,
    *,
    base: float | None = None,
    inv_freq: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """cos and sin ``(length, head_dim)``, float32, for positions 0..length-1 (05, 07).

    Frequencies come from :func:`ropelab.scaled_inv_freq` for ``scaling`` (a
    transformers rope dict; ``seq_len=length`` so dynamic NTK sees the
    current length) and base ``base`` (default ``cfg.base``); YaRN's
    temperature multiplies the tables, as in transformers. ``inv_freq``
    ``(head_dim // 2,)``, if given, replaces them (ablations: any θ'_j, no
    temperature); ``scaling`` must then be None.
    """
    if inv_freq is not None:
        if scaling is not None:
            raise ValueError("give scaling or inv_freq, not both")
        if inv_freq.shape != (cfg.head_dim // 2,):
            raise ValueError(
                f"inv_freq must have shape ({cfg.head_dim // 2},), "
                f"got {tuple(inv_freq.shape)}"
            )
        return cos_sin(torch.arange(length), inv_freq.to(torch.float32))
    theta, attention_scaling = scaled_inv_freq(
        cfg.head_dim, cfg.base if base is None else base, scaling, seq_len=length
    )
    return cos_sin(torch.arange(length), theta, attention_scaling=attention_scaling)


# q cos, q sin, k cos, k sin (seq, head_dim), and the (seq, seq) mask the pass owns
Pass = tuple[Tensor, Tensor, Tensor, Tensor, "Tensor | None"]


def remap_tables(
    cfg: ToyConfig,
    remap: Sequence[Any],
    scaling: Mapping[str, Any] | None = None,
    *,
    base: float | None = None,
) -> list[Pass]:
    """The tables of each pass of a remapping method (13_current_architectures).

    ``remap`` holds (q_pos ``(seq,)``, k_pos ``(seq,)``, where ``(seq, seq)``
    bool) triples, e.g. :func:`ropelab.variants.rerope_passes`; positions may
    be fractional. The angles are q_pos·θ in float32 as :func:`rope_tables`
    computes m·θ, so a single pass at 0..seq-1 gives the same tables. Raises
    ValueError unless the masks own each causal entry exactly once.
    """
    if not remap:
        raise ValueError("remap needs at least one pass")
    seq = remap[0][0].shape[0]
    theta, attention_scaling = scaled_inv_freq(
        cfg.head_dim, cfg.base if base is None else base, scaling, seq_len=seq
    )
    for q_pos, k_pos, where in remap:
        if q_pos.shape != (seq,) or k_pos.shape != (seq,) or where.shape != (seq, seq):
            raise ValueError(
                f"each pass needs positions ({seq},) and a ({seq}, {seq}) mask, got "
                f"{tuple(q_pos.shape)}, {tuple(k_pos.shape)}, {tuple(where.shape)}"
            )
    passes_rho([RemapPass(*p) for p in remap])  # each causal entry owned exactly once

    def at(pos: Tensor) -> tuple[Tensor, Tensor]:
        angles = pos.to(theta.dtype)[:, None] * theta
        return cos_sin_from_angles(angles, attention_scaling=attention_scaling)

    tables: list[Pass] = [(*at(q), *at(k), where) for q, k, where in remap]
    return tables


class Attention(nn.Module):
    """Causal self-attention, RoPE on queries and keys (eq. ``toy-attn``)."""

    def __init__(self, cfg: ToyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.norm = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(
        self, h: Tensor, cos: Tensor, sin: Tensor, passes: Sequence[Pass] = ()
    ) -> tuple[Tensor, Tensor]:
        """``passes``, if given, replace the one rotation by ``cos``/``sin`` (13)."""
        b, n, _ = h.shape
        q, k, v = (
            self.qkv(self.norm(h))
            .view(b, n, 3, self.cfg.n_heads, self.cfg.head_dim)
            .permute(2, 0, 3, 1, 4)
        )
        if not passes:
            passes = [(cos, sin, cos, sin, None)]
        scores = torch.zeros(())
        for q_cos, q_sin, k_cos, k_sin, where in passes:
            # the reference formula
            qr, kr = rotate(q, q_cos, q_sin), rotate(k, k_cos, k_sin)
            s = qr @ kr.transpose(-1, -2) / math.sqrt(self.cfg.head_dim)
            scores = s if where is None else torch.where(where, s, scores)
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)
        weights = scores.masked_fill(causal, float("-inf")).softmax(-1)
        mixed = (weights @ v).transpose(1, 2).reshape(b, n, self.cfg.d_model)
        return h + self.out(mixed), weights


class ToyDecoder(nn.Module):
    """Embedding, ``n_layers`` RoPE attention layers, a norm, the unembedding.

    No position embedding: RoPE inside attention is the only source of position.
    """

    def __init__(self, cfg: ToyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab + 2, cfg.d_model)
        self.layers = nn.ModuleList(Attention(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(
        self,
        tokens: Tensor,
        scaling: Mapping[str, Any] | None = None,
        *,
        base: float | None = None,
        remap: Sequence[Any] | None = None,
        inv_freq: Tensor | None = None,
        layers: Sequence[int] | None = None,
    ) -> tuple[Tensor, list[Tensor]]:
        """Logits at the last position ``(batch, vocab)`` and each layer's attention.

        ``remap``: the passes of a position-remapping method (a sequence of
        :class:`ropelab.variants.RemapPass`, 13_current_architectures): each
        rotates queries and keys at its own positions and owns the scores
        where its mask is True. ``None`` is ordinary RoPE at 0..seq-1.
        ``inv_freq``: frequencies replacing ``scaling`` (see :func:`rope_tables`).
        ``layers``: the layers (0-based) that get the scaled frequencies; the
        others keep the trained ones (default: all layers).
        """
        n = tokens.shape[-1]
        if remap is None:
            cos, sin = rope_tables(self.cfg, n, scaling, base=base, inv_freq=inv_freq)
            passes: list[Pass] = []
        else:
            if inv_freq is not None or layers is not None:
                raise ValueError("remap takes neither inv_freq nor layers")
            cos = sin = torch.empty(0)
            passes = remap_tables(self.cfg, remap, scaling, base=base)
        if layers is not None:
            if not set(layers) <= set(range(len(self.layers))):
                raise ValueError(
                    f"layers must be in 0..{len(self.layers) - 1}, got {list(layers)}"
                )
            plain = rope_tables(self.cfg, n)
        h = self.embed(tokens)
        maps = []
        for i, layer in enumerate(self.layers):
            tables = (cos, sin) if layers is None or i in layers else plain
            h, weights = layer(h, *tables, passes)
            maps.append(weights)
        return self.unembed(self.norm(h[:, -1])), maps


def train(
    model: ToyDecoder,
    *,
    steps: int,
    length: int,
    seed: int,
    scaling: Mapping[str, Any] | None = None,
    base: float | None = None,
    batch: int = 64,
    lr: float = 3e-3,
) -> list[float]:
    """Train ``model`` in place with AdamW on fresh passkey batches; returns every loss.

    The batches come from a generator seeded with ``seed``, so the same call
    on the same weights gives the same weights (with :func:`deterministic`).
    A fine-tune is the same call on trained weights with the extension's
    ``scaling`` and the longer ``length``.
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda i: min(1.0, (i + 1) / warmup)
        * 0.5
        * (1 + math.cos(math.pi * min(i, steps) / steps)),
    )
    losses = []
    model.train()
    for _ in range(steps):
        tokens, answers = passkey_batch(model.cfg, batch, length, gen)
        logits, _ = model(tokens, scaling, base=base)
        loss = nn.functional.cross_entropy(logits, answers)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def _scored(model, length, samples, seed, batch, **forward):
    """The evaluation batches: (tokens, answers, logits), the same for every method."""
    gen = torch.Generator().manual_seed(seed * 100_003 + length)
    model.eval()
    for start in range(0, samples, batch):
        tokens, answers = passkey_batch(
            model.cfg, min(batch, samples - start), length, gen
        )
        logits, _ = model(tokens, **forward)
        yield tokens, answers, logits


@torch.no_grad()
def evaluate(
    model: ToyDecoder,
    length: int,
    *,
    scaling: Mapping[str, Any] | None = None,
    base: float | None = None,
    remap: Sequence[Any] | None = None,
    inv_freq: Tensor | None = None,
    layers: Sequence[int] | None = None,
    samples: int = 512,
    seed: int = 1234,
    batch: int = 128,
) -> dict[str, float]:
    """Accuracy (fraction right) and mean cross-entropy on ``samples`` fresh sequences.

    The evaluation set depends only on ``seed``, ``length`` and ``samples``,
    so every method is scored on the same sequences. ``remap``: the passes
    of a position-remapping method for ``length``; ``inv_freq``, ``layers``:
    see ``ToyDecoder.forward``.
    """
    right, loss = 0, 0.0
    forward = dict(scaling=scaling, base=base, remap=remap, inv_freq=inv_freq)
    for _, answers, logits in _scored(
        model, length, samples, seed, batch, layers=layers, **forward
    ):
        right += int((logits.argmax(-1) == answers).sum())
        loss += float(nn.functional.cross_entropy(logits, answers, reduction="sum"))
    return {"accuracy": right / samples, "loss": loss / samples}


@torch.no_grad()
def evaluate_by_distance(
    model: ToyDecoder,
    length: int,
    edges: Sequence[int],
    *,
    scaling: Mapping[str, Any] | None = None,
    base: float | None = None,
    samples: int = 512,
    seed: int = 1234,
    batch: int = 128,
) -> list[dict[str, int]]:
    """Right answers by how far back the value sits, on :func:`evaluate`'s sequences.

    The distance from the query to the value is ``length - 2 - p`` for the
    marker at p. ``edges`` ``e_0 < e_1 < ...`` give the bins
    ``e_i <= distance < e_{i+1}``.

    Returns:
        one ``{"lo", "hi", "right", "count"}`` per bin (``hi`` exclusive).
    """
    edges = [int(e) for e in edges]
    if len(edges) < 2 or any(a >= b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must increase, at least two, got {edges}")
    bins = [
        {"lo": a, "hi": b, "right": 0, "count": 0} for a, b in zip(edges, edges[1:])
    ]
    for tokens, answers, logits in _scored(
        model, length, samples, seed, batch, scaling=scaling, base=base
    ):
        distance = length - 2 - (tokens == model.cfg.marker).int().argmax(-1)
        good = logits.argmax(-1) == answers
        for b in bins:
            inside = (distance >= b["lo"]) & (distance < b["hi"])
            b["count"] += int(inside.sum())
            b["right"] += int((good & inside).sum())
    return bins


def attention_entropy(weights: Tensor) -> Tensor:
    """Entropy −Σ p log p (nats) of attention rows ``(..., n, n) -> (..., n)``."""
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    return -(weights * logs).sum(-1)


@torch.no_grad()
def query_attention(
    model: ToyDecoder,
    length: int,
    *,
    scaling: Mapping[str, Any] | None = None,
    base: float | None = None,
    samples: int = 64,
    seed: int = 11,
) -> Tensor:
    """The last layer's attention from the query (the last token) on fresh sequences.

    ``samples`` :func:`passkey_batch` sequences of ``length`` tokens drawn from
    ``seed``, run with ``scaling`` and ``base`` (see ``ToyDecoder.forward``).

    Returns:
        ``(samples, heads, length)``: row ``-1`` of each head's attention map.
    """
    gen = torch.Generator().manual_seed(seed)
    tokens, _ = passkey_batch(model.cfg, samples, length, gen)
    _, maps = model(tokens, scaling, base=base)
    return maps[-1][:, :, -1]
