"""The dense rotation matrix R_{Θ,m} (chapter 04_rotation_matrix).

R is block diagonal in the interleaved layout: d/2 blocks
[[cos mθ_j, -sin mθ_j], [sin mθ_j, cos mθ_j]] (04_rotation_matrix, eq. ``rmatrix``).
In the half-split layout the same rotations sit at rows and columns
(j, j + d/2), so R is P R_interleaved Pᵀ for the permutation P of 03_pairing.
It costs d² multiplications per vector against about 3d for the elementwise
form, which is why no implementation builds it; this module exists to check
the derivations. :func:`matmul_flops`, :func:`elementwise_flops` and
:func:`floats_per_position` count what each form costs (eqs. ``rmat-flops``
and ``rmat-memory``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_dim, check_inv_freq, check_layout
from .frequencies import angles

__all__ = [
    "rotation_matrix",
    "matmul_flops",
    "elementwise_flops",
    "count_arithmetic",
    "floats_per_position",
    "STORAGE_FORMS",
]

STORAGE_FORMS = ("dense", "cos_sin", "angles")


def rotation_matrix(
    position: int | Tensor, inv_freq: Tensor, *, layout: str = "half_split"
) -> Tensor:
    """The dense orthogonal R_{Θ,m} with ``R @ x[m] == apply_rotary`` at position m
    (04_rotation_matrix, eq. ``rmatrix``).

    With the defaults of both (half-split, as everywhere in ropelab),
    ``rotation_matrix(m, inv_freq) @ x`` equals
    ``apply_rotary(x, *cos_sin([m], inv_freq))`` for a vector ``x`` ``(dim,)``.

    Args:
        position: one integer position m (an int or a 0-d integer tensor).
        inv_freq: ``(dim // 2,)`` frequencies; R has its dtype and device.
        layout: ``"half_split"`` (the default: rotations at rows and columns
            (j, j + d/2)) or ``"interleaved"`` (the block-diagonal form of eq.
            ``rmatrix``).

    Returns:
        Tensor ``(dim, dim)``.

    Raises:
        TypeError: ``position`` not one integer (a float, a bool, a tensor of
            several); inv_freq not a dense float32/float64 tensor.
        ValueError: a negative ``position``; inv_freq as :func:`ropelab.angles`
            refuses it; an unknown ``layout``.
    """
    inv_freq = check_inv_freq(inv_freq)
    layout = check_layout(layout)
    if isinstance(position, torch.Tensor):
        if (
            position.ndim != 0
            or position.is_floating_point()
            or position.dtype == torch.bool
        ):
            raise TypeError(
                "position must be one integer, got a tensor of shape "
                f"{tuple(position.shape)} and dtype {position.dtype}"
            )
        position = int(position)
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(
            f"position must be an int, got {type(position).__name__} {position!r}"
        )
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    half = inv_freq.shape[0]
    a = angles([position], inv_freq)[0]
    c, s = a.cos(), a.sin()
    idx = torch.arange(half, device=inv_freq.device)
    if layout == "interleaved":
        first, second = 2 * idx, 2 * idx + 1
    else:
        first, second = idx, idx + half
    r = torch.zeros(2 * half, 2 * half, dtype=inv_freq.dtype, device=inv_freq.device)
    r[first, first] = c
    r[first, second] = -s
    r[second, first] = s
    r[second, second] = c
    return r


def matmul_flops(dim: int) -> int:
    """Floating-point operations of the dense product R @ x for one vector: d(2d − 1)
    (04_rotation_matrix, eq. ``rmat-flops``).

    What is counted: each of the d outputs is a sum of d products, so d
    multiplications and d − 1 additions per output; d² multiplications and
    d(d − 1) additions in all. A dense product multiplies the zeros of R like
    any other entry, because it does not know that R is sparse. (Counting a
    fused multiply-add as one operation instead gives d² multiply-adds.)

    Not counted: building R (placing d cosines and sines in a d × d array of
    zeros) and moving data (reading the d² entries of R and the d entries of x).

    Args:
        dim: head dimension d (positive, even).

    Returns:
        ``dim * (2 * dim - 1)``.
    """
    dim = check_dim(dim)
    return dim * (2 * dim - 1)


def elementwise_flops(dim: int) -> int:
    """Floating-point operations of x ⊙ cos + rot(x) ⊙ sin for one vector: 3d
    (04_rotation_matrix, eq. ``rmat-flops``).

    What is counted: 2d multiplications (x ⊙ cos and rot(x) ⊙ sin) and d
    additions. This is also exactly the cost of the sparse product R @ x that
    skips the zeros of R: every row of R has two non-zeros, so 2
    multiplications and 1 addition per output.

    Not counted: the d/2 sign flips inside rot(x) (a flip of the sign bit,
    folded into the kernel), computing the cos/sin tables (done once per
    position, shared by all heads and layers), and moving data (reading 2d
    table entries and the d entries of x).

    Args:
        dim: head dimension d (positive, even).

    Returns:
        ``3 * dim``.
    """
    dim = check_dim(dim)
    return 3 * dim


def floats_per_position(dim: int, form: str = "dense") -> int:
    """How many numbers one position's rotation is stored as (04_rotation_matrix, eq.
    ``rmat-memory``).

    * ``"dense"``: the matrix R_{Θ,m}, d² floats.
    * ``"cos_sin"``: the two tables cos and sin laid out channel by channel, as
      :func:`ropelab.cos_sin` returns them and transformers caches them, 2d floats.
    * ``"angles"``: the d/2 angles m·θ_j, the least that determines R.

    Args:
        dim: head dimension d (positive, even).
        form: one of :data:`STORAGE_FORMS`.

    Returns:
        The number of floats (multiply by the bytes per float for the memory).
    """
    dim = check_dim(dim)
    if form not in STORAGE_FORMS:
        raise ValueError(f"form must be one of {STORAGE_FORMS}, got {form!r}")
    return {"dense": dim * dim, "cos_sin": 2 * dim, "angles": dim // 2}[form]


# Arithmetic torch ops and the number of operations each executes per output element.
_ELEMENTWISE = {
    "mul": "multiplications",
    "add": "additions",
    "sub": "additions",
    "neg": "negations",
}
_PRODUCTS = {"mm", "bmm", "mv", "dot", "matmul", "addmm", "baddbmm"}


def count_arithmetic(fn) -> dict[str, int]:
    """Run ``fn()`` and count the arithmetic torch executes (04_rotation_matrix, eq.
    ``rmat-flops``).

    An independent check of ``matmul_flops`` and ``elementwise_flops``: a
    ``TorchDispatchMode`` sees every operation torch dispatches, after
    ``einsum``, ``@`` and broadcasting have been lowered to kernels. Each
    elementwise ``mul``, ``add``, ``sub`` or ``neg`` counts one operation per
    element of its result; a matrix product (``mm``, ``bmm``, ``mv``, ...)
    counts one multiply-add per output element and summed index, read off
    the shapes of its operands. Views, copies and concatenations move data
    and count nothing.

    Returns:
        A dict with the totals over the call under the keys
        ``multiplications``, ``additions``, ``negations`` and ``multiply-adds``.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    counts = {"multiplications": 0, "additions": 0, "negations": 0, "multiply-adds": 0}

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__.rstrip("_")
            if name in _ELEMENTWISE and isinstance(result, Tensor):
                counts[_ELEMENTWISE[name]] += result.numel()
            elif name in _PRODUCTS:
                a, b = (
                    (args[1], args[2])
                    if name in ("addmm", "baddbmm")
                    else (args[0], args[1])
                )
                inner = a.shape[-1]
                counts["multiply-adds"] += result.numel() * inner
            return result

    with Counter():
        fn()
    return counts
