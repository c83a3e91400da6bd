"""Argument checks shared by the public functions.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong type) with a
message that names the argument and what it got, so that a caller never has
to decode a broadcasting error from deep inside torch.

The policy, held by ``tests/test_bad_input.py``: tensors are dense (sparse
layouts are refused) and real where a dtype is asked for; a number with a
meaning (a base, a factor, a scale) is finite and in its range; an empty batch
or sequence is accepted, an empty head dimension is not; meta tensors are
accepted as shapes; a tensor on another device than the others is refused
where it is data (x, cos, sin, out, q, k), while integer positions and the d/2
frequencies are moved where the computation is (meta, which has no values to
move, is refused). Values are read
only where that is cheap and never forces a device synchronisation: the finite
check of ``inv_freq`` runs where it lives on the CPU.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence, Union

import numpy as np
import torch
from torch import Tensor

LAYOUTS = ("half_split", "interleaved")

PositionsLike = Union[Tensor, Sequence[int], range, int]


def check_dim(dim: object, name: str = "dim") -> int:
    """Return ``dim`` as an int after checking it is a positive even integer."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name} must be an int, got {type(dim).__name__} {dim!r}")
    if dim <= 0:
        raise ValueError(f"{name} must be a positive even integer, got {dim}")
    if dim % 2:
        raise ValueError(
            f"{name} must be even (channels are rotated in pairs), got {dim}"
        )
    return dim


def check_number(
    value: object, name: str, *, minimum: float | None = None, above: bool = False
) -> float:
    """Return ``value`` as a float after checking it is a finite real number
    (not a bool), at least ``minimum`` (greater than it when ``above``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    if minimum is not None and (value <= minimum if above else value < minimum):
        raise ValueError(
            f"{name} must be {'>' if above else '>='} {minimum:g}, got {value:g}")
    return value


def check_table_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """Return ``dtype`` after checking it is a real floating-point torch dtype (the
    tables' cos and sin are fractions: an integer dtype would round them to 0)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a floating-point torch dtype (float32, float64, bfloat16 "
            f"or float16), got {dtype!r}")
    return dtype


def check_tensor(t: object, name: str) -> Tensor:
    """Check ``t`` is a dense (strided) tensor: a sparse one is refused by name
    rather than failing inside torch."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise TypeError(f"{name} must be a dense tensor, got layout {t.layout}; "
                        f"convert with {name}.to_dense()")
    return t


def check_base(base: object) -> float:
    """Return ``base`` as a float after checking it is a finite number > 1."""
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number, got {type(base).__name__} {base!r}")
    base = float(base)
    if not base > 1.0 or base == float("inf"):
        raise ValueError(
            "base must be a finite number greater than 1 (θ_j = base^(-2j/d) must "
            f"decrease), got {base}"
        )
    return base


def check_layout(layout: object) -> str:
    """Return ``layout`` after checking it names one of :data:`LAYOUTS`."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return layout  # type: ignore[return-value]


def check_float_tensor(t: object, name: str) -> Tensor:
    """Check ``t`` is a dense floating-point tensor (real: complex is refused)."""
    check_tensor(t, name)
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    return t


def check_inv_freq(inv_freq: object) -> Tensor:
    """Check ``inv_freq`` is a 1-D float tensor of float32 or wider, finite.

    Zero and negative frequencies are accepted: a pair that stands still (partial
    rotary, p-RoPE) or turns the other way. NaN and infinity are refused where
    ``inv_freq`` lives on the CPU, where reading d/2 values is cheap; on a GPU
    that read would be a host synchronisation, so there they are not checked
    (nor under torch.compile or on the meta device, which has no values).
    """
    inv_freq = check_float_tensor(inv_freq, "inv_freq")
    if inv_freq.ndim != 1 or inv_freq.numel() == 0:
        raise ValueError(
            "inv_freq must be a non-empty 1-D tensor (dim//2,), got shape "
            f"{tuple(inv_freq.shape)}"
        )
    if inv_freq.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            "inv_freq must be float32 or float64 (angles are never computed in a "
            f"narrower type), got {inv_freq.dtype}"
        )
    # one sum first (NaN and ±inf propagate into it; a few µs), the exact test only
    # when it is not finite (an overflowing sum of finite values passes)
    if (inv_freq.device.type == "cpu" and not compiling()
            and not math.isfinite(float(inv_freq.sum()))):
        bad = (~torch.isfinite(inv_freq)).nonzero()
        if bad.numel():
            j = int(bad[0])
            raise ValueError(f"inv_freq must be finite, got {float(inv_freq[j])} at "
                             f"index {j}")
    return inv_freq


def as_positions(
    positions: PositionsLike,
    device: torch.device | None = None,
    *,
    name: str = "positions",
    nonnegative: bool = True,
) -> Tensor:
    """Return integer ``positions`` as an int64 tensor.

    Accepts an integer tensor, an int, a range or a sequence of ints. Float
    positions are refused rather than silently truncated: a position is a
    token index, and fractional positions (as in Position Interpolation) are
    expressed by scaling ``inv_freq`` instead. ``name`` is used in error
    messages; ``nonnegative=False`` admits negative values (distances m − n).
    The sign check reads the values (a synchronisation on a GPU); on the
    ``meta`` device, which has none, it is skipped. Positions are moved to
    ``device`` (a few integers, as a list is), except from the meta device,
    which has no values to move: that is refused.
    """
    if isinstance(positions, Tensor):
        t = check_tensor(positions, name)
        if t.is_meta and device is not None and torch.device(device).type != "meta":
            raise ValueError(f"{name} are on {t.device} (shapes only, no values) but "
                             f"the computation is on {device}")
    elif isinstance(positions, bool):
        raise TypeError(f"{name} must be integers, got bool")
    elif isinstance(positions, (int, range, list, tuple)):
        if isinstance(positions, (range, list, tuple)) and len(positions) == 0:
            t = torch.empty(0, dtype=torch.long)  # (as_tensor would make it float32)
        else:
            t = torch.as_tensor(
                list(positions) if isinstance(positions, range) else positions
            )
    else:
        raise TypeError(
            f"{name} must be an integer tensor, int or sequence of ints, got "
            f"{type(positions).__name__}"
        )
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(
            f"{name} must have an integer dtype (token indices), got {t.dtype}; "
            f"convert explicitly with {name}.long() if the values are whole numbers"
        )
    if nonnegative and t.numel() and not t.is_meta and bool((t < 0).any()):
        # (a meta tensor has no values to check: shapes and devices only)
        raise ValueError(f"{name} must be >= 0, got a minimum of {int(t.min())}")
    t = t.long()
    return t if device is None else t.to(device)


def check_x(x: object, name: str = "x") -> Tensor:
    """Check ``x`` is a dense floating tensor ``(..., seq, dim)`` with a positive
    even ``dim`` (the other axes may be empty)."""
    x = check_float_tensor(x, name)
    if x.ndim < 2:
        raise ValueError(
            f"{name} must have shape (..., seq, dim), got shape {tuple(x.shape)}"
        )
    if x.shape[-1] % 2:
        raise ValueError(
            f"{name}'s last axis (dim) must be even, got shape {tuple(x.shape)}"
        )
    if not x.shape[-1]:
        raise ValueError(
            f"{name}'s last axis (dim) must be positive, got shape {tuple(x.shape)}"
        )
    return x


def span(t: Tensor) -> int:
    """Bytes from ``t``'s first element to just past its last (strides are never
    negative in torch)."""
    if t.is_contiguous():  # the common case, without a Python loop over the axes
        return t.numel() * t.element_size()
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def apart(a: int, na: int, b: int, nb: int) -> bool:
    """Whether the byte ranges ``[a, a + na)`` and ``[b, b + nb)`` are disjoint."""
    return a + na <= b or b + nb <= a


def overlaps(a: Tensor, b: Tensor) -> bool:
    """Whether tensors ``a`` and ``b`` share at least one byte of memory.

    Disjoint slices of one buffer (``buf[..., :8]`` and ``buf[..., 8:]``) do
    not overlap; two storages over one buffer (two ``torch.from_numpy`` views
    of one array) can. Where the two tensors' byte ranges interleave, the exact
    answer comes from marking ``a``'s bytes in a mask over the common range (a
    numpy array of as many bytes as that range holds) and reading it through
    ``b``'s strides: host arithmetic on addresses, never a read of the
    tensors' values (no device synchronisation). A zero tensor
    (``torch._efficientzerotensor``, which autograd makes) has no memory and
    overlaps nothing.
    """
    if a._is_zerotensor() or b._is_zerotensor() or a.is_meta or b.is_meta:
        return False  # no memory to share
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if apart(sa.data_ptr(), sa.nbytes(), sb.data_ptr(), sb.nbytes()):
        return False  # first, the common case: a decode step checks 3 pairs a token
    if not a.numel() or not b.numel() or a.device != b.device:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1, b1 = a0 + span(a), b0 + span(b)
    if apart(a0, a1 - a0, b0, b1 - b0):
        return False
    base = min(a0, b0)
    mask = np.zeros(max(a1, b1) - base, dtype=np.bool_)

    def bytes_of(t: Tensor, first: int) -> np.ndarray:
        es = t.element_size()
        strides = (*(st * es for st in t.stride()), 1)
        return np.lib.stride_tricks.as_strided(
            mask[first - base :], (*t.shape, es), strides, writeable=True
        )

    bytes_of(a, a0)[...] = True
    return bool(bytes_of(b, b0).any())


def same_view(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` are the same elements of the same memory in the same
    order (``out=x``: in place): one data pointer, shape, strides and dtype."""
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype
            and a.device == b.device)


#: Whether torch.compile is tracing (torch >= 2.3; never, on older torch).
compiling = getattr(torch.compiler, "is_compiling", lambda: False)


@functools.lru_cache(maxsize=256)
def _broadcasts(table: torch.Size, x: torch.Size) -> bool:
    """Whether a table of shape ``(..., d)`` broadcasts against ``x`` ``(..., d')``
    (the last axes are checked apart); remembered, as a decoding loop asks each
    step."""
    n = len(table)
    return n <= len(x) and all(
        a == 1 or a == b for a, b in zip(table[:-1], x[len(x) - n : -1])
    )


def _broadcasts_to(table: torch.Size, x: torch.Size) -> bool:
    """:func:`_broadcasts`, past its cache where sizes are symbolic (a tracer's
    SymInts cannot be hashed) and under torch.compile (which warns that it skips
    the cache)."""
    if compiling():
        return _broadcasts.__wrapped__(table, x)
    try:
        return _broadcasts(table, x)
    except TypeError:  # unhashable symbolic sizes
        return _broadcasts.__wrapped__(table, x)


def check_tables(x: Tensor, cos: Tensor, sin: Tensor, rotary_dim: int) -> None:
    """Check cos and sin are float tables ``(..., rotary_dim)`` that broadcast to
    ``x``."""
    xs, device = x.shape, x.device  # (kept cheap: a decode step calls this every token)
    for name, t in (("cos", cos), ("sin", sin)):
        if (not isinstance(t, Tensor) or not t.is_floating_point()
                or t.layout != torch.strided):
            check_float_tensor(t, name)
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but x is on {device}")
    # one shape to check when cos and sin have the same (as they must: checked below)
    shapes = (("cos", cos),) if cos.shape == sin.shape else (("cos", cos), ("sin", sin))
    for name, t in shapes:
        ts = t.shape
        if not ts or ts[-1] != rotary_dim:
            raise ValueError(
                f"{name}'s last axis must be rotary_dim = {rotary_dim} for x "
                f"of shape {tuple(xs)}, got {tuple(ts)}"
            )
        if not _broadcasts_to(ts, xs):
            raise ValueError(
                f"{name} of shape {tuple(ts)} does not broadcast to x of shape "
                f"{tuple(xs)}: keep the position axis where x has it, e.g. "
                "(seq, 1, dim) for x (batch, seq, heads, dim), or "
                "(batch, 1, seq, dim) for per-row positions with x "
                "(batch, heads, seq, dim), i.e. cos.unsqueeze(1) "
                "(transformers' unsqueeze_dim)"
            )
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )


def check_out(out: object, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Check ``out`` can take apply_rotary's result: x's shape, dtype and device; x
    itself (in place) or no byte shared with x; no byte shared with cos or sin."""
    check_tensor(out, "out")
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"out must match x: shape {tuple(x.shape)}, {x.dtype} on "
            f"{x.device}; got shape {tuple(out.shape)}, {out.dtype} on {out.device}"
        )
    # Under torch.compile there are no data pointers to compare, and none is needed:
    # the compiled call computes into a new tensor and then copies it into out.
    if not compiling() and not same_view(out, x) and overlaps(out, x):
        raise ValueError(
            "out must not overlap x unless it is x itself (in place): each output "
            "pair needs both inputs of its pair"
        )
    if not compiling() and (overlaps(out, cos) or overlaps(out, sin)):
        raise ValueError(
            "out must not overlap cos or sin: the tables are read while out is written"
        )
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape)):
        raise ValueError("out must not be broadcast (a stride of 0): each of its "
                         "elements takes one result")
    return out


def check_rotary_dim(rotary_dim: object, x: Tensor) -> int:
    """Return ``rotary_dim`` (default: all of x's channels) after checking it is an
    even int in (0, dim]."""
    dim = x.shape[-1]
    if rotary_dim is None:
        return dim
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(f"rotary_dim must be an int, got {type(rotary_dim).__name__}")
    if not (0 < rotary_dim <= dim and rotary_dim % 2 == 0):
        raise ValueError(f"rotary_dim must be even and in (0, {dim}] for x of shape "
                         f"{tuple(x.shape)}, got {rotary_dim}")
    return rotary_dim


def check_apply(
    x: object, cos: object, sin: object, layout: object, rotary_dim: object,
    out: object,
) -> tuple[Tensor, str, int, Tensor | None]:
    """The one validation of an :func:`~ropelab.apply_rotary` call (and of the Triton
    entry point's): ``(x, layout, rotary_dim, out)`` once every argument is
    checked. Reads no tensor's values (no device synchronisation)."""
    x = check_x(x)
    layout = check_layout(layout)
    rotary_dim = check_rotary_dim(rotary_dim, x)
    check_tables(x, cos, sin, rotary_dim)  # type: ignore[arg-type]
    if out is not None:
        out = check_out(out, x, cos, sin)  # type: ignore[arg-type]
        check_out_grad(out, x, cos, sin)  # type: ignore[arg-type]
    return x, layout, rotary_dim, out  # type: ignore[return-value]


def check_out_grad(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor) -> None:
    """Refuse ``out=`` where autograd records: it cannot track a write into out."""
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad
                                    or sin.requires_grad or out.requires_grad):
        raise ValueError("out= cannot be used when x, cos, sin or out require grad "
                         "(autograd does not track out=)")


def check_triton_x(x: Tensor, dtypes: Sequence[torch.dtype], interpreted: bool) -> None:
    """Check the Triton kernel can take ``x``: a CUDA tensor (any tensor in Triton's
    interpreter) of one of ``dtypes``, with 2 to 4 axes."""
    if not (x.is_cuda or interpreted):
        raise ValueError(f"x is on {x.device}: the Triton kernel needs a CUDA tensor "
                         "(or TRITON_INTERPRET=1 set before importing triton)")
    if x.dtype not in dtypes:
        raise TypeError(f"x must be float32/64, bfloat16 or float16, got {x.dtype}")
    if x.ndim > 4:
        raise ValueError(
            f"x must have 2 to 4 axes (..., seq, dim), got {tuple(x.shape)}")


def check_positions(
    x: Tensor, cos: object, sin: object, positions: object, rotary_dim: int
) -> Tensor:
    """Check ``(n_positions, rotary_dim)`` tables on x's device and integer positions
    that broadcast against x's token axes; return the positions expanded to them.
    Never reads a value (no device synchronisation): positions past the tables are
    the kernel's to handle."""
    for name, t in (("cos", cos), ("sin", sin)):
        t = check_float_tensor(t, name)
        if t.dim() != 2 or t.shape[1] != rotary_dim:
            raise ValueError(f"{name} must be a (n_positions, {rotary_dim}) table, "
                             f"got {tuple(t.shape)}")
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if cos.shape != sin.shape:  # type: ignore[union-attr]
        raise ValueError(f"cos and sin must have the same shape, got "
                         f"{tuple(cos.shape)} and {tuple(sin.shape)}")  # type: ignore
    if (not isinstance(positions, Tensor) or positions.dtype.is_floating_point
            or positions.dtype.is_complex or positions.dtype == torch.bool):
        got = getattr(positions, "dtype", type(positions).__name__)
        raise TypeError(f"positions must be an integer tensor, got {got}")
    if positions.device != x.device:
        raise ValueError(f"positions are on {positions.device} but x is on {x.device}")
    try:
        return positions.expand(x.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast against "
            f"x's token axes {tuple(x.shape[:-1])}"
        ) from None


def check_keys(q: Tensor, k: object, cos: Tensor | None = None,
               sin: Tensor | None = None) -> Tensor:
    """Check ``k`` is like ``q`` (dtype, device, axes, head size) except for the number
    of heads: at most one of the leading axes differs (grouped-query attention).
    Tables given (already checked against q) must be shared by q and k: they
    broadcast against k's leading axes too, so they cannot differ per head."""
    k = check_x(k, "k")
    lead_q = (1,) * (4 - q.dim()) + tuple(q.shape[:-1])
    lead_k = (1,) * (4 - k.dim()) + tuple(k.shape[:-1])
    differ = sum(a != b for a, b in zip(lead_q[:3], lead_k[:3]))
    if (k.dtype != q.dtype or k.device != q.device or k.dim() != q.dim()
            or k.shape[-1] != q.shape[-1] or differ > 1):
        raise ValueError(
            f"k must be like q except for its number of heads: q {tuple(q.shape)} "
            f"{q.dtype}, k {tuple(k.shape)} {k.dtype}")
    for name, table in (("cos", cos), ("sin", sin)):
        if table is None:
            continue
        lead = tuple(table.shape[:-1])
        pad = (1,) * (k.dim() - 1 - len(lead)) + lead
        varies = [t > 1 for t in (1,) * (4 - k.dim()) + pad][:3]
        if (any(t not in (1, n) for t, n in zip(pad, k.shape[:-1]))
                or all(v and n > 1 for v, n in zip(varies, lead_q[:3]))):
            raise ValueError(
                f"{name} {tuple(table.shape)} must be shared by q and k across the "
                f"heads (k {tuple(k.shape)}); per-head tables: rotate q and k with "
                "apply_rotary one at a time")
    return k
