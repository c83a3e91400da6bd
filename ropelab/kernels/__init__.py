"""The one dispatch behind :func:`ropelab.apply_rotary`: every fast path, one contract
(09_performance, 14_triton_kernel).

Every backend implements one internal signature::

    plan(out, x, cos, sin, layout, rotary_dim) -> runner | None
    runner(out, x, cos, sin) -> bool

``x`` is ``(..., dim)``; ``out`` has x's shape, dtype and device and is either
disjoint from x or x itself (in place); ``cos`` and ``sin`` are
``(..., rotary_dim)`` tables in x's dtype, on x's device, that broadcast to
``x[..., :rotary_dim]``, disjoint from ``out``. A runner writes

    out[..., :r] = x[..., :r]·cos + rot(x[..., :r])·sin      (eq. ``rot-apply``)
    out[..., r:] = x[..., r:]

reading every table entry where that formula reads it (element by element:
interleaved tables whose two entries in a pair differ give the plain
formula's result on every backend), in float32 (float64 for float64 inputs)
with one rounding to x's dtype; or returns False having written nothing (the
backend declines: the next one runs). ``plan`` works out what a call of this
signature needs once (it may return None to decline at once); the runner is
what a repeated call replays. The backends are the C kernel
(:mod:`ropelab.kernels.cpu`) for CPU tensors, the Triton kernel
(:mod:`ropelab.kernels.triton`) for CUDA tensors where Triton imports, and the
torch path (:mod:`ropelab.kernels.torch_path`), which takes every call the
others decline and every call while torch traces.

Arguments are validated once, by :func:`ropelab._checks.check_apply`, before
they reach :func:`apply`; nothing here checks them again. Under autograd the
backward pass goes through the same dispatch (the rotation by −θ, see
:class:`_Rotation`); under ``torch.compile`` the call is one custom operator,
``torch.ops.ropelab.rotary``. :func:`kernel_status` says whether the C kernel
is in use here.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

from .._checks import compiling, span
from . import cpu, torch_path

try:
    from torch._C._functorch import is_functorch_wrapped_tensor as _is_functorch_wrapped
except ImportError:  # older torch: no torch.func wrappers to see

    def _is_functorch_wrapped(t: Tensor) -> bool:
        return False


__all__ = ["apply", "kernel_status", "rotate", "rotate_into", "transformed"]

Runner = Callable[[Tensor, Tensor, Tensor, Tensor], bool]


def kernel_status() -> dict[str, object]:
    """Whether :func:`~ropelab.apply_rotary` uses the fused CPU kernel, and why not.

    Builds the kernel if it has not been built (about a second with gcc; once
    per machine, in a private per-user cache, see ``ropelab.kernels.cpu``).
    Returns a dict: ``available`` (bool), ``reason`` (``"compiled"``,
    ``"loaded from cache"`` or why it is unavailable, e.g. no C compiler),
    ``compile_s`` (seconds the compile took in this process, or None),
    ``path`` (the shared library), ``dtypes`` (the dtypes it handles),
    ``openmp`` (whether it splits rows between threads), ``vector_bytes``
    (its widest vector store: 64 with AVX-512, 32 with AVX2, 0 without),
    ``hardware_bf16`` (whether it rounds bfloat16 with AVX512-BF16's
    instruction, to the same bits) and ``replaced`` (which untrusted or corrupt
    library was deleted and rebuilt, or None). On a CUDA GPU apply_rotary
    uses the Triton kernel where Triton imports (``triton_status()``).
    """
    return cpu.status()


def triton_status() -> dict[str, object]:
    """Whether CUDA tensors go through the Triton kernel: ``available`` and
    ``reason`` (Triton's version, or why it does not import)."""
    backend = _triton()
    if backend is None:
        return {"available": False, "reason": _TRITON_ERROR[0]}
    import triton

    return {"available": True, "reason": f"triton {triton.__version__}"}


# Which private torch functions say that torch is recording operations ------------


def _probes() -> tuple[Callable[[], object], ...] | None:
    """The functions :func:`_traced` asks, or None where one is missing (a torch that
    renamed a private API): then every call is taken as traced, and the torch path
    runs, which is right under any tracer, only slower."""
    names = (
        "_len_torch_dispatch_stack",
        "_is_torch_function_mode_enabled",
        "_get_tracing_state",
    )
    found = tuple(getattr(torch._C, n, None) for n in names)
    return found if all(callable(f) for f in found) else None


_PROBES = _probes()


def _traced() -> bool:
    """Whether torch is recording operations: a dispatch or function mode
    (``trace_traffic``, FakeTensor, make_fx), ``torch.compile`` or
    ``torch.jit.trace``. A foreign kernel would be invisible to them, so the
    torch path runs instead."""
    if compiling():  # first: torch.compile cannot trace the private calls below
        return True
    probes = _PROBES
    if probes is None:
        return True
    stack, function_mode, tracing = probes
    return bool(stack() or function_mode() or tracing())


def transformed(*tensors: Tensor) -> bool:
    """Whether forward-mode AD is on or torch.func (vmap, grad, jvp) wraps a tensor.

    The kernels are opaque to both, so the caller runs the plain formula,
    which they see through.
    """
    if compiling():
        return False  # torch.compile sees the custom operator instead
    if getattr(_forward_ad, "_current_level", -1) >= 0:
        return True
    return any(_is_functorch_wrapped(t) for t in tensors)


# The backends, by device type ------------------------------------------------------

_TRITON_ERROR = ["not imported yet"]
_TRITON: list[Any] = []


def _triton() -> Any:
    """The Triton backend module, or None where Triton does not import."""
    if not _TRITON:
        try:
            from . import triton as module
        except ImportError as exc:  # no Triton (or a broken one): the torch path
            _TRITON_ERROR[0] = f"triton does not import: {exc}"
            module = None
        _TRITON.append(module)
    return _TRITON[0]


def _backends(device_type: str) -> tuple[Any, ...]:
    """The native backends to try for a device type, in order (then the torch path)."""
    if device_type == "cpu":
        return (cpu,)
    if device_type == "cuda":
        backend = _triton()
        return () if backend is None else (backend,)
    return ()


# Tests and benchmarks replace this to send a device's tensors elsewhere, e.g. CPU
# tensors to the Triton kernel in its interpreter.
_route: Callable[[str], tuple[Any, ...]] = _backends


def _dispatch(
    out: Tensor,
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    rotary_dim: int,
    native: bool = True,
    first: Any = None,
) -> tuple[str, Runner | None]:
    """Run the first backend that takes the call: (its name, its runner or None).
    ``first``: a backend to try before the device's own (the Triton entry point's)."""
    if native and not _traced():
        backends = _route(x.device.type)
        for backend in backends if first is None else (first, *backends):
            runner = backend.plan(out, x, cos, sin, layout, rotary_dim)
            if runner is not None and runner(out, x, cos, sin):
                return backend.NAME, runner
    torch_path.rotate_into(out, x, cos, sin, layout, rotary_dim)
    return torch_path.NAME, None


def rotate_into(
    out: Tensor,
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    rotary_dim: int | None = None,
    *,
    native: bool = True,
) -> str:
    """out = x·cos + rot(x)·sin on the first ``rotary_dim`` channels, the rest copied;
    returns which backend computed it: ``"cpu"``, ``"triton"`` or ``"torch"``.

    The arguments must satisfy the contract in this module's docstring
    (:func:`ropelab.apply_rotary` checks them). ``native=False`` takes the
    torch path (the benchmark times it).
    """
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    return _dispatch(out, x, cos, sin, layout, r, native)[0]


# Autograd ---------------------------------------------------------------------------


def _rotate_new(
    x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int, first: Any = None
) -> Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _dispatch(out, x, cos, sin, layout, rotary_dim, first=first)
    return out


def _table_grads(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """The tables' gradients, Σ g·x (cos) and Σ g·rot(x) (sin), summed to their
    shapes."""
    x, cos, sin = ctx.saved_tensors
    r, layout = ctx.rotary_dim, ctx.layout
    g, xr = grad[..., :r], x[..., :r]
    dcos = (g * xr).sum_to_size(cos.shape) if ctx.needs_input_grad[1] else None
    dsin = None
    if ctx.needs_input_grad[2]:
        dsin = (g * torch_path.turn(xr, layout)).sum_to_size(sin.shape)
    return dcos, dsin


class _Rotation(torch.autograd.Function):
    """The fast paths under autograd: x turns by θ, the gradient by −θ backward.

    With y = x·c + rot(x)·s, the gradient with respect to x is
    g·c − rot(g·s) = g·c + rot(g)·s', where s' is s with the two entries of
    each pair swapped and negated (s' = −s for tables built by ``cos_sin``,
    whose pairs share an angle): one more pass of the same dispatch, the same
    kernel. The tables' gradients are g·x and g·rot(x), summed to their shapes.
    """

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        layout: str,
        rotary_dim: int,
        first: Any = None,
    ) -> Tensor:
        ctx.layout, ctx.rotary_dim, ctx.first = layout, rotary_dim, first
        ctx.save_for_backward(x, cos, sin)
        return _rotate_new(x, cos, sin, layout, rotary_dim, first)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, cos, sin = ctx.saved_tensors
        dx = None
        if ctx.needs_input_grad[0]:
            sin_back = torch_path.backward_sin(sin, ctx.layout)
            dx = _Rotation.apply(
                grad, cos, sin_back, ctx.layout, ctx.rotary_dim, ctx.first
            )
        return (dx, *_table_grads(ctx, grad), None, None, None)


def rotate(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    out: Tensor | None = None,
    rotary_dim: int | None = None,
) -> Tensor:
    """``x·cos + rot(x)·sin`` by the fast paths, into ``out`` if given (chapter 09).

    Where autograd records (one of the tensors requires grad) the result has
    a backward that takes the fast paths too; ``out`` must then be None.
    Arguments as :func:`rotate_into` takes them.
    """
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    if torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    ):
        return _Rotation.apply(x, cos, sin, layout, r)
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _dispatch(out, x, cos, sin, layout, r)
    return out


# One operator for torch.compile ------------------------------------------------------


def _define_op() -> Any:
    """``torch.ops.ropelab.rotary(x, cos, sin, layout, rotary_dim)``: the dispatch as
    one custom operator, with its autograd formula, so that ``torch.compile``
    records one node instead of tracing the torch path (torch >= 2.4)."""
    custom_op = getattr(torch.library, "custom_op", None)
    if custom_op is None:
        return None

    @custom_op("ropelab::rotary", mutates_args=())
    def rotary(
        x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int
    ) -> Tensor:
        return _rotate_new(x, cos, sin, layout, rotary_dim)

    @rotary.register_fake
    def _(x, cos, sin, layout, rotary_dim):
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    def setup(ctx, inputs, output):
        x, cos, sin, layout, rotary_dim = inputs
        ctx.layout, ctx.rotary_dim = layout, rotary_dim
        ctx.save_for_backward(x, cos, sin)

    def backward(ctx, grad):
        x, cos, sin = ctx.saved_tensors
        dx = None
        if ctx.needs_input_grad[0]:
            sin_back = torch_path.backward_sin(sin, ctx.layout)
            dx = rotary(grad, cos, sin_back, ctx.layout, ctx.rotary_dim)
        return (dx, *_table_grads(ctx, grad), None, None)

    rotary.register_autograd(backward, setup_context=setup)
    return rotary


_OP = _define_op()


# The path of a checked call, and the replay of one like it --------------------------


def apply(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    rotary_dim: int,
    out: Tensor | None,
    first: Any = None,
) -> Tensor:
    """:func:`ropelab.apply_rotary` after its checks: casts the tables to x's dtype,
    then the plain formula (forward-mode AD, torch.func), the custom operator
    (``torch.compile``), autograd's :class:`_Rotation`, or the dispatch; and
    remembers a call that a native backend computed, for :func:`_replay`.
    ``first``: a backend tried before the device's own (then nothing is
    remembered: a later :func:`~ropelab.apply_rotary` call must not replay it)."""
    cast = cos.dtype != x.dtype or sin.dtype != x.dtype
    if cast:
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    grad = torch.is_grad_enabled()
    recording = grad and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    if transformed(x, cos, sin):  # forward AD, torch.func: the formula, which they see
        rotated = torch_path.formula(x, cos, sin, layout, rotary_dim)
    elif compiling() and _OP is not None:  # torch.compile: one node
        rotated = _OP(x, cos, sin, layout, rotary_dim)
    elif recording:  # autograd: the fast paths, forward and backward
        rotated = _Rotation.apply(x, cos, sin, layout, rotary_dim, first)
    else:
        given = out is not None
        if out is None:
            out = torch.empty_like(x, memory_format=torch.contiguous_format)
        _, runner = _dispatch(out, x, cos, sin, layout, rotary_dim, first=first)
        if runner is not None:
            if (
                given
            ):  # a kernel's write, counted as torch's in-place operations count it
                torch.autograd.graph.increment_version(out)
            if not cast and first is None:
                _remember(runner, x, cos, sin, out, layout, rotary_dim, given)
        return out
    return rotated if out is None else out.copy_(rotated)


# signature -> (runner, byte spans of x, cos, sin, out, whether out may be x)
_calls: dict[tuple, tuple[Runner, tuple[int, int, int, int], bool]] = {}


def _signature(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    rotary_dim: int,
    out: Tensor | None,
) -> tuple:
    """What the checks and a backend's plan depend on besides the data pointers: types,
    devices, shapes, strides, dtypes, layout, rotary_dim and out (given or not)."""
    return (
        type(x), x.device, x.shape, x.stride(), x.dtype,
        type(cos), cos.device, cos.shape, cos.stride(), cos.dtype,
        type(sin), sin.device, sin.shape, sin.stride(), sin.dtype, layout, rotary_dim,
        None if out is None else (type(out), out.device, out.shape, out.stride(),
                                  out.dtype),
    )  # fmt: skip


_PLAIN = (Tensor, torch.nn.Parameter)  # subclasses may have no data to point at


def _remember(
    runner: Runner,
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    out: Tensor,
    layout: str,
    rotary_dim: int,
    given: bool,
) -> None:
    """Keep the signature of a checked call that a native backend computed, so that
    :func:`_replay` can take the next call like it."""
    if x.numel() == 0 or any(type(t) not in _PLAIN for t in (x, cos, sin, out)):
        return
    signature = _signature(x, cos, sin, layout, rotary_dim, out if given else None)
    if signature in _calls:  # replay declined it: out's bytes meet the inputs'
        return
    if len(_calls) >= 256:
        _calls.clear()
    in_place = given and out.stride() == x.stride()
    _calls[signature] = (runner, (span(x), span(cos), span(sin), span(out)), in_place)


def _replay(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    layout: str,
    rotary_dim: object,
    out: Tensor | None,
) -> Tensor | None:
    """:func:`~ropelab.apply_rotary`'s result without its checks, for a call like one
    that passed them and that a native backend computed; None for the full path.

    Like means the same :func:`_signature`. What that does not settle is
    checked again: that autograd does not record, torch does not trace,
    forward-mode AD and torch.func are off, no tensor has a negation bit or is
    a zero tensor, and that ``out`` shares no byte with the others (or is x
    itself, for a call remembered in place); where byte ranges meet at all the
    full checks decide. Nothing here reads a tensor's values: a decode step
    stays free of host synchronisation (CUDA graphs can capture it).
    """
    if not _calls:
        return None
    if rotary_dim is None:
        if not isinstance(x, Tensor) or x.ndim < 2:
            return None  # the checks say what is wrong
        rotary_dim = x.shape[-1]
    elif type(rotary_dim) is not int:  # 128.0 == 128, but the checks refuse it
        return None
    try:
        call = _calls.get(_signature(x, cos, sin, layout, rotary_dim, out))
    except (TypeError, AttributeError, RuntimeError):  # not tensors, symbolic sizes,
        return None  # or no strides (sparse): the checks say what is wrong
    if call is None:
        return None
    if torch.is_grad_enabled() and (
        x.requires_grad
        or cos.requires_grad
        or sin.requires_grad
        or (out is not None and out.requires_grad)
    ):
        return None
    if _traced() or getattr(_forward_ad, "_current_level", -1) >= 0:
        return None
    if (
        _is_functorch_wrapped(x)
        or _is_functorch_wrapped(cos)
        or _is_functorch_wrapped(sin)
    ):
        return None
    if (
        x.is_neg()
        or cos.is_neg()
        or sin.is_neg()
        or x._is_zerotensor()
        or cos._is_zerotensor()
        or sin._is_zerotensor()
    ):
        return None  # a lazy negation bit, or no data to point at
    runner, (nx, nc, ns, no), in_place = call
    if out is not None:
        if _is_functorch_wrapped(out) or out.is_neg() or out._is_zerotensor():
            return None
        po, px, pc, ps = out.data_ptr(), x.data_ptr(), cos.data_ptr(), sin.data_ptr()
        end = (
            po + no
        )  # out's bytes [po, end) must miss x's (unless in place) and the tables'
        if not (in_place and po == px) and not (end <= px or px + nx <= po):
            return None  # the byte ranges meet: the full checks decide
        if not ((end <= pc or pc + nc <= po) and (end <= ps or ps + ns <= po)):
            return None
        if not runner(out, x, cos, sin):
            return None
        torch.autograd.graph.increment_version(out)  # a write, as in-place ops count it
        return out
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    return out if runner(out, x, cos, sin) else None
