"""Chapter 04's helpers (rotation matrix): R written out in numpy, the operations torch
executes for each form, and the timing of both forms.

:func:`numpy_rotation_matrix` builds R_{Θ,m} entry by entry from eqs. ``rmatrix``
and ``rmat-half`` with numpy's cos and sin, sharing no code with
:mod:`ropelab.matrix`, so the chapter can compare ropelab's matrices with it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["numpy_rotation_matrix", "executed_operations", "time_forms"]


def numpy_rotation_matrix(position: int, d: int, base: float = 10000.0, *,
                          layout: str = "interleaved") -> Tensor:
    """R_{Θ,m} (d, d) in float64, entry by entry: pair j = (2j, 2j+1) interleaved or
    (j, j + d/2) half-split, turned by m·θ_j, θ_j = base^(−2j/d)
    (04_rotation_matrix, eqs. ``rmatrix`` and ``rmat-half``)."""
    if isinstance(d, bool) or not isinstance(d, int) or d <= 0 or d % 2:
        raise ValueError(f"d must be a positive even int, got {d!r}")
    if layout not in ("interleaved", "half_split"):
        raise ValueError(
            f"layout must be 'interleaved' or 'half_split', got {layout!r}")
    r = np.zeros((d, d))
    for j in range(d // 2):
        a = position * base ** (-2 * j / d)
        if layout == "interleaved":
            first, second = 2 * j, 2 * j + 1
        else:
            first, second = j, j + d // 2
        r[first, first], r[first, second] = np.cos(a), -np.sin(a)
        r[second, first], r[second, second] = np.sin(a), np.cos(a)
    return torch.from_numpy(r)


def executed_operations(d: int, seq: int = 16) -> dict[str, int]:
    """What torch executes per vector (04_rotation_matrix, eq. ``rmat-flops``).

    The dense product ``einsum("pij,pj->pi")`` with one R per position gives
    "multiply-adds"; transformers' ``apply_rotary_pos_emb`` gives
    "multiplications", "additions" and "negations"; both counted by
    :func:`ropelab.matrix.count_arithmetic` on ``seq`` positions.
    """
    import ropelab
    from ropelab.matrix import count_arithmetic
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as llama

    gen = torch.Generator().manual_seed(0)
    theta = ropelab.inv_freq(d)
    r_all = torch.stack([ropelab.rotation_matrix(p, theta, layout="half_split")
                         for p in range(seq)])
    x, k = torch.randn(2, 1, 1, seq, d, generator=gen)
    dense = count_arithmetic(lambda: torch.einsum("pij,pj->pi", r_all, x[0, 0]))
    config = LlamaConfig(hidden_size=2 * d, num_attention_heads=2, head_dim=d)
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, torch.arange(seq)[None])
    elem = count_arithmetic(lambda: llama.apply_rotary_pos_emb(x, k, cos, sin))
    per = {op: n // (2 * seq) for op, n in elem.items()}  # q and k: two vectors a row
    return {**per, "multiply-adds": dense["multiply-adds"] // seq}


def time_forms(dims: tuple[int, ...], seq: int = 128,
               device: torch.device | str = "cpu",
               min_run_time: float = 0.1) -> list[tuple[int, float, float]]:
    """Median seconds per call of the dense product (one R per position, built before
    the clock starts) and of ``x * cos + rotate_half(x) * sin``, per head dimension:
    [(d, dense, elementwise)]. Times depend on the machine and its load."""
    import ropelab
    from torch.utils import benchmark
    from transformers.models.llama import modeling_llama as llama

    gen = torch.Generator().manual_seed(0)
    rows = []
    for d in dims:
        theta = ropelab.inv_freq(d).to(device)
        r_all = torch.stack([ropelab.rotation_matrix(p, theta, layout="half_split")
                             for p in range(seq)])
        x = torch.randn(seq, d, generator=gen).to(device)
        tables = ropelab.cos_sin(torch.arange(seq), theta.cpu())
        cos, sin = (t.to(device) for t in tables)
        dense = benchmark.Timer("torch.einsum('pij,pj->pi', r, x)",
                                globals={"torch": torch, "r": r_all, "x": x})
        elem = benchmark.Timer("x * cos + rotate_half(x) * sin",
                               globals={"x": x, "cos": cos, "sin": sin,
                                        "rotate_half": llama.rotate_half})
        rows.append((d, dense.blocked_autorange(min_run_time=min_run_time).median,
                     elem.blocked_autorange(min_run_time=min_run_time).median))
    return rows

