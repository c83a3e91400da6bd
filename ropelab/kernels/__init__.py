"""The fast paths behind :func:`ropelab.apply_rotary` (09_performance).

:func:`rotate` is the one dispatch: it computes ``x·cos + rot(x)·sin`` with
the Triton kernel on a CUDA GPU when Triton is installed
(:mod:`ropelab.kernels.triton`, chapter 14), the fused CPU kernel
(:mod:`ropelab.kernels.cpu`) on the CPU, else the torch path
(:mod:`ropelab.kernels.torch_path`), into ``out`` if given (:func:`rotate_into`).
When autograd records, the backward pass goes through the same dispatch: the
transpose of a rotation by θ is the rotation by −θ.
:func:`kernel_status` says whether the CPU kernel is in use here.
``_replay`` takes an :func:`~ropelab.apply_rotary` call like one already checked
straight to the CPU kernel (a decoding loop makes one at every step).
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

from .._checks import compiling
from . import cpu, torch_path

try:
    from torch._C._functorch import is_functorch_wrapped_tensor as _is_functorch_wrapped
except ImportError:  # older torch: no torch.func wrappers to see

    def _is_functorch_wrapped(t: Tensor) -> bool:
        return False


__all__ = ["kernel_status", "rotate", "rotate_into", "transformed"]


def kernel_status() -> dict[str, object]:
    """Whether :func:`~ropelab.apply_rotary` uses the fused CPU kernel, and why not.

    Builds the kernel if it has not been built: 1.1 s with gcc 12 on an idle
    2-core machine, longer on a loaded one (4.4 s was seen for an earlier,
    smaller version); once per machine, in a
    private per-user cache (see ``ropelab.kernels.cpu``). Returns a dict:
    ``available`` (bool), ``reason`` (``"compiled"``, ``"loaded from cache"``
    or why it is unavailable, e.g. no C compiler), ``compile_s`` (seconds the
    compile took in this process, or None), ``path`` (the shared library),
    ``dtypes`` (the dtypes it handles), ``openmp`` (whether it splits rows
    between threads), ``vector_bytes`` (its widest vector store: 64 with
    AVX-512, 32 with AVX2, 0 without), ``hardware_bf16`` (whether it rounds
    bfloat16 with AVX512-BF16's instruction, to the same bits) and ``replaced``
    (which untrusted or corrupt library was deleted and rebuilt, or None).
    Where it is unavailable, and on a GPU, apply_rotary takes its torch path
    (09_performance).
    """
    return cpu.status()


def rotate_into(
    out: Tensor,
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    *,
    native: bool = True,
) -> str:
    """out = x·cos + rot(x)·sin without the plain formula's temporaries; returns
    which path computed it: ``"cpu"``, ``"triton"`` or ``"torch"``.

    On the CPU this is one pass of the fused C kernel: bit-identical to the
    plain formula in float32 and float64, and in bfloat16 and float16 the
    float32 formula with its result rounded to the 16-bit type (09_performance).
    On a CUDA GPU with Triton installed it is one launch of the Triton
    kernel, which computes the same float32 formula. Elsewhere (no C
    compiler or no Triton, ``native=False``, or while torch traces the call)
    it is ``ropelab.kernels.torch_path.rotate_into``.
    """
    # while torch traces (torch.compile, dispatch modes) it sees torch operations only
    # (cpu.rotate declines then, first thing)
    if native:
        if x.is_cuda:
            if not cpu._traced() and _triton_rotate_into(out, x, cos, sin, layout):
                return "triton"
        elif cpu.rotate(out, x, cos, sin, layout):
            return "cpu"
    torch_path.rotate_into(out, x, cos, sin, layout)
    return "torch"


def _replay(
    x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: object,
    out: Tensor | None,
) -> Tensor | None:
    """:func:`~ropelab.apply_rotary`'s result without its checks, for a call like
    one they passed and the CPU kernel computed; None otherwise (forward-mode AD,
    torch.func, or anything ``ropelab.kernels.cpu._replay`` finds different), and
    the caller takes its full path."""
    if compiling() or getattr(_forward_ad, "_current_level", -1) >= 0:
        return None
    for t in (x, cos, sin) if out is None else (x, cos, sin, out):
        if not isinstance(t, Tensor) or _is_functorch_wrapped(t):
            return None  # not a tensor: the checks say so
    return cpu._replay(x, cos, sin, layout, rotary_dim, out)


def _triton_rotate_into(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str
) -> bool:
    """The Triton kernel for a CUDA tensor; False when Triton is not installed."""
    try:
        from . import triton as triton_kernel
    except ImportError:  # no Triton: the torch path
        return False
    return triton_kernel.rotate_into(out, x, cos, sin, layout)


def transformed(*tensors: Tensor) -> bool:
    """Whether forward-mode AD is on or torch.func (vmap, grad, jvp) wraps a tensor.

    The C kernel is opaque to both, so the caller runs the plain formula,
    which they see through.
    """
    if compiling():
        return False  # torch.compile traces the torch path (the kernel sees it trace)
    if getattr(_forward_ad, "_current_level", -1) >= 0:
        return True
    return any(_is_functorch_wrapped(t) for t in tensors)


def _swap_pairs(t: Tensor, layout: str, first: float, second: float) -> Tensor:
    """Pairs (a, b) of the last axis -> (first·b, second·a); (-1, 1): a 90° turn."""
    if layout == "half_split":
        a, b = t.chunk(2, dim=-1)
        return torch.cat((first * b, second * a), dim=-1)
    pairs = t.unflatten(-1, (-1, 2))
    turned = (first * pairs[..., 1], second * pairs[..., 0])
    return torch.stack(turned, dim=-1).flatten(-2)


# An autograd.Function rather than torch.library.custom_op: measured on this 2-core
# CPU, custom_op's dispatch adds about 25 µs to every call (a decode step's budget),
# has no forward-mode AD rule and needs its own vmap rule; torch.compile traces this
# Function in one graph (the C kernel steps aside while torch traces).
class _Rotation(torch.autograd.Function):
    """The fast paths under autograd: x turns by θ, the gradient by −θ backward.

    With y = x·c + rot(x)·s, the gradient with respect to x is
    g·c − rot(g·s) = g·c + rot(g)·s', where s' is s with the two entries of
    each pair swapped and negated (s' = −s for tables built by ``cos_sin``,
    whose pairs share an angle): one more pass of the same dispatch. The
    tables' gradients are g·x and g·rot(x), summed to their shapes.
    """

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        rotate_into(out, x, cos, sin, layout)
        ctx.layout = layout
        ctx.save_for_backward(x, cos, sin)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, cos, sin = ctx.saved_tensors
        layout = ctx.layout
        dx = dcos = dsin = None
        if ctx.needs_input_grad[0]:
            sin_back = _swap_pairs(sin, layout, -1.0, -1.0)
            dx = _Rotation.apply(grad, cos, sin_back, layout)
        if ctx.needs_input_grad[1]:
            dcos = (grad * x).sum_to_size(cos.shape)
        if ctx.needs_input_grad[2]:
            dsin = (grad * _swap_pairs(x, layout, -1.0, 1.0)).sum_to_size(sin.shape)
        return dx, dcos, dsin, None


def rotate(
    x: Tensor, cos: Tensor, sin: Tensor, layout: str, out: Tensor | None = None
) -> Tensor:
    """``x·cos + rot(x)·sin`` by the fast paths, into ``out`` if given (chapter 09).

    Where autograd records (one of the tensors requires grad) the result has
    a backward that takes the fast paths too; ``out`` must then be None.
    Tensors in one dtype and on one device, tables broadcast to ``x``.
    """
    if torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    ):
        return _Rotation.apply(x, cos, sin, layout)
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    rotate_into(out, x, cos, sin, layout)
    return out
