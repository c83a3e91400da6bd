"""Chapter 05's plumbing (cache and decoding): the 2023 module, references, tables.

The chapter shows the ideas in short cells; what it needs besides, the classic
transformers module it dissects, references written independently of ropelab
(numpy, complex numbers) and the printing of its tables, lives here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "ClassicRotary",
    "decimal_digits",
    "exact_cos",
    "llama_config",
    "offset_damage",
    "rotate_numpy",
    "time_per_call",
]


def llama_config(head_dim: int, max_positions: int = 4096):
    """A tiny LLaMA config for transformers: only the rotary settings matter,
    no weights are built."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_positions,
    )


class ClassicRotary(torch.nn.Module):
    """transformers' LlamaRotaryEmbedding as of 2023 (eq. ``cache-cat``), with a
    counter of table rebuilds added.

    ``forward(x, seq_len)`` returns the first ``seq_len`` rows of the cos and
    sin tables, each ``(seq_len, dim)``, rebuilding them exactly to
    ``seq_len`` (in ``x``'s dtype) when a longer sequence arrives.
    """

    def __init__(
        self,
        dim: int,
        max_position_embeddings: int = 2048,
        base: float = 10000,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.dim, self.base = dim, base
        exponents = torch.arange(0, self.dim, 2).float().to(device) / self.dim
        inv_freq = 1.0 / (self.base**exponents)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.rebuilds = -1  # the first build is not a rebuild
        self._set_cos_sin_cache(
            max_position_embeddings, device, torch.get_default_dtype()
        )

    def _set_cos_sin_cache(self, seq_len: int, device, dtype: torch.dtype) -> None:
        self.max_seq_len_cached = seq_len
        t = torch.arange(
            self.max_seq_len_cached, device=device, dtype=self.inv_freq.dtype
        )
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)
        self.rebuilds += 1

    def forward(self, x: Tensor, seq_len: int) -> tuple[Tensor, Tensor]:
        if seq_len > self.max_seq_len_cached:  # longer: rebuild to seq_len
            self._set_cos_sin_cache(seq_len=seq_len, device=x.device, dtype=x.dtype)
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(dtype=x.dtype),
        )


def _as_numpy(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def rotate_numpy(x, positions, inv_freq) -> Tensor:
    """Half-split RoPE by complex multiplication in numpy float64, independent of
    ropelab: pair j is x[..., j] + i·x[..., j + d/2], times e^{i m θ_j}.

    ``x`` ``(..., seq, d)``; ``positions`` ``(seq,)`` or broadcastable to
    ``x.shape[:-1]``; ``inv_freq`` ``(d/2,)``. Returns a float64 CPU tensor
    of ``x``'s shape.
    """
    xs = _as_numpy(x)
    half = xs.shape[-1] // 2
    z = xs[..., :half] + 1j * xs[..., half:]
    angle = _as_numpy(positions)[..., None] * _as_numpy(inv_freq)
    z = z * np.exp(1j * angle)
    return torch.from_numpy(np.concatenate((z.real, z.imag), axis=-1))


def exact_cos(n_positions: int, inv_freq) -> Tensor:
    """cos(m·θ_j) for m = 0..n-1 in numpy float64, laid out half-split
    (eq. ``cache-cat``): ``(n, d)``."""
    angle = np.outer(np.arange(n_positions, dtype=np.float64), _as_numpy(inv_freq))
    return torch.from_numpy(np.cos(np.concatenate((angle, angle), axis=-1)))


def offset_damage(
    right: Sequence[Tensor], wrong: Sequence[Tensor], scale: float
) -> dict[str, float]:
    """What the offset mistake does to each decoding step's scores and attention
    weights softmax(scale·s).

    ``right``, ``wrong``: one score row per step. Returns the scores' typical
    size (std), the largest |Δ| of a score, the largest total variation
    between the two weight rows and the number of steps whose most-attended
    key changed.
    """
    max_delta = max_tv = 0.0
    moved = 0
    for r, w in zip(right, wrong):
        max_delta = max(max_delta, float((r - w).abs().max()))
        wr, ww = torch.softmax(r * scale, -1), torch.softmax(w * scale, -1)
        max_tv = max(max_tv, 0.5 * float((wr - ww).abs().sum()))
        moved += int(wr.argmax() != ww.argmax())
    return {
        "size": float(torch.cat(list(right), -1).std()),
        "max_delta": max_delta,
        "max_tv": max_tv,
        "moved": moved,
    }


def time_per_call(
    functions: Mapping[str, Callable[[Tensor], object]],
    cases: Mapping[str, Tensor],
    min_run_time: float = 0.2,
) -> None:
    """Print a table of the median time per call of each function on each case
    (torch.utils.benchmark)."""
    from torch.utils import benchmark

    names = list(functions)
    print(f"{'per call':28s}" + "".join(f"{n:>14s}" for n in names))
    for label, arg in cases.items():
        row = []
        for name in names:
            timer = benchmark.Timer("f(p)", globals={"f": functions[name], "p": arg})
            row.append(timer.blocked_autorange(min_run_time=min_run_time).median)
        print(f"{label:28s}" + "".join(f"{t * 1e6:11.1f} µs" for t in row))


def decimal_digits(significand_bits: int) -> float:
    """Significant decimal digits of a p-bit significand, p·log10(2)."""
    return significand_bits * math.log10(2.0)
