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


# No host synchronisation, CUDA graphs, torch.compile ---------------------------------

SYNCS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy",
         "nonzero", "cpu")


@pytest.fixture
def no_sync(monkeypatch):
    """Make every Tensor method that reads a tensor's values on the host raise while a
    test's block runs: on a GPU each would wait for the device (a synchronisation,
    which a CUDA graph capture refuses)."""
    import contextlib

    @contextlib.contextmanager
    def forbid():
        def refuse(name):
            def method(self, *args, **kwargs):
                raise AssertionError(f"Tensor.{name} read a tensor's values on the host")
            return method

        with pytest.MonkeyPatch.context() as mp:
            for name in SYNCS:
                mp.setattr(torch.Tensor, name, refuse(name))
            yield

    return forbid


@pytest.mark.parametrize("route", ["cpu", "triton", "torch"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_call_reads_a_tensors_values(no_sync, monkeypatch, route, layout):
    # apply_rotary (checked, then replayed, with and without out=, in place) and the
    # Triton entry points never read a value on the host
    x = torch.randn(2, 3, 5, 16).to(DEVICE)
    c, s = (t.to(DEVICE) for t in ropelab.cos_sin(torch.arange(5), ropelab.inv_freq(16),
                                                   layout=layout))
    out = torch.empty_like(x)
    if route == "triton":
        kt = pytest.importorskip("ropelab.kernels.triton")
        if not kt.available():
            pytest.skip("no GPU and TRITON_INTERPRET is not 1")
        monkeypatch.setattr(kernels, "_route", lambda device_type: (kt,))
    elif route == "torch":
        monkeypatch.setattr(kernels, "_route", lambda device_type: ())
    elif DEVICE != "cpu" or not cpu.status()["available"]:
        pytest.skip("the C kernel takes CPU tensors")
    monkeypatch.setattr(kernels, "_calls", {})
    pos = torch.arange(5).to(DEVICE)
    with no_sync():
        for _ in range(2):
            apply_rotary(x, c, s, layout=layout)
            apply_rotary(x, c, s, layout=layout, out=out)
            apply_rotary(out, c, s, layout=layout, out=out)
        if route == "triton":
            kt.apply_rotary(x, c, s, layout=layout, out=out)
            kt.apply_rotary_at(x, c, s, pos, layout=layout)
            kt.apply_rotary_at(x, c, s, pos, layout=layout, out=out)
            kt.apply_rotary_qk(x, x[:, :1], c, s, layout=layout)


def test_the_sync_guard_catches_a_sync(no_sync):
    # the guard above can fail: a check that read a value would be caught
    with no_sync(), pytest.raises(AssertionError, match="read a tensor's values"):
        bool((torch.arange(3) < 0).any())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_decode_step_is_captured_in_a_cuda_graph(layout):
    # one decoding step (q and k of one new token, tables gathered at its position)
    # captured once and replayed with new data: the result follows the data
    g = torch.Generator().manual_seed(3)
    q = torch.randn(8, 32, 1, 128, generator=g).to("cuda", torch.bfloat16)
    c, s = ropelab.cos_sin(torch.arange(4096), ropelab.inv_freq(128), layout=layout,
                           dtype=torch.bfloat16)
    c, s = c.cuda(), s.cuda()
    position = torch.tensor([7], device="cuda")
    out = torch.empty_like(q)
    from ropelab.kernels import triton as kt

    for _ in range(3):  # warm up (compile, plan) outside the capture
        apply_rotary(q, c[7:8], s[7:8], layout=layout, out=out)
        kt.apply_rotary_at(q, c, s, position, layout=layout, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kt.apply_rotary_at(q, c, s, position, layout=layout, out=out)
    for p in (7, 1000, 4095):
        q.copy_(torch.randn(8, 32, 1, 128, generator=g).to("cuda", torch.bfloat16))
        position.fill_(p)
        graph.replay()
        torch.cuda.synchronize()
        want = reference(q, c[p : p + 1], s[p : p + 1], layout, 128)
        assert torch.equal(out.cpu(), want)
    plain = torch.cuda.CUDAGraph()
    with torch.cuda.graph(plain):
        apply_rotary(q, c[7:8], s[7:8], layout=layout, out=out)
    plain.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), reference(q, c[7:8], s[7:8], layout, 128))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_compile_sees_one_operator(layout):
    # fullgraph, no graph break, and apply_rotary is one node: torch.ops.ropelab.rotary
    if kernels._OP is None:
        pytest.skip("torch.library.custom_op needs torch >= 2.4")
    x = torch.randn(2, 3, 5, 16, dtype=torch.float64, requires_grad=True)
    c, s = ropelab.cos_sin(torch.arange(5), ropelab.inv_freq(16, dtype=torch.float64),
                           layout=layout, dtype=torch.float64)
    explain = torch._dynamo.explain(lambda v: apply_rotary(v, c, s, layout=layout))(x)
    assert explain.graph_count == 1 and explain.graph_break_count == 0
    ops = [n.target for g in explain.graphs for n in g.graph.nodes
           if n.op == "call_function"]
    assert ops == [torch.ops.ropelab.rotary.default], ops
    out = torch.empty(2, 3, 5, 16, dtype=torch.float64)
    explain = torch._dynamo.explain(
        lambda v, o: apply_rotary(v, c, s, layout=layout, out=o))(x.detach(), out)
    assert explain.graph_count == 1 and explain.graph_break_count == 0  # out= too
    compiled = torch.compile(lambda v: apply_rotary(v, c, s, layout=layout),
                             fullgraph=True, backend="aot_eager")
    y = compiled(x)
    assert torch.equal(y.detach(), reference(x.detach(), c, s, layout, 16))
    w = torch.randn_like(x)
    (grad,) = torch.autograd.grad((y * w).sum(), x)
    torch.testing.assert_close(grad, formula(w, c, -s, layout, 16), rtol=0, atol=1e-12)
