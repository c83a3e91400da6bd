"""The fast paths behind :func:`ropelab.apply_rotary` (09_performance).

:func:`rotate_into` is the one dispatch: it writes ``x·cos + rot(x)·sin``
into ``out`` with the fused CPU kernel (:mod:`ropelab.kernels.cpu`) where it
applies, else with the torch path (:mod:`ropelab.kernels.torch_path`).
:func:`kernel_status` says whether the CPU kernel is in use here.
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

from . import cpu, torch_path

try:
    from torch._C._functorch import is_functorch_wrapped_tensor as _is_functorch_wrapped
except ImportError:  # older torch: no torch.func wrappers to see
    def _is_functorch_wrapped(t: Tensor) -> bool:
        return False

__all__ = ["kernel_status", "needs_reference", "rotate_into"]


def kernel_status() -> dict[str, object]:
    """Whether :func:`~ropelab.apply_rotary` uses the fused CPU kernel here, and if not, why.

    Builds the kernel if it has not been built: 0.7 s with gcc 12 on an idle
    2-core machine, 4.4 s was seen on a loaded one; once per machine, in a
    private per-user cache (see :mod:`ropelab.kernels.cpu`). Returns a dict:
    ``available`` (bool), ``reason`` (``"compiled"``, ``"loaded from cache"``
    or why it is unavailable, e.g. no C compiler), ``compile_s`` (seconds the
    compile took in this process, or None), ``path`` (the shared library),
    ``dtypes`` (the dtypes it handles), ``openmp`` (whether it splits rows
    between threads) and ``replaced`` (which untrusted or corrupt library was
    deleted and rebuilt, or None). Where it is unavailable, and on a GPU,
    apply_rotary takes its torch path (09_performance).
    """
    return cpu.status()


def rotate_into(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, *, native: bool = True) -> None:
    """out = x·cos + rot(x)·sin without the temporaries of the plain formula (09_performance).

    On the CPU this is one pass of the fused C kernel: bit-identical to the
    plain formula in float32 and float64, and in bfloat16 and float16 the
    float32 formula with its result rounded to the 16-bit type. Elsewhere (a
    GPU, no C compiler, ``native=False``, or while torch traces the call) it
    is :func:`ropelab.kernels.torch_path.rotate_into`.
    """
    if native and cpu.rotate(out, x, cos, sin, layout):
        return
    torch_path.rotate_into(out, x, cos, sin, layout)


def needs_reference(*tensors: Tensor) -> bool:
    """Whether the caller must run the plain formula, which autograd and torch's transforms see through.

    True when autograd records (one of ``tensors`` requires grad), a
    forward-mode AD level is active, or torch.func (vmap, grad, jvp) wraps one
    of ``tensors``: the fast paths write ``out=`` buffers (which autograd does
    not track) and the C kernel is opaque to the transforms.
    """
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return True
    if getattr(_forward_ad, "_current_level", -1) >= 0:
        return True
    return any(_is_functorch_wrapped(t) for t in tensors)
