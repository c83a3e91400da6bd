"""How the book checks an equation: compute both sides, assert they agree, print a stable line.

Every equation a chapter states is followed by a cell that calls
:func:`check_close`. It raises ``AssertionError`` (so nbval fails) when the
sides disagree, and otherwise prints ``"<label>: max |Δ| < <tol>"``, a line
that is identical on every machine and device because it states the
tolerance, not the tiny, hardware-dependent difference.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_close", "max_abs_diff"]


def _as_cpu_tensor(x: Tensor | float) -> Tensor:
    """``x`` as a CPU tensor; Python numbers become float64 (complex128), not torch's default float32."""
    if isinstance(x, Tensor):
        return x.detach().cpu()
    return torch.as_tensor(x, dtype=torch.complex128 if torch.as_tensor(x).is_complex() else torch.float64)


def max_abs_diff(lhs: Tensor | float, rhs: Tensor | float) -> float:
    """max |lhs - rhs| over all elements, computed in float64 on the CPU (complex values by modulus)."""
    a = _as_cpu_tensor(lhs)
    b = _as_cpu_tensor(rhs)
    a = a.to(torch.complex128) if a.is_complex() or b.is_complex() else a.double()
    b = b.to(a.dtype)
    if a.shape != b.shape:
        try:
            torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            raise ValueError(f"the two sides have shapes {tuple(a.shape)} and {tuple(b.shape)}, which do not broadcast") from None
    return float((a - b).abs().max()) if a.numel() and b.numel() else 0.0


def check_close(lhs: Tensor | float, rhs: Tensor | float, *, tol: float, label: str = "both sides") -> None:
    """Assert max |lhs - rhs| <= tol and print ``"<label>: max |Δ| < <tol>"``.

    Returns None, so that a cell ending in a check shows the printed line once
    and no ``Out[...]`` value.

    Args:
        lhs, rhs: the two sides, tensors of broadcastable shapes or numbers.
        tol: absolute tolerance; choose it for the dtype (≈1e-6 for float32
            values of order 1, ≈1e-12 for float64, ≈1e-2 for bfloat16).
        label: what is being compared, e.g. ``"eq. (2.3)"``.

    Raises:
        AssertionError: the sides differ by more than ``tol``.
    """
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    diff = max_abs_diff(lhs, rhs)
    if not diff <= tol:  # also catches NaN
        raise AssertionError(f"{label}: max |Δ| = {diff:.3e} exceeds tol = {tol:.0e}")
    print(f"{label}: max |Δ| < {tol:.0e}")
