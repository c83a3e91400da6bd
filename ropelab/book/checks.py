"""How the book checks an equation: compute both sides, assert they agree,
say so in one line.

A chapter states an equation, then a cell computes both sides with two
different computations. The check raises ``AssertionError`` (so nbval and CI
fail) when the sides disagree; when they agree it prints one short line in
the page's terms, e.g. ``✓ eq. (3): Vaswani's sinusoid is RoPE's angle table
(|Δ| ≤ 1e-12)``. The line states the tolerance, never the measured
difference, so it is identical on every machine and device.

One line per cell: group the comparisons of a cell under :func:`checks`::

    with checks("eq. (3) for both bases"):
        for b in bases:
            check_close(lhs(b), rhs(b), tol=1e-12)
            check_equal(lhs32(b), reference32(b))

Inside the block the individual checks assert silently; the block prints one
line when it ends (``✓ eq. (3) for both bases (4 comparisons: 2 exact, 2 with
|Δ| ≤ 1e-12)``). Outside a block each check prints its own line.

Exercises: the learner writes a function that starts as a stub raising
``NotImplementedError``; :func:`learner_or_reference` picks the learner's
function once it is implemented and the reference from
:mod:`ropelab.book.solutions` otherwise, and says which one the check cell tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch import Tensor

__all__ = [
    "check_close",
    "check_equal",
    "checks",
    "learner_or_reference",
    "max_abs_diff",
]

F = TypeVar("F", bound=Callable[..., Any])

# The open `checks` blocks, innermost last: each is [label, n_exact, tolerances].
_open: list[list[Any]] = []


def _as_cpu_tensor(x: Tensor | float) -> Tensor:
    """``x`` as a CPU tensor; Python numbers become float64 (complex128), not torch's
    default float32."""
    if isinstance(x, Tensor):
        return x.detach().cpu()
    return torch.as_tensor(
        x, dtype=torch.complex128 if torch.as_tensor(x).is_complex() else torch.float64
    )


def max_abs_diff(lhs: Tensor | float, rhs: Tensor | float) -> float:
    """max |lhs - rhs| over all elements, computed in float64 on the CPU
    (complex values by modulus)."""
    a = _as_cpu_tensor(lhs)
    b = _as_cpu_tensor(rhs)
    a = a.to(torch.complex128) if a.is_complex() or b.is_complex() else a.double()
    b = b.to(a.dtype)
    if a.shape != b.shape:
        try:
            torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError:
            raise ValueError(
                f"the two sides have shapes {tuple(a.shape)} and {tuple(b.shape)}, "
                "which do not broadcast"
            ) from None
    return float((a - b).abs().max()) if a.numel() and b.numel() else 0.0


def _fmt_tol(tol: float) -> str:
    return f"{tol:.0e}"


def _report(label: str, detail: str) -> None:
    print(f"✓ {label} ({detail})")


def check_close(
    lhs: Tensor | float,
    rhs: Tensor | float,
    *,
    tol: float,
    label: str = "both sides agree",
) -> None:
    """Assert ``max |lhs - rhs| <= tol``; print ``✓ <label> (|Δ| ≤ <tol>)`` unless
    inside :func:`checks`.

    Args:
        lhs, rhs: the two sides, tensors of broadcastable shapes or numbers.
        tol: absolute tolerance; choose it for the dtype (≈1e-6 for float32
            values of order 1, ≈1e-12 for float64, ≈1e-2 for bfloat16).
        label: what holds, in the page's words, e.g. ``"eq. (3), base 10,000"``.

    Raises:
        ValueError: ``tol`` is not positive, or the sides do not broadcast.
        AssertionError: the sides differ by more than ``tol`` (or are NaN).
    """
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    diff = max_abs_diff(lhs, rhs)
    if not diff <= tol:  # also catches NaN
        where = f"{_open[-1][0]}: " if _open else ""
        raise AssertionError(
            f"{where}{label}: max |Δ| = {diff:.3e} exceeds tol = {_fmt_tol(tol)}"
        )
    if _open:
        _open[-1][2].append(tol)
    else:
        _report(label, f"|Δ| ≤ {_fmt_tol(tol)}")


def check_equal(lhs: Any, rhs: Any, *, label: str = "both sides are equal") -> None:
    """Assert lhs equals rhs exactly; print ``✓ <label> (exact)`` unless inside
    :func:`checks`.

    Tensors must have the same shape and dtype and equal elements
    (``torch.equal``); anything else is compared with ``==``. Use it for
    integer counts, bit-identical tables and other exact statements.

    Raises:
        AssertionError: the sides differ.
    """
    if isinstance(lhs, Tensor) or isinstance(rhs, Tensor):
        a, b = _as_cpu_tensor(lhs), _as_cpu_tensor(rhs)
        ok = a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
        if not ok:
            why = (
                f"shapes {tuple(a.shape)} and {tuple(b.shape)}, dtypes {a.dtype} and "
                f"{b.dtype}"
                if a.shape != b.shape or a.dtype != b.dtype
                else f"max |Δ| = {max_abs_diff(a, b):.3e}"
            )
    else:
        ok = bool(lhs == rhs)
        why = f"{lhs!r} != {rhs!r}"
    if not ok:
        where = f"{_open[-1][0]}: " if _open else ""
        raise AssertionError(f"{where}{label}: not equal ({why})")
    if _open:
        _open[-1][1] += 1
    else:
        _report(label, "exact")


@contextlib.contextmanager
def checks(label: str) -> Iterator[None]:
    """Group a cell's comparisons into one printed line,
    ``✓ <label> (<what was compared>)``.

    Every :func:`check_close` and :func:`check_equal` inside the block asserts
    without printing. If all hold, the block prints one line that counts them;
    the first one that fails raises, and nothing is printed.

    Raises:
        ValueError: the block ran no comparison (a check that checks nothing).
    """
    _open.append([label, 0, []])
    try:
        yield
    finally:
        _, n_exact, tols = _open.pop()
    n = n_exact + len(tols)
    if n == 0:
        raise ValueError(f"checks({label!r}) ran no comparison")
    bound = f"|Δ| ≤ {_fmt_tol(max(tols))}" if tols else ""
    if n == 1:
        detail = bound or "exact"
    elif not tols:
        detail = f"{n} comparisons, all exact"
    elif not n_exact:
        detail = f"{n} comparisons, {bound}"
    else:
        detail = f"{n} comparisons: {n_exact} exact, {len(tols)} with {bound}"
    _report(label, detail)


def learner_or_reference(learner: F, reference: F, *probe: Any) -> tuple[F, str]:
    """The function an exercise's check cell should test, and the words that name it.

    Calls ``learner(*probe)``: if it raises ``NotImplementedError`` (the stub
    the learner starts from), returns ``(reference, "the reference solution")``;
    otherwise returns ``(learner, "your <name>")``. Any other exception from
    the learner's code propagates, so the learner sees their own traceback.
    """
    try:
        learner(*probe)
    except NotImplementedError:
        return reference, "the reference solution"
    return learner, f"your {getattr(learner, '__name__', 'function')}"
