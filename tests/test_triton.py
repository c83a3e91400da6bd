"""ropelab.kernels.triton: the Triton kernel against the plain formula (chapter 14).

Without a GPU the kernel runs in Triton's interpreter (TRITON_INTERPRET=1,
set by tests/conftest.py before anything imports triton) on CPU tensors: the
same program, executed with numpy. The arithmetic is exactly the plain
formula's (on a GPU too: the kernel is compiled without fused multiply-adds),
so results must be bit-identical to ``ropelab.rotary.rotate`` in
float32/float64 and to its float32 result rounded once in bfloat16/float16.
Shapes are kept small: the interpreter
takes about 4 s for 1,024 rows of 128 channels.
"""

from __future__ import annotations

import pytest
import torch

import ropelab
from ropelab.rotary import rotate

triton = pytest.importorskip(
    "triton", reason="triton is not installed (pip install 'ropelab[triton]')"
)
from ropelab.kernels import triton as kt  # noqa: E402

pytestmark = pytest.mark.skipif(
    not kt.available(), reason="no GPU and TRITON_INTERPRET is not 1"
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
LAYOUTS = ("half_split", "interleaved")
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def reference(x, cos, sin, layout, rotary_dim=None):
    """The plain formula x·cos + rot(x)·sin in float32 (or float64), rounded once,
    with the tables cast to x's dtype first (as apply_rotary casts them).

    ``ropelab.rotary.rotate``: eager torch operations, so no fused
    multiply-add, exactly the arithmetic the kernel does.
    """
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    y = rotate(x[..., :r].to(wide), cos.to(wide), sin.to(wide), layout)
    return torch.cat([y.to(x.dtype), x[..., r:]], dim=-1)


def assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got, want), (got.float() - want.float()).abs().max()


def tables(positions, dim, layout, dtype=torch.float32):
    c, s = ropelab.cos_sin(
        torch.as_tensor(positions), ropelab.inv_freq(dim), layout=layout
    )
    return c.to(DEVICE, dtype), s.to(DEVICE, dtype)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=torch.float64).to(DEVICE, dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_the_formula_in_every_dtype(layout, dtype):
    torch.manual_seed(0)
    x = randn(2, 3, 5, 16, dtype=dtype)
    c, s = tables(
        range(5), 16, layout, torch.float32 if dtype != torch.float64 else dtype
    )
    assert_same(kt.apply_rotary(x, c, s, layout=layout), reference(x, c, s, layout))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim,rotary_dim", [(16, 8), (24, 6), (64, 64), (160, 40)])
def test_partial_rotary_copies_the_rest(layout, dim, rotary_dim):
    torch.manual_seed(1)
    x = randn(1, 2, 3, dim)
    c, s = tables(range(3), rotary_dim, layout)
    y = kt.apply_rotary(x, c, s, layout=layout, rotary_dim=rotary_dim)
    assert torch.equal(y[..., rotary_dim:], x[..., rotary_dim:])
    assert_same(y, reference(x, c, s, layout, rotary_dim))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_axis_order(layout):
    torch.manual_seed(2)
    b, s_, h, d = 2, 5, 3, 8
    c, s = tables(range(s_), d, layout)
    # (batch, seq, heads, dim) with (seq, 1, dim) tables: Meta's and flash-attention's
    x = randn(b, s_, h, d)
    want = reference(x.transpose(1, 2), c, s, layout).transpose(1, 2)
    assert_same(kt.apply_rotary(x, c[:, None], s[:, None], layout=layout), want)
    # the same tensor as a transposed (batch, heads, seq, dim) view
    assert_same(
        kt.apply_rotary(x.transpose(1, 2), c, s, layout=layout), want.transpose(1, 2)
    )
    # packed (tokens, heads, dim) with per-token (tokens, 1, dim) tables
    pos = torch.tensor([0, 1, 2, 0, 1, 0, 1, 2, 3])
    cp, sp = tables(pos, d, layout)
    xp = randn(len(pos), h, d)
    want = reference(xp.transpose(0, 1), cp, sp, layout).transpose(0, 1)
    assert_same(kt.apply_rotary(xp, cp[:, None], sp[:, None], layout=layout), want)
    # per-row positions: (batch, 1, seq, dim) tables
    rows = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    cr, sr = tables(rows, d, layout)
    x4 = randn(b, h, s_, d)
    assert_same(
        kt.apply_rotary(x4, cr[:, None], sr[:, None], layout=layout),
        reference(x4, cr[:, None], sr[:, None], layout),
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_several_row_blocks_and_a_ragged_tail(layout):
    torch.manual_seed(8)
    x = randn(1, 2, 100, 24)  # 100 rows: blocks of 32 and a tail of 4
    c, s = tables(range(100), 8, layout)
    y = kt.apply_rotary(x, c, s, layout=layout, rotary_dim=8)
    assert_same(y, reference(x, c, s, layout, 8))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_strided_inputs_and_tables(layout):
    torch.manual_seed(3)
    big = randn(2, 6, 4, 20)
    x = big[:, ::2, :, 2:18]  # non-contiguous in every axis but the channels' order
    c, s = tables(range(4), 16, layout)
    assert_same(kt.apply_rotary(x, c, s, layout=layout), reference(x, c, s, layout))
    ct = torch.empty(16, 4, device=DEVICE).t().copy_(c)  # a transposed (strided) table
    assert_same(kt.apply_rotary(x, ct, s, layout=layout), reference(x, c, s, layout))
    xs = randn(3, 16, 2).transpose(1, 2)  # channels with stride 2
    c2, s2 = tables(range(2), 16, layout)
    assert_same(
        kt.apply_rotary(xs, c2, s2, layout=layout), reference(xs, c2, s2, layout)
    )


def test_out_and_in_place():
    torch.manual_seed(4)
    x = randn(2, 3, 4, 8)
    c, s = tables(range(4), 8, "half_split")
    want = reference(x, c, s, "half_split")
    out = torch.empty_like(x)
    assert kt.apply_rotary(x, c, s, out=out) is out
    assert_same(out, want)
    y = x.clone()
    assert kt.apply_rotary(y, c, s, out=y) is y
    assert_same(y, want)
    buf = randn(2, 3, 4, 16)  # disjoint halves of one buffer are fine
    kt.apply_rotary(buf[..., :8], c, s, out=buf[..., 8:])
    assert_same(buf[..., 8:], reference(buf[..., :8], c, s, "half_split"))
    with pytest.raises(ValueError, match="out must not overlap x unless it is x itself"):
        kt.apply_rotary(buf[..., :8], c, s, out=buf[..., 4:12])
    with pytest.raises(ValueError, match="require grad"):
        kt.apply_rotary(x.requires_grad_(), c, s, out=out)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_positions_offsets_and_varlen(layout):
    torch.manual_seed(5)
    d, n = 8, 32
    c, s = tables(range(n), d, layout)
    # decoding: one new token per sequence, each at its own offset
    x = randn(3, 2, 1, d)
    offsets = torch.tensor([5, 17, 31], device=DEVICE)
    got = kt.apply_rotary_at(x, c, s, offsets[:, None, None], layout=layout)
    want = reference(x, c[offsets][:, None, None], s[offsets][:, None, None], layout)
    assert_same(got, want)
    # a packed batch of three documents: positions restart at each cu_seqlens boundary
    cu = torch.tensor([0, 3, 7, 10])
    lengths = (cu[1:] - cu[:-1]).tolist()
    pos = torch.cat([torch.arange(k) for k in lengths]).to(DEVICE)
    xp = randn(10, 4, d)
    got = kt.apply_rotary_at(xp, c, s, pos[:, None], layout=layout)
    want = reference(xp.transpose(0, 1), c[pos], s[pos], layout).transpose(0, 1)
    assert_same(got, want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_q_and_k_in_one_launch(layout):
    torch.manual_seed(6)
    q, k = (
        randn(2, 4, 5, 8),
        randn(2, 2, 5, 8),
    )  # grouped-query attention: fewer k heads
    c, s = tables(range(5), 8, layout)
    rq, rk = kt.apply_rotary_qk(q, k, c, s, layout=layout)
    assert_same(rq, reference(q, c, s, layout))
    assert_same(rk, reference(k, c, s, layout))
    qs, ks = randn(2, 5, 4, 8), randn(2, 5, 2, 8)  # (batch, seq, heads, dim)
    rq, rk = kt.apply_rotary_qk(qs, ks, c[:, None], s[:, None], layout=layout)
    assert_same(rk, reference(ks.transpose(1, 2), c, s, layout).transpose(1, 2))
    with pytest.raises(ValueError, match="like q except for its number of heads"):
        kt.apply_rotary_qk(q, randn(2, 2, 6, 8), c, s)
    # per-head tables cannot serve grouped keys: refused by the checks, naming cos
    per_head = c.expand(2, 4, 5, 8).contiguous()
    for keys in (k, q.clone()):  # grouped keys, or as many heads as q
        with pytest.raises(ValueError, match=r"cos \(2, 4, 5, 8\) must be shared by q and k"):
            kt.apply_rotary_qk(q, keys, per_head, s.expand(2, 4, 5, 8), layout=layout)
    c2, s2 = c.expand(2, 1, 5, 8), s.expand(2, 1, 5, 8)
    rq, rk = kt.apply_rotary_qk(q, k, c2, s2, layout=layout)
    assert_same(rk, reference(k, c, s, layout))  # per-batch tables are shared by heads


@pytest.mark.slow  # about 8 s each under the interpreter; make test runs them
@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_is_the_rotation_by_minus_theta(layout):
    torch.manual_seed(7)
    x = randn(1, 1, 3, 4, dtype=torch.float64).requires_grad_()
    # arbitrary tables (pairs need not share an angle): the transpose is exact anyway
    c = randn(3, 4, dtype=torch.float64).requires_grad_()
    s = randn(3, 4, dtype=torch.float64).requires_grad_()
    def fn(x, c, s):
        return kt.apply_rotary(x, c, s, layout=layout)

    assert torch.autograd.gradcheck(fn, (x, c, s))
    q = randn(1, 2, 3, 4, dtype=torch.float64).requires_grad_()
    k = randn(1, 1, 3, 4, dtype=torch.float64).requires_grad_()

    def qk(q, k, c, s):
        return kt.apply_rotary_qk(q, k, c, s, layout=layout)

    assert torch.autograd.gradcheck(qk, (q, k, c, s))
    pos = torch.tensor([2, 0, 1, 2], device=DEVICE)  # row 2 of the tables is read twice
    x4 = randn(1, 1, 4, 4, dtype=torch.float64).requires_grad_()

    def at(x, c, s):
        return kt.apply_rotary_at(x, c, s, pos, layout=layout)

    assert torch.autograd.gradcheck(at, (x4, c, s))
    # apply_rotary's backward is itself a rotation, differentiable again; the launch
    # with positions or keys is differentiable once, and says so
    assert torch.autograd.gradgradcheck(fn, (x, c, s))
    y = kt.apply_rotary_at(x4, c, s, pos, layout=layout)
    (g,) = torch.autograd.grad(y.sum(), x4, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        g.sum().backward()


def test_clear_errors():
    x = randn(1, 2, 3, 8)
    c, s = tables(range(3), 8, "half_split")
    with pytest.raises(ValueError, match="layout must be"):
        kt.apply_rotary(x, c, s, layout="neox")
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        kt.apply_rotary(x, c, s, rotary_dim=3)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        kt.apply_rotary(x.int(), c, s)
    with pytest.raises(ValueError, match="does not broadcast"):
        kt.apply_rotary(x, c[:2], s[:2])
    with pytest.raises(ValueError, match="must match x"):
        kt.apply_rotary(x, c, s, out=torch.empty(1, 2, 3, 6, device=DEVICE))
    # a position past the tables is not checked on the host (a synchronisation): its
    # rotated channels come out NaN, the others as they should
    y = kt.apply_rotary_at(x, c, s, torch.tensor([0, 1, 3], device=DEVICE))
    assert y[..., 2, :].isnan().all() and not y[..., :2, :].isnan().any()
    y = kt.apply_rotary_at(x, c, s, torch.tensor([-1, 1, 2], device=DEVICE))
    assert y[..., 0, :].isnan().all() and not y[..., 1:, :].isnan().any()
    with pytest.raises(TypeError, match="integer tensor"):
        kt.apply_rotary_at(x, c, s, torch.tensor([0.0, 1.0, 2.0], device=DEVICE))


def test_requested_bytes_counts_the_running_kernel():
    x = torch.randn(1, 4, 8, 16)
    c, s = ropelab.cos_sin(torch.arange(8), ropelab.inv_freq(16))
    got = kt.requested_bytes(x, c, s)
    # x once (each pair loaded whole), out once, each table row once for all 4 heads
    assert got == {"x": x.numel() * 4, "cos": c.numel() * 4, "sin": s.numel() * 4,
                   "out": x.numel() * 4}
    assert kt.requested_bytes(x.half(), c, s)["out"] == x.numel() * 2


def test_requested_bytes_without_the_interpreter_switch():
    # On a GPU machine TRITON_INTERPRET is unset and the kernels are compiled
    # functions; the count must still run (in interpreted twins).
    import os
    import subprocess
    import sys

    code = (
        "import torch, ropelab\n"
        "from ropelab.kernels import triton as kt\n"
        "assert type(kt._rotary_kernel).__name__ == 'JITFunction'\n"
        "x = torch.randn(1, 2, 4, 8)\n"
        "c, s = ropelab.cos_sin(torch.arange(4), ropelab.inv_freq(8))\n"
        "print(kt.requested_bytes(x, c, s)['out'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == str(2 * 4 * 8 * 4)


def test_row_blocks_sit_on_grid_axis_0():
    # axis 0 takes up to 2**31 - 1 programs, axes 1 and 2 only 65,535: the blocks of
    # rows (and the outer index) go on axis 0, groups of heads on axis 1. Planned on
    # meta tensors: shapes and strides only, nothing allocated.
    x = torch.empty(2, 32, 2**22, 128, device="meta", dtype=torch.bfloat16)
    c = torch.empty(2**22, 128, device="meta", dtype=torch.bfloat16)
    plan = kt._make_plan(x, x, c, c, None, "half_split", 128)
    rows_per_block = plan.consts["BLOCK_R"]
    assert plan.grid[0] == 2 * 2**22 // rows_per_block > 65535
    assert plan.grid[1] <= 32 and plan.grid[2] == 1
    x = torch.empty(1, 1, 2**38, 4, device="meta")  # 2^32 blocks of 64 rows: too many
    c = torch.empty(2**38, 4, device="meta")
    assert kt._make_plan(x, x, c, c, None, "half_split", 4) is None


def test_a_plan_is_made_once_per_signature(monkeypatch):
    x = randn(2, 3, 5, 16)
    c, s = tables(range(5), 16, "half_split")
    made = []
    real = kt._make_plan
    monkeypatch.setattr(kt, "_make_plan", lambda *a, **k: made.append(1) or real(*a, **k))
    kt._plans.clear()
    for _ in range(3):
        kt.apply_rotary(x, c, s)
        kt.apply_rotary(x + 1, c, s)  # other data, same signature
    assert len(made) == 1
    kt.apply_rotary(x[:, :2], c, s)  # another shape: another plan
    assert len(made) == 2


def bad_calls():
    """(label, args, kwargs) of calls both entry points must refuse alike."""
    x = randn(2, 3, 4, 8)
    c, s = tables(range(4), 8, "half_split")
    buf = torch.zeros(2 * 96 + 8)  # two storages over one buffer: from_numpy of slices
    first = torch.from_numpy(buf.numpy()[:96]).view(2, 3, 4, 4).to(DEVICE)
    shifted = torch.from_numpy(buf.numpy()[2:98]).view(2, 3, 4, 4).to(DEVICE)
    c4, s4 = tables(range(4), 4, "half_split")
    return [
        ("rotary_dim float", (x, c, s), dict(rotary_dim=8.0)),
        ("rotary_dim odd", (x, c, s), dict(rotary_dim=3)),
        ("layout", (x, c, s), dict(layout="neox")),
        ("int x", (x.int(), c, s), {}),
        ("tables do not broadcast", (x, c[:2], s[:2]), {}),
        ("out of another shape", (x, c, s), dict(out=torch.empty(2, 3, 4, 6, device=DEVICE))),
        ("out overlaps x", (x[..., :4], c4, s4), dict(out=x[..., 2:6])),
        ("out is a table", (x[0, 0], c, s), dict(out=s)),
        ("two storages over one buffer", (first, c4, s4), dict(out=shifted)),
        ("out requires grad", (x, c, s), dict(out=torch.empty_like(x).requires_grad_())),
    ]


@pytest.mark.parametrize("case", range(10))
def test_the_triton_entry_point_refuses_what_apply_rotary_refuses(case):
    label, args, kwargs = bad_calls()[case]
    if label == "two storages over one buffer" and DEVICE != "cpu":
        pytest.skip("from_numpy views are CPU memory")
    errors = []
    for fn in (ropelab.apply_rotary, kt.apply_rotary):
        with pytest.raises((TypeError, ValueError)) as info:
            fn(*args, **kwargs)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1], label


def test_both_entry_points_rotate_in_place_alike():
    x = randn(2, 3, 4, 8)
    c, s = tables(range(4), 8, "interleaved")
    a, b = x.clone(), x.clone()
    assert ropelab.apply_rotary(a, c, s, layout="interleaved", out=a) is a
    assert kt.apply_rotary(b, c, s, layout="interleaved", out=b) is b
    assert_same(b, reference(x, c, s, "interleaved"))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


AOT = r'''
import re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ropelab.kernels import triton as kt

fn = kt._rotary_kernel
names = fn.arg_names
channel = ("sx_d", "so_d", "sc_d", "ss_d", "sy_d", "sz_d")  # 1: specialised as constants
found = []
for dtype, layout in (("bf16", "interleaved"), ("fp32", "half_split")):
    sig, consts, attrs = {}, {}, {}
    flags = dict(INTERLEAVED=layout == "interleaved", HAS_POS=False, HAS_X2=True,
                 TABLES_PER_HEAD=False, WIDE64=False, BF16=dtype == "bf16",
                 BLOCK_R=32, BLOCK_H=64, BLOCK_T=0)
    for i, n in enumerate(names):
        if n in flags or n in channel:
            sig[n] = "constexpr"
            consts[(i,)] = flags.get(n, 1)
        else:
            sig[n] = f"*{dtype}" if i < 7 else "i32"
            if n not in ("n_blocks", "n_loop", "n_loop2", "per_prog", "per_prog2",
                         "n_rows", "n_pos"):  # pointers and strides: 16-aligned
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                         options={"enable_fp_fusion": False}).asm["ptx"]
    ops = sorted(set(re.findall(r"(?:ld|st)\.global[.a-z0-9]*", ptx)))
    found.append(f"{dtype} {layout} {' '.join(ops)} fma={'fma.rn' in ptx}")
print("\n".join(found))
'''


@pytest.mark.slow
def test_the_kernel_compiles_for_hopper_with_vector_loads_only():
    # Without a GPU: Triton compiles the kernel to PTX for sm_90 (an H100/H200) with
    # aligned pointers and unit channel strides, as a real launch specialises them.
    # Every global load and store of x, the tables and the result is a 16-byte vector
    # (interleaved pairs too: split in registers), and no fused multiply-add.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", AOT], env=env, capture_output=True,
                         text=True, timeout=600)
    if run.returncode and "ptxas" in run.stderr:
        pytest.skip("this Triton has no ptxas to compile with")
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.split("\n")
    assert lines[0] == "bf16 interleaved ld.global.v4.b32 st.global.v4.b32 fma=False"
    assert lines[1] == "fp32 half_split ld.global.v4.b32 st.global.v4.b32 fma=False"
