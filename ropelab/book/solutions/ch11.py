"""Reference solutions to chapter 11's exercises (11_trained_model)."""

from __future__ import annotations

import math

__all__ = ["critical_dimension", "extrapolation_bound"]


def critical_dimension(dim: int, base: float, train_len: int) -> int:
    """Liu et al.'s critical dimension d_extra = 2⌈(d/2)·log_b(L/2π)⌉ (toy-critical).

    The channels (two per pair) whose pairs complete a full turn within the
    training length; the pairs beyond it never saw their whole circle.
    """
    return 2 * math.ceil(dim / 2 * math.log(train_len / (2 * math.pi)) / math.log(base))


def extrapolation_bound(
    dim: int, base: float, train_len: int, tuned_base: float | None = None
) -> float:
    """Liu et al.'s extrapolation bound T = 2π·β^(d_extra/d) (eq. ``toy-bound``).

    ``d_extra`` comes from pre-training (``base``, ``train_len``); ``β`` is the
    base used in fine-tuning (default: ``base``, when T is the wavelength of
    the first pair past the critical dimension).
    """
    beta = base if tuned_base is None else tuned_base
    return 2 * math.pi * beta ** (critical_dimension(dim, base, train_len) / dim)
