"""One contract, every backend: apply_rotary through the C kernel, the torch path and
the Triton kernel, each against the plain formula (ropelab.kernels' contract).

Each case runs the public ``ropelab.apply_rotary`` with the dispatch sent to one
backend (``kernels._route``), twice: the first call takes the full path
(checks, plan), the second replays it. The reference is the plain formula
x·cos + rot(x)·sin written here from channel indices, in float64, on the tables
cast to x's dtype, rounded once to x's dtype; the C and Triton kernels compute
the float32 (float64) formula and round once, so they must equal the formula in
float32 rounded once bit for bit, and the torch path must lie within one
rounding. Tables come equal within each pair (``cos_sin``) and unequal
(random: every entry must be read where the formula reads it). Triton runs in
its interpreter on CPU tensors where there is no GPU (tests/conftest.py).
"""

from __future__ import annotations

import types

import pytest
import torch

import ropelab
from ropelab import apply_rotary, kernels
from ropelab.kernels import cpu

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
LAYOUTS = ["half_split", "interleaved"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
CASES = ["bhsd", "bshd", "per_row", "per_element", "2d", "strided", "odd_offset", "out",
         "in_place", "partial"]


def pairs(dim, layout):
    """The channels (a, b) of each pair: (j, j + dim/2) half-split, (2j, 2j+1)
    interleaved."""
    j = torch.arange(dim // 2)
    return (j, j + dim // 2) if layout == "half_split" else (2 * j, 2 * j + 1)


def formula(x, cos, sin, layout, rotary_dim):
    """y_a = x_a·c_a − x_b·s_a, y_b = x_b·c_b + x_a·s_b for each pair (a, b), every
    table entry used where it stands; the channels past rotary_dim copied. In
    float64 on the values given, on the CPU."""
    x, cos, sin = x.cpu().double(), cos.cpu().double(), sin.cpu().double()
    a, b = pairs(rotary_dim, layout)
    shape = torch.broadcast_shapes(x.shape, (*cos.shape[:-1], x.shape[-1]))
    y = x.expand(shape).clone()
    xa, xb = x[..., a], x[..., b]
    y[..., a] = xa * cos[..., a] - xb * sin[..., a]
    y[..., b] = xb * cos[..., b] + xa * sin[..., b]
    return y


def magnitude(x, cos, sin, layout, rotary_dim):
    """|x_a·c_a| + |x_b·s_a| and |x_b·c_b| + |x_a·s_b|: the scale of each result's
    rounding errors, on the rotated channels."""
    x, cos, sin = x.cpu().double(), cos.cpu().double(), sin.cpu().double()
    a, b = pairs(rotary_dim, layout)
    shape = torch.broadcast_shapes(x.shape, (*cos.shape[:-1], x.shape[-1]))
    m = torch.zeros((*shape[:-1], rotary_dim), dtype=torch.float64)
    xa, xb = x[..., a], x[..., b]
    m[..., a] = (xa * cos[..., a]).abs() + (xb * sin[..., a]).abs()
    m[..., b] = (xb * cos[..., b]).abs() + (xa * sin[..., b]).abs()
    return m


def reference(x, cos, sin, layout, rotary_dim):
    """What a kernel must return: the formula on the tables cast to x's dtype, computed
    in float32 (float64 for float64), rounded once to x's dtype."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    f = formula(x.to(wide), cos.to(wide), sin.to(wide), layout, rotary_dim)
    if wide == torch.float32:  # the float32 computation: two products and a sum,
        xa = x.cpu().float()   # each rounded in float32 (no fused multiply-add)
        a, b = pairs(rotary_dim, layout)
        c, s = cos.cpu().float(), sin.cpu().float()
        f = x.cpu().float().expand(f.shape).clone()
        f[..., a] = xa[..., a] * c[..., a] - xa[..., b] * s[..., a]
        f[..., b] = xa[..., b] * c[..., b] + xa[..., a] * s[..., b]
    return f.to(x.dtype)


def randn(*shape, dtype, generator):
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def make_case(case, layout, dtype, equal_pairs):
    """(x, cos, sin, rotary_dim, out or None, in_place), on the CPU."""
    g = torch.Generator().manual_seed(hash((case, layout, str(dtype), equal_pairs)) % 2**31)
    dim, rotary_dim = (24, 8) if case == "partial" else (16, 16)

    def tables(lead):
        if equal_pairs:
            pos = torch.arange(int(torch.tensor(lead).prod())).view(lead) * 37 + 5
            return ropelab.cos_sin(pos, ropelab.inv_freq(rotary_dim), layout=layout,
                                   dtype=dtype)
        return (randn(*lead, rotary_dim, dtype=dtype, generator=g),
                randn(*lead, rotary_dim, dtype=dtype, generator=g))

    out, in_place = None, False
    if case == "bshd":  # (batch, seq, heads, dim), tables (seq, 1, dim)
        x = randn(2, 5, 3, dim, dtype=dtype, generator=g)
        c, s = tables((5,))
        c, s = c[:, None], s[:, None]
    elif case == "per_row":  # (batch, 1, seq, dim): per-row positions
        x = randn(2, 3, 5, dim, dtype=dtype, generator=g)
        c, s = tables((2, 5))
        c, s = c[:, None], s[:, None]
    elif case == "per_element":  # tables as big as x: they vary along every axis
        x = randn(2, 3, 5, dim, dtype=dtype, generator=g)
        c, s = tables((2, 3, 5))
    elif case == "2d":
        x = randn(5, dim, dtype=dtype, generator=g)
        c, s = tables((5,))
    elif case == "strided":  # gaps in every axis but the channels', tables' rows too
        x = randn(2, 6, 5, dim + 4, dtype=dtype, generator=g)[:, ::2, :, 2 : 2 + dim]
        c, s = tables((5,))
        c, s = (torch.empty(5, rotary_dim + 6, dtype=dtype)[:, 3:-3].copy_(t) for t in (c, s))
    elif case == "odd_offset":  # storage offsets of one element, strides contiguous
        n = 2 * 3 * 5 * dim
        x = randn(n + 1, dtype=dtype, generator=g)[1:].view(2, 3, 5, dim)
        c0, s0 = tables((5,))
        c = torch.empty(5 * rotary_dim + 1, dtype=dtype)[1:].view(5, rotary_dim).copy_(c0)
        s = torch.empty(5 * rotary_dim + 1, dtype=dtype)[1:].view(5, rotary_dim).copy_(s0)
        out = torch.empty(n + 1, dtype=dtype)[1:].view(2, 3, 5, dim)
    else:  # bhsd, out, in_place, partial: (batch, heads, seq, dim), tables (seq, dim)
        x = randn(2, 3, 5, dim, dtype=dtype, generator=g)
        c, s = tables((5,))
        if case == "out":
            out = torch.empty_like(x)
        in_place = case == "in_place"
    return x, c, s, rotary_dim, out, in_place


@pytest.fixture(params=["cpu", "torch", "triton"])
def backend(request, monkeypatch):
    """Send every call of the test's device to one backend; after the test, check that
    a native backend did compute (it may decline some calls, as the torch path
    then does them)."""
    name = request.param
    if name == "cpu":
        if DEVICE != "cpu":
            pytest.skip("the C kernel takes CPU tensors")
        if not cpu.status()["available"]:
            pytest.skip(f"the C kernel is unavailable: {cpu.status()['reason']}")
        module = cpu
    elif name == "triton":
        pytest.importorskip("triton", reason="triton is not installed")
        from ropelab.kernels import triton as module

        if not module.available():
            pytest.skip("no GPU and TRITON_INTERPRET is not 1")
    else:
        module = None
    ran: list[bool] = []

    def plan(*args):
        runner = module.plan(*args)
        if runner is None:
            return None
        return lambda *a: ran.append(runner(*a)) or ran[-1]

    wrapped = () if module is None else (types.SimpleNamespace(NAME=name, plan=plan),)
    monkeypatch.setattr(kernels, "_route", lambda device_type: wrapped)
    monkeypatch.setattr(kernels, "_calls", {})
    yield types.SimpleNamespace(name=name, ran=ran)
    if module is not None:
        assert any(ran), f"the {name} backend declined every call: it was not tested"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("equal_pairs", [True, False], ids=["equal", "unequal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_backend_computes_the_plain_formula(backend, layout, dtype, equal_pairs,
                                                  case):
    x, c, s, r, out, in_place = make_case(case, layout, dtype, equal_pairs)
    x, c, s = x.to(DEVICE), c.to(DEVICE), s.to(DEVICE)
    out = None if out is None else out.to(DEVICE)
    want = reference(x, c, s, layout, r)
    for call in ("checked", "replayed"):
        before = len(backend.ran)
        if in_place:
            target = x.clone()
            got = apply_rotary(target, c, s, layout=layout, rotary_dim=r, out=target)
            assert got is target
        else:
            got = apply_rotary(x, c, s, layout=layout, rotary_dim=r, out=out)
            assert out is None or got is out
        assert got.shape == x.shape and got.dtype == dtype and got.device == x.device
        got = got.cpu()
        if len(backend.ran) == before:  # the torch path: within one rounding a term
            assert backend.name == "torch" or (dtype == torch.float16 and backend.name
                                               == "cpu"), "a native backend declined"
            eps = torch.finfo(dtype).eps
            size = magnitude(x, c.to(dtype), s.to(dtype), layout, r)
            err = (got[..., :r].double() - formula(x, c.to(dtype), s.to(dtype), layout, r)
                   [..., :r]).abs()
            assert bool((err <= 2 * eps * size + 1e-300).all()), (call, float(err.max()))
            assert torch.equal(got[..., r:], x.cpu()[..., r:])
        else:
            assert torch.equal(got, want), (call, (got.double() - want.double()).abs().max())
    if backend.name != "torch" and case in ("out", "odd_offset", "bhsd"):
        assert kernels._calls, "a native backend's call was not remembered for replay"
