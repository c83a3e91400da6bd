"""The glossary's measured numbers are recomputed here, independently of ropelab.

The glossary is prose (no cells run in it), so the numbers it quotes as measured
are read from its text and measured again: a change of the claim or of the
arithmetic behind it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

GLOSSARY = Path(__file__).resolve().parents[2] / "book" / "glossary.md"


def _float32_angle_errors(base: float, positions: np.ndarray, d: int = 128) -> np.ndarray:
    """|fl32(m · θ32_j) − m · θ_j| (positions × pairs): transformers' float32 θ
    (1 / base ** (arange(0, d, 2) / d) in float32), the product rounded to float32,
    against the exact angle in float64."""
    theta32 = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angles32 = torch.from_numpy(positions).float()[:, None] * theta32[None, :]
    exact = positions[:, None].astype(np.float64) * base ** (-np.arange(0, d, 2) / d)
    return np.abs(angles32.double().numpy() - exact)


def test_float32_angle_error_near_100000_is_what_the_glossary_says():
    text = " ".join(GLOSSARY.read_text(encoding="utf-8").split())
    claim = re.search(
        r"\$m \\le 101\{,\}000\$: \$([\d.]+) \\times 10\^\{-3\}\$ at "
        r"\$m = 100\{,\}777\$, pair (\d+), base 500,000; \$([\d.]+) \\times 10\^\{-3\}\$ "
        r"at base 10,000",
        text,
    )
    assert claim, "the glossary's float32 entry no longer states the measurement"
    positions = np.arange(0, 101_001)
    err = _float32_angle_errors(500_000.0, positions)
    m, pair = np.unravel_index(err.argmax(), err.shape)
    assert (positions[m], pair) == (100_777, int(claim[2]))
    assert f"{err.max() * 1e3:.2f}" == claim[1]
    assert f"{_float32_angle_errors(10_000.0, positions).max() * 1e3:.1f}" == claim[3]
