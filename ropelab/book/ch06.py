"""Chapter 06's plumbing (attention and decay): references written without ropelab.

The chapter's checks compare ropelab with these: the rotation as 2×2 blocks in
numpy, the score as a complex sum in numpy, and RoFormer's bound evaluated
term by term with mpmath.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["bound_mpmath", "pairs_numpy", "ratio_bands", "rotate_numpy", "score_numpy"]


def _numpy(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _theta(dim: int, base: float) -> np.ndarray:
    return base ** (-2.0 * np.arange(dim // 2) / dim)


def _split(x: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    if layout == "half_split":
        half = x.shape[-1] // 2
        return x[..., :half], x[..., half:]
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    raise ValueError(f"layout must be 'half_split' or 'interleaved', got {layout!r}")


def rotate_numpy(x, position, base: float = 10000.0, layout: str = "half_split"):
    """RoPE as 2×2 rotations in numpy float64, θ_j = b^(-2j/d) (eq.
    ``attn-complex-score``); ``x`` ``(..., d)``, ``position`` a number or an
    array broadcastable to ``x.shape[:-1]``. Returns a numpy array like ``x``."""
    xs = _numpy(x)
    x1, x2 = _split(xs, layout)
    angle = _numpy(position)[..., None] * _theta(xs.shape[-1], base)
    c, s = np.cos(angle), np.sin(angle)
    y1, y2 = x1 * c - x2 * s, x1 * s + x2 * c
    if layout == "half_split":
        return np.concatenate((y1, y2), axis=-1)
    return np.stack((y1, y2), axis=-1).reshape(y1.shape[:-1] + (2 * y1.shape[-1],))


def pairs_numpy(x, layout: str = "half_split") -> np.ndarray:
    """The channel pairs of ``x`` ``(..., d)`` as complex numbers ``(..., d/2)``."""
    x1, x2 = _split(_numpy(x), layout)
    return x1 + 1j * x2


def score_numpy(q, k, distances, base: float = 10000.0, layout: str = "half_split"):
    """g(δ) = Re Σ_j h_j e^{iδθ_j} with h_j = q_j·conj(k_j), in numpy (eq.
    ``attn-toeplitz``); ``q``, ``k`` ``(..., d)`` broadcastable, ``distances``
    ``(n,)`` -> ``(..., n)``."""
    h = pairs_numpy(q, layout) * np.conj(pairs_numpy(k, layout))
    delta = _numpy(distances)
    phase = np.exp(1j * delta[:, None] * _theta(2 * h.shape[-1], base))
    return (h[..., None, :] * phase).sum(-1).real


def bound_mpmath(distances: Sequence[int], dim: int, base: float = 10000.0,
                 digits: int = 30) -> Tensor:
    """RoFormer's B(δ) = (1/(d/2)) Σ_{j=1}^{d/2} |Σ_{l<j} e^{iδθ_l}| term by term
    with mpmath at ``digits`` digits (eq. ``attn-decay-bound``); float64 ``(n,)``."""
    import mpmath

    with mpmath.workdps(digits):
        theta = [
            mpmath.mpf(base) ** (-mpmath.mpf(2 * j) / dim) for j in range(dim // 2)
        ]
        values = []
        for delta in distances:
            partial, total = mpmath.mpc(0), mpmath.mpf(0)
            for t in theta:
                partial += mpmath.expj(delta * t)
                total += abs(partial)
            values.append(float(total / (dim // 2)))
    return torch.tensor(values, dtype=torch.float64)


def ratio_bands(ratio: Tensor, bands: Sequence[tuple[int, int]]) -> list[str]:
    """Lines of the median and largest of ``ratio`` ``(pairs, distances)`` over
    distance bands [lo, hi)."""
    lines = [
        f"ratio left / right side: largest {ratio.max().item():.3f}, "
        f"median {ratio.median().item():.4f}"
    ]
    for lo, hi in bands:
        band = ratio[:, lo:hi]
        lines.append(
            f"  δ in [{lo:4d}, {hi:4d}): median {band.median().item():.4f}, "
            f"largest {band.max().item():.3f}"
        )
    return lines
