"""Tests for ropelab.kernels.cpu: the fused CPU kernel behind apply_rotary (09_performance).

The kernel must equal the plain formula bit for bit in float32 and float64,
equal the float32 formula rounded once in bfloat16 and float16, split rows
between threads without changing a bit, decline what it cannot do, and leave
apply_rotary working (through the torch path) wherever it cannot be built.
"""

import ctypes
import json
import os
import stat
import subprocess
import sys
import time
import warnings

import pytest
import torch

from ropelab import kernels
from ropelab.kernels import cpu as _native
from ropelab import apply_rotary, cos_sin, inv_freq, rotate_half
from ropelab.book.cost import trace_traffic
from ropelab.rotary import rotate_interleaved

LAYOUTS = ["half_split", "interleaved"]

needs_kernel = pytest.mark.skipif(not _native.status()["available"],
                                  reason=f"fused kernel unavailable: {_native.status()['reason']}")


def plain(x, cos, sin, layout):
    rot = rotate_half if layout == "half_split" else rotate_interleaved
    return x * cos + rot(x) * sin


def tables(positions, dim, layout, dtype):
    return cos_sin(positions, inv_freq(dim), layout=layout, dtype=dtype)


def run_kernel(x, cos, sin, layout):
    out = torch.empty_like(x)
    assert _native.rotate(out, x, cos, sin, layout), "the kernel declined"
    return out


def streamed() -> bool:
    """Whether the last kernel call wrote out with non-temporal stores."""
    return bool(_native._last_path & _native.STREAMED)


def blocked() -> bool:
    """Whether the last kernel call went through the positions in blocks."""
    return bool(_native._last_path & _native.BLOCKED)


def may_stream(out, layout) -> bool:
    """The rule for non-temporal stores, once out is big enough: float32 or bfloat16,
    a vector build, out aligned to the vector, and whole vectors in every row (each
    half of it, half-split) and in every stride."""
    vector = _native.status()["vector_bytes"]
    if out.dtype not in (torch.float32, torch.bfloat16) or not vector:
        return False
    lanes, h = vector // out.element_size(), out.shape[-1] // 2
    return (
        out.data_ptr() % vector == 0
        and (layout == "interleaved" or h % lanes == 0)
        and 2 * h % lanes == 0
        and all(st % lanes == 0 for st, n in zip(out.stride()[:-1], out.shape) if n > 1)
    )


@needs_kernel
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["prefill", "decode", "per_row", "transposed", "sliced_rows", "2d", "5d"])
def test_bit_identical_to_plain_formula(layout, dtype, case):
    g = torch.Generator().manual_seed(0)
    pos = torch.arange(37) + 1000
    if case == "prefill":
        x = torch.randn(2, 3, 37, 64, generator=g, dtype=dtype)
        cos, sin = tables(pos, 64, layout, dtype)
    elif case == "decode":  # one table row for every sequence and head
        x = torch.randn(9, 3, 1, 64, generator=g, dtype=dtype)
        cos, sin = tables(torch.tensor([5000]), 64, layout, dtype)
    elif case == "per_row":  # (batch, 1, seq, dim) tables from per-row positions
        x = torch.randn(2, 3, 37, 64, generator=g, dtype=dtype)
        cos, sin = tables(torch.stack((pos, pos * 3)), 64, layout, dtype)
        cos, sin = cos[:, None], sin[:, None]
    elif case == "transposed":  # seq-major storage, as after a (batch, seq, heads, dim) projection
        x = torch.randn(2, 37, 3, 64, generator=g, dtype=dtype).transpose(1, 2)
        cos, sin = tables(pos, 64, layout, dtype)
    elif case == "sliced_rows":  # rows with a gap between them (the first 64 of 80 channels)
        x = torch.randn(2, 3, 37, 80, generator=g, dtype=dtype)[..., :64]
        cos, sin = tables(pos, 64, layout, dtype)
    elif case == "2d":
        x = torch.randn(37, 64, generator=g, dtype=dtype)
        cos, sin = tables(pos, 64, layout, dtype)
    else:  # five leading axes with gaps between them, so none merge: more than the kernel's four
        x = torch.randn(10_000, generator=g, dtype=dtype).as_strided((2, 2, 2, 2, 2, 16), (5000, 2000, 700, 300, 100, 1))
        cos, sin = tables(torch.arange(2), 16, layout, dtype)
    if case == "5d":  # declined: apply_rotary takes the torch path, equal within rounding
        assert not _native.rotate(torch.empty_like(x), x, cos, sin, layout)
        torch.testing.assert_close(apply_rotary(x, cos, sin, layout=layout), plain(x, cos, sin, layout))
        return
    assert torch.equal(run_kernel(x, cos, sin, layout), plain(x, cos, sin, layout))
    assert torch.equal(apply_rotary(x, cos, sin, layout=layout), plain(x, cos, sin, layout))


@needs_kernel
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
# 20: a row that is not a whole number of 8-wide vectors (the scalar tail); 2050: the
# special values in the widest vectors the build has, then the tail (through narrower
# vectors where the remainder holds one)
@pytest.mark.parametrize("dim", [20, 32, 2050])
def test_16_bit_is_the_float32_formula_rounded_once(layout, dtype, dim):
    if dtype == torch.float16 and "float16" not in _native.status()["dtypes"]:
        pytest.skip("this compiler has no _Float16: float16 takes the torch path")
    g = torch.Generator().manual_seed(1)
    x = (8 * torch.randn(3, 4, 29, dim, generator=g)).to(dtype)
    big = torch.finfo(dtype).max
    x[0, 0, 0, :6] = torch.tensor([float("inf"), float("-inf"), float("nan"), big, -big, 0.0])
    x[0, 0, 1, :4] = torch.tensor([torch.finfo(dtype).tiny, torch.finfo(dtype).smallest_normal / 8, -0.0, 1.0])
    # a row of tiny values in both halves: float32 results below the normal range, which
    # AVX512-BF16's rounding instruction would take for zeros
    x[0, 0, 2] = torch.finfo(dtype).smallest_normal * torch.linspace(-4, 4, dim)
    cos, sin = tables(torch.arange(29) * 97, dim, layout, dtype)
    got = run_kernel(x, cos, sin, layout)
    want = plain(x.float(), cos.float(), sin.float(), layout).to(dtype)  # round to nearest even, once
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16))  # bits, signed zeros too


@needs_kernel
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
# prefill; a decoding step (one table row for every row of x, big enough to be split);
# fewer positions than threads (the rows are split instead); and tables as big as x,
# 21 rows that two threads split in the middle of a run of 7
@pytest.mark.parametrize("seq", [300, 1, 3, "unbroadcast"])
def test_threads_change_no_bit(layout, dtype, seq):
    g = torch.Generator().manual_seed(2)
    if seq == "unbroadcast":
        x = torch.randn(3, 7, 4096, generator=g).to(dtype)
        cos, sin = tables(torch.arange(24).view(3, 8) * 5, 4096, layout, dtype)
        cos, sin = cos[:, :7], sin[:, :7]  # strides that keep the two axes apart
    else:
        x = torch.randn(128, 8, seq, 64, generator=g).to(dtype)
        cos, sin = tables(torch.arange(seq) + 77, 64, layout, dtype)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run_kernel(x, cos, sin, layout)
        blocked_one = blocked()
        torch.set_num_threads(max(4, before))
        many = run_kernel(x, cos, sin, layout)
        blocked_many = blocked()
    finally:
        torch.set_num_threads(before)
    want = plain(x.float(), cos.float(), sin.float(), layout).to(dtype)
    assert torch.equal(one, many) and torch.equal(one, want)
    if seq == 3:  # one thread takes the 3 positions in a block, 4 threads split rows
        assert blocked_one and not blocked_many


@needs_kernel
def test_declines_what_it_cannot_do():
    x = torch.randn(2, 5, 8)
    cos, sin = tables(torch.arange(5), 8, "half_split", torch.float32)
    out = torch.empty_like(x)
    assert not _native.rotate(out, x, cos.double(), sin.double(), "half_split")  # tables in another dtype
    assert not _native.rotate(out.double(), x, cos, sin, "half_split")  # out in another dtype
    assert not _native.rotate(out[..., ::2].expand(2, 5, 4), x[..., ::2], cos[..., :4], sin[..., :4],
                              "half_split")  # rows not contiguous
    assert not _native.rotate(out, torch._neg_view(x), cos, sin, "half_split")  # a lazy negation bit
    assert not _native.rotate(out[:1].expand(2, 5, 8), x, cos, sin, "half_split")  # out overlaps itself
    zero = torch._efficientzerotensor(5, 8)  # no data to point at: the torch path handles it
    assert not _native.rotate(out, x, zero, sin, "half_split")
    torch.testing.assert_close(apply_rotary(x, zero, sin), rotate_half(x) * sin)
    # while torch traces, the kernel steps aside so the trace sees the torch operations
    traced = trace_traffic(lambda: apply_rotary(x, cos, sin), x)
    assert traced.ops == ("mul", "addcmul_", "addcmul_")
    assert _native.rotate(out, x, cos, sin, "half_split")
    assert _native.rotate(x[:0], x[:0], cos, sin, "half_split")  # nothing to do is done


def test_kernel_is_available_where_required():
    # CI sets ROPELAB_REQUIRE_KERNEL=1 (.ci/run): there the kernel tests must run, not skip.
    if os.environ.get("ROPELAB_REQUIRE_KERNEL") != "1":
        pytest.skip("ROPELAB_REQUIRE_KERNEL is not set")
    status = _native.status()
    assert status["available"], f"the fused kernel did not build: {status['reason']}"
    assert set(status["dtypes"]) >= {"float32", "float64", "bfloat16"} and status["openmp"]


def test_coalesce_merges_contiguous_axes_and_drops_size_one():
    # (batch 2, heads 3, seq 5) with contiguous x and a (seq, dim) table broadcast over batch and heads
    sizes, strides = _native._coalesce([2, 3, 5], [[120, 40, 8], [120, 40, 8], [0, 0, 8]])
    assert sizes == [6, 5] and strides == [[40, 8], [40, 8], [0, 8]]
    sizes, strides = _native._coalesce([4, 1, 3], [[3, 3, 1], [0, 0, 0]])  # decode: one table row
    assert sizes == [12] and strides == [[1], [0]]
    sizes, strides = _native._coalesce([2, 3], [[100, 8], [24, 8]])  # a gap between batches in x
    assert sizes == [2, 3] and strides == [[100, 8], [24, 8]]


def _fresh_state(monkeypatch, tmp_path, **env):
    monkeypatch.setattr(_native, "_state", {})
    monkeypatch.setattr(kernels, "_calls", {})  # no call replayed on an earlier library
    monkeypatch.setattr(_native, "_warned", False)
    monkeypatch.setenv("ROPELAB_CACHE_DIR", str(tmp_path))
    for key, value in env.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("why, setup", [
    ("no C compiler found", lambda mp: mp.setattr(_native, "_compiler", lambda: None)),
    ("failed", lambda mp: mp.setenv("CC", "false")),  # a compiler that exists and fails
    ("disabled by ROPELAB_NATIVE", lambda mp: mp.setenv("ROPELAB_NATIVE", "0")),
])
def test_without_a_working_compiler_apply_rotary_takes_the_torch_path(monkeypatch, tmp_path, why, setup):
    _fresh_state(monkeypatch, tmp_path)
    setup(monkeypatch)
    status = _native.status()
    assert status["available"] is False and why in status["reason"]
    # nothing half-built left in the cache (the build's lock file may stay)
    assert [p.name for p in tmp_path.iterdir() if p.name != ".lock"] == []
    g = torch.Generator().manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for layout in LAYOUTS:
            x = torch.randn(2, 3, 7, 16, generator=g)
            cos, sin = tables(torch.arange(7), 16, layout, torch.float32)
            assert not _native.rotate(torch.empty_like(x), x, cos, sin, layout)
            torch.testing.assert_close(apply_rotary(x, cos, sin, layout=layout), plain(x, cos, sin, layout))
    # one warning in the process, naming the reason; none when the user turned the kernel off
    expected = 0 if why == "disabled by ROPELAB_NATIVE" else 1
    assert [str(w.message) for w in caught if why in str(w.message)] == [str(w.message) for w in caught]
    assert len(caught) == expected


def _compiler_refusing(tmp_path, *flags):
    """A stand-in for a compiler that does not know ``flags``: the system one, failing
    when given any of them."""
    cc = tmp_path / "refusing-cc"
    cc.write_text(f'#!/bin/sh\nfor a in "$@"; do case "$a" in {"|".join(flags)}) exit 1;; esac; done\n'
                  f'exec {_native._compiler()[0]} "$@"\n')
    cc.chmod(0o755)
    return str(cc)


@needs_kernel
def test_a_compiler_without_openmp_or_avx2_still_builds_a_serial_kernel(monkeypatch, tmp_path):
    # a stand-in for compilers without OpenMP (Apple's clang) or without the x86 vector flags
    cc = _compiler_refusing(tmp_path, "-fopenmp", "-mavx2")
    _fresh_state(monkeypatch, tmp_path / "cache", CC=cc)
    status = _native.status()
    assert status["available"] and status["openmp"] is False and "bfloat16" in status["dtypes"]
    g = torch.Generator().manual_seed(5)
    for layout in LAYOUTS:
        x = torch.randn(4, 8, 100, 64, generator=g)
        cos, sin = tables(torch.arange(100), 64, layout, torch.float32)
        assert torch.equal(run_kernel(x, cos, sin, layout), plain(x, cos, sin, layout))


@needs_kernel
def test_a_compiler_without_bf16_or_float16_keeps_its_vectors(monkeypatch, tmp_path):
    # an older compiler (gcc <= 9) knows neither -mavx512bf16 nor _Float16: the build
    # keeps the widest vectors it does know and OpenMP, and rounds bfloat16 in software
    cc = _compiler_refusing(tmp_path, "-mavx512bf16", "-DROPELAB_HAVE_FLOAT16")
    _fresh_state(monkeypatch, tmp_path / "cache", CC=cc)
    status = _native.status()
    isa = _native._isa_flags()
    assert status["available"] and status["openmp"] and not status["hardware_bf16"]
    assert status["vector_bytes"] == (64 if "-mavx512f" in isa else 32 if isa else 0)
    assert "float16" not in status["dtypes"]
    x = torch.randn(4, 8, 30, 64, generator=torch.Generator().manual_seed(6)).bfloat16()
    for layout in LAYOUTS:
        cos, sin = tables(torch.arange(30), 64, layout, torch.bfloat16)
        want = plain(x.float(), cos.float(), sin.float(), layout).bfloat16()
        assert torch.equal(run_kernel(x, cos, sin, layout), want)


@needs_kernel
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [16, 17])
def test_small_and_large_calls_give_the_formulas_bits(layout, dtype, heads):
    # out of 4 MiB or less (16 bf16 heads of 1,024 x 128) goes in blocks of 16 positions,
    # bfloat16 one head at a time; more goes in blocks of half the L2, two heads side by side
    g = torch.Generator().manual_seed(8)
    positions = 1024 if dtype == torch.bfloat16 else 512  # heads x 256 KiB either way
    x = torch.randn(1, heads, positions, 128, generator=g).to(dtype)
    cos, sin = tables(torch.arange(x.shape[2]) * 3, 128, layout, dtype)
    wide = plain(x.float(), cos.float(), sin.float(), layout).to(dtype)
    got = run_kernel(x, cos, sin, layout)
    assert blocked()
    assert torch.equal(got, wide if dtype == torch.bfloat16 else plain(x, cos, sin, layout))


_SET_CSR = r"""
#include <xmmintrin.h>
unsigned get_csr(void) { return _mm_getcsr(); }
void set_csr(unsigned v) { _mm_setcsr(v); }
"""


@needs_kernel
@pytest.mark.skipif(not _native._isa_flags(), reason="x86 vector builds only")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_denormals_are_zero_mode_changes_no_bit_of_normal_inputs(tmp_path, layout):
    # with the MXCSR's denormals-are-zero bit (and not flush-to-zero), normal inputs
    # whose results are subnormal must round as without it; AVX512-BF16's rounding
    # flushes subnormals, and a subnormal test that DAZ blinds would let it through
    src, lib_path = tmp_path / "csr.c", tmp_path / "csr.so"
    src.write_text(_SET_CSR)
    subprocess.run([*_native._compiler(), "-shared", "-fPIC", "-O1", str(src), "-o", str(lib_path)],
                   check=True, capture_output=True)
    csr = ctypes.CDLL(str(lib_path))
    csr.get_csr.restype = ctypes.c_uint
    # 1.5 * 2^-126 paired with 2^-126 (half-split: the halves; interleaved: even and odd
    # channels), cos = sin = 1: the first channel of each pair is 2^-127, subnormal
    big = torch.arange(128) < 64 if layout == "half_split" else torch.arange(128) % 2 == 0
    x = torch.where(big, 1.5, 1.0)[None].mul(2.0 ** -126).bfloat16()
    one = torch.ones(1, 128).bfloat16()
    before = run_kernel(x, one, one, layout)
    old = csr.get_csr()
    try:
        csr.set_csr(old | 0x40)  # DAZ on, FTZ (0x8000) as it was
        during = run_kernel(x, one, one, layout)  # one row: on this thread
    finally:
        csr.set_csr(old)
    assert before.view(torch.int16).abs().max() > 0  # subnormal results, not zeros
    assert torch.equal(during.view(torch.int16), before.view(torch.int16))


@needs_kernel
@pytest.mark.parametrize("isa", ["avx512bf16", "avx512", "avx2", "none"])
def test_every_vector_width_gives_the_formulas_bits(monkeypatch, tmp_path, isa):
    # the AVX-512 rows hand their remainder to the AVX2 rows, those to the scalar loop:
    # each build the machine can run must give the same bits, with streamed stores
    # where the rows are whole vectors and plain ones with the remainders (dim 112);
    # with and without AVX512-BF16's rounding instruction
    flags = {"avx512bf16": _native._AVX512_BF16, "avx512": _native._AVX512,
             "avx2": _native._AVX2, "none": ()}[isa]  # fmt: skip
    if isa == "avx512bf16" and _native._isa_flags() != list(flags):
        pytest.skip("this CPU has no AVX512-BF16")
    if isa == "avx512" and _native._isa_flags()[: len(flags)] != list(flags):
        pytest.skip("this CPU has no AVX-512")
    if isa == "avx2" and not _native._isa_flags():
        pytest.skip("this CPU has no AVX2")
    monkeypatch.setattr(_native, "_isa_flags", lambda: list(flags))
    monkeypatch.setattr(_native, "_STREAM_FROM", 1)
    _fresh_state(monkeypatch, tmp_path)
    assert _native.status()["available"]
    assert _native.status()["vector_bytes"] == {"avx512": 64, "avx2": 32}.get(isa[:6], 0)
    assert _native.status()["hardware_bf16"] == (isa == "avx512bf16")
    g = torch.Generator().manual_seed(9)
    built = _native.status()["dtypes"]
    assert {"float32", "float64", "bfloat16"} <= set(built)
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        if str(dtype).removeprefix("torch.") not in built:
            continue
        for layout in LAYOUTS:
            for dim in (128, 112):
                # drawn in float64 for float64: all 53 bits, so that a fused multiply-add would show
                x = torch.randn(2, 3, 40, dim, generator=g, dtype=torch.float64).to(dtype)
                x[0, 0, 0] = torch.finfo(dtype).smallest_normal * torch.linspace(-4, 4, dim)
                cos, sin = tables(torch.arange(40) * 7, dim, layout, dtype)
                wide = x.float() if dtype in (torch.bfloat16, torch.float16) else x
                want = plain(wide, cos.to(wide.dtype), sin.to(wide.dtype), layout).to(dtype)
                got = run_kernel(x, cos, sin, layout)
                assert torch.equal(got, want), (dtype, layout, dim)
                assert streamed() == may_stream(got, layout), (dtype, layout, dim)


@needs_kernel
def test_compiled_once_then_loaded_from_the_cache(tmp_path):
    script = ("import json, ropelab.kernels.cpu as n; s = n.status(); "
              "print(json.dumps([s['available'], s['reason'], s['compile_s']]))")
    env = {**os.environ, "ROPELAB_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    first, second = (json.loads(r.stdout) for r in runs)
    assert first[:2] == [True, "compiled"] and first[2] > 0
    assert second == [True, "loaded from cache", None]
    assert len(list(tmp_path.glob("rotary-*.so"))) == 1


# The cache holds code this process will run: nothing another user could have written is loaded ------


PLANTED_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(getenv("ROPELAB_TEST_MARKER"), "w");
    if (f) { fputs("the planted library ran", f); fclose(f); }
}
int ropelab_features(void) { return 0; }
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A shared library whose constructor writes a marker file, and the name the loader expects."""
    if _native._compiler() is None or os.name == "nt":
        pytest.skip("no C compiler")
    work = tmp_path_factory.mktemp("planted")
    (work / "planted.c").write_text(PLANTED_C)
    subprocess.run([*_native._compiler(), "-shared", "-fPIC", str(work / "planted.c"), "-o",
                    str(work / "planted.so")], check=True)
    return (work / "planted.so").read_bytes(), _native._library_name(_native._compiler())


def _plant(directory, planted, mode=0o700, owner=None):
    data, name = planted
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_bytes(data)
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, -1)
    return path


def _kernel_still_exact():
    x = torch.randn(2, 3, 5, 16, generator=torch.Generator().manual_seed(8))
    cos, sin = tables(torch.arange(5), 16, "half_split", torch.float32)
    torch.testing.assert_close(apply_rotary(x, cos, sin), plain(x, cos, sin, "half_split"))


@needs_kernel
def test_new_cache_directory_and_library_are_private(monkeypatch, tmp_path):
    _fresh_state(monkeypatch, tmp_path / "a" / "cache")
    status = _native.status()
    assert status["available"] and status["reason"] == "compiled"
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "cache").st_mode) == 0o700
    assert os.stat(status["path"]).st_mode & 0o077 == 0


@needs_kernel
@pytest.mark.parametrize("how", ["writable by others", "another owner"])
def test_a_planted_library_is_deleted_and_rebuilt_never_run(monkeypatch, tmp_path, planted, how):
    if how == "another owner" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    marker = tmp_path / "marker"
    if how == "writable by others":
        path = _plant(cache, planted, mode=0o666)
    else:
        path = _plant(cache, planted, owner=os.geteuid() + 4242)
    _fresh_state(monkeypatch, cache, ROPELAB_TEST_MARKER=str(marker))
    status = _native.status()
    assert status["available"] and status["reason"] == "compiled"
    assert status["replaced"].startswith(f"deleted {path.name}")
    assert ("writable by other users" if how == "writable by others" else "owned by uid") in status["replaced"]
    assert not marker.exists(), "the planted library's code ran"
    assert _native._untrusted(path) is None  # what is there now is this user's own build
    _kernel_still_exact()


@pytest.mark.parametrize("mode, problem", [(0o777, "writable by other users"),
                                           (0o770, "writable by other users")])
def test_a_cache_directory_others_can_write_is_refused(monkeypatch, tmp_path, planted, mode, problem):
    cache = tmp_path / "cache"
    _plant(cache, planted)
    cache.chmod(mode)
    marker = tmp_path / "marker"
    _fresh_state(monkeypatch, cache, ROPELAB_TEST_MARKER=str(marker))
    with pytest.warns(RuntimeWarning, match=f"kernel is unavailable.*{problem}") as caught:
        _kernel_still_exact()
        _kernel_still_exact()  # the warning comes once
    assert len([w for w in caught if w.category is RuntimeWarning]) == 1
    status = _native.status()
    assert not status["available"] and "chmod 700" in status["reason"]
    assert not marker.exists(), "the planted library's code ran"


def test_a_directory_above_the_cache_others_can_replace_is_refused(monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could rename our cache and put theirs in its place
    _fresh_state(monkeypatch, shared / "cache")
    with pytest.warns(RuntimeWarning, match="can be changed by other users"):
        _kernel_still_exact()
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others may add entries but not replace ours
    _fresh_state(monkeypatch, sticky / "cache")
    if _native._compiler() is not None:
        assert _native.status()["available"]


@needs_kernel
def test_a_corrupt_library_is_rebuilt_once(monkeypatch, tmp_path, planted):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / planted[1]).write_bytes(b"\x7fELF truncated by a full disk")
    _fresh_state(monkeypatch, cache)
    status = _native.status()
    assert status["available"] and status["reason"] == "compiled"
    assert status["replaced"] == f"rebuilt {planted[1]}, which did not load"
    _kernel_still_exact()


@needs_kernel
def test_a_library_that_never_loads_falls_back_after_one_rebuild(monkeypatch, tmp_path):
    builds = []

    def broken_build(cc, target):
        builds.append(target)
        target.write_bytes(b"not a library")
        target.chmod(0o700)

    _fresh_state(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(_native, "_build", broken_build)
    with pytest.warns(RuntimeWarning, match="does not load after a rebuild"):
        _kernel_still_exact()
    assert len(builds) == 2


@needs_kernel
def test_old_builds_do_not_pile_up(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    old = time.time() - 7200
    for i in range(6):
        (cache / f"rotary-old{i}.so").write_bytes(b"an older build")
        os.utime(cache / f"rotary-old{i}.so", (old + i, old + i))
    (cache / "tmp-killed.so").write_bytes(b"a compile that was killed")
    os.utime(cache / "tmp-killed.so", (old, old))
    _fresh_state(monkeypatch, cache)
    status = _native.status()
    newest = {os.path.basename(status["path"]), "rotary-old5.so", "rotary-old4.so", "rotary-old3.so"}
    assert _native._KEEP == 4 and {p.name for p in cache.iterdir()} - {".lock"} == newest


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", ["heads_first", "positions_first", "positions_first_view", "per_row", "packed"])
@pytest.mark.parametrize("paths", ["default", "small_blocks_streamed"])
def test_every_axis_order_and_block_gives_the_formulas_bits(monkeypatch, dtype, threads, case, paths):
    # 300 positions and 96 channels; with 8 KiB blocks there are several blocks of positions and a partial
    # last one, and every output is big enough to stream where its rows are whole vectors: the kernel reorders
    # axes, blocks positions and streams its stores, the bits must not move
    if dtype == torch.float16 and "float16" not in _native.status()["dtypes"]:
        pytest.skip("this compiler has no _Float16: float16 takes the torch path")
    if paths == "small_blocks_streamed":
        monkeypatch.setattr(_native, "_BLOCK_BYTES", 8192)
        monkeypatch.setattr(_native, "_STREAM_FROM", 1)
    g = torch.Generator().manual_seed(6)
    seq, dim = 300, 96
    for layout in LAYOUTS:
        cos, sin = tables(torch.arange(seq) * 3 + 5, dim, layout, dtype)
        if case == "heads_first":
            x = torch.randn(2, 5, seq, dim, generator=g).to(dtype)
        elif case == "positions_first":  # (batch, seq, heads, dim) with (seq, 1, dim) tables
            x = torch.randn(2, seq, 5, dim, generator=g).to(dtype)
            cos, sin = cos[:, None], sin[:, None]
        elif case == "positions_first_view":  # the same storage seen as (batch, heads, seq, dim)
            x = torch.randn(2, seq, 5, dim, generator=g).to(dtype).transpose(1, 2)
        elif case == "per_row":  # (batch, 1, seq, dim) tables: every row of the batch its own positions
            cos, sin = tables(torch.stack((torch.arange(seq), torch.arange(seq) * 2)), dim, layout, dtype)
            x = torch.randn(2, 5, seq, dim, generator=g).to(dtype)
            cos, sin = cos[:, None], sin[:, None]
        else:  # packed (tokens, heads, dim) with (tokens, 1, dim) tables
            x = torch.randn(seq, 5, dim, generator=g).to(dtype)
            cos, sin = cos[:, None], sin[:, None]
        before = torch.get_num_threads()
        try:
            torch.set_num_threads(threads)
            got = run_kernel(x, cos, sin, layout)
        finally:
            torch.set_num_threads(before)
        wide = dtype in (torch.bfloat16, torch.float16)
        want = plain(x.float(), cos.float(), sin.float(), layout).to(dtype) if wide else plain(x, cos, sin, layout)
        assert torch.equal(got, want), (layout, case)
        # the tables broadcast over an axis outside the positions (batch, heads) except
        # when packed; small outputs stream only where the test lowers the threshold
        assert blocked() == (case != "packed"), (layout, case)
        assert streamed() == (paths != "default" and may_stream(got, layout)), (layout, case)


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset, dim", [(1, 64), (0, 64), (0, 72), (0, 40)])
def test_outputs_stream_only_where_aligned(monkeypatch, dtype, layout, offset, dim):
    # non-temporal vector stores need addresses aligned to the vector (32 or 64 bytes):
    # an out that starts one element in, or rows (or half rows) that are not whole
    # vectors, must take plain stores rather than fault; the bits are the formula's
    # either way
    monkeypatch.setattr(_native, "_STREAM_FROM", 1)
    g = torch.Generator().manual_seed(8)
    x = torch.randn(3, 4, 50, dim, generator=g).to(dtype)
    cos, sin = tables(torch.arange(50), dim, layout, dtype)
    out = torch.empty(x.numel() + offset, dtype=dtype)[offset:].view(x.shape)
    assert _native.rotate(out, x, cos, sin, layout), "the kernel declined"
    want = plain(x.float(), cos.float(), sin.float(), layout).to(dtype)
    assert torch.equal(out, want)
    assert streamed() == may_stream(out, layout)
    if offset:  # one element in: never aligned
        assert not streamed()
    elif dim == 64 and _native.status()["vector_bytes"]:  # whole vectors: streams
        assert streamed()


@needs_kernel
@pytest.mark.parametrize("given", [True, False])
def test_a_repeated_call_skips_the_checks_not_what_they_guard(monkeypatch, given):
    # apply_rotary remembers a call the kernel computed, and takes the next one like it
    # (types, shapes, strides, dtypes, arguments) straight to the kernel; what those do
    # not settle must still decide: the data, out's overlap, autograd, views, tracing,
    # transforms, devices
    from ropelab import rotary
    from torch.autograd import forward_ad

    g = torch.Generator().manual_seed(11)
    shape, n = (2, 3, 7, 16), 2 * 3 * 7 * 16
    cos, sin = tables(torch.arange(7), 16, "half_split", torch.float32)
    buf = torch.randn(3 * n, generator=g)
    x = buf[n : 2 * n].view(shape)  # out, if given, ends where x begins
    out = buf[:n].view(shape) if given else None
    apply_rotary(torch.randn(shape, generator=g), cos, sin, out=out)  # remembered
    checks = []
    real = rotary.check_apply
    monkeypatch.setattr(rotary, "check_apply", lambda *a: checks.append(a) or real(*a))
    got = apply_rotary(x, cos, sin, out=out)
    assert not checks, "the repeated call ran the checks"
    assert (got is out) == given and torch.equal(got, plain(x, cos, sin, "half_split"))
    within = dict(rtol=0, atol=1e-6)  # the torch path, where the kernel steps aside

    def full(*args, **kwargs):  # a call that must take the full path
        before = len(checks)
        result = apply_rotary(*args, **kwargs)
        assert len(checks) == before + 1, "the call skipped the checks"
        return result

    for bad in ("cos", "sin"):  # a table on another device, with another sign bit
        tabs = {"cos": cos, "sin": sin}
        with pytest.raises(ValueError, match=f"{bad} is on meta"):
            full(x, **{**tabs, bad: tabs[bad].to("meta")}, out=out)
        negated = full(x, **{**tabs, bad: torch._neg_view(tabs[bad])}, out=out)
        flipped = {**tabs, bad: -tabs[bad]}
        torch.testing.assert_close(
            negated, plain(x, flipped["cos"], flipped["sin"], "half_split"), **within)
    negated = full(torch._neg_view(x), cos, sin, out=out)
    torch.testing.assert_close(negated, plain(-x, cos, sin, "half_split"), **within)
    zero = torch._efficientzerotensor(7, 16)  # no data to point at
    torch.testing.assert_close(full(x, cos, zero, out=out), x * cos, rtol=0, atol=0)
    with pytest.raises(TypeError, match="rotary_dim"):  # 16.0 == 16, yet refused
        full(x, cos, sin, rotary_dim=16.0, out=out)
    traced = trace_traffic(lambda: apply_rotary(x, cos, sin, out=out), x)
    assert "addcmul_" in traced.ops  # the trace sees the torch path's operations
    with pytest.raises(ValueError, match=r"shape \(\.\.\., seq, dim\)"):
        apply_rotary(torch.tensor(1.0), cos, sin)  # the checks' error, not an IndexError
    remembered = len(kernels._calls)
    full(x.bfloat16(), cos, sin)  # tables cast to x's dtype: nothing to replay
    full(x.bfloat16(), cos, sin)
    assert len(kernels._calls) == remembered
    if given:
        for start in (1, 2 * n - 1):  # exactly one element shared: x's first, its last
            with pytest.raises(ValueError, match="overlap x"):
                full(x, cos, sin, out=buf[start : start + n].view(shape))
        with pytest.raises(ValueError, match="overlap cos or sin"):  # out's last one
            full(x, buf[n - 1 : n + 111].view(7, 16), sin, out=out)
        with pytest.raises(ValueError, match="require grad"):
            full(x.detach().requires_grad_(), cos, sin, out=out)
        w = torch.randn(shape, requires_grad=True)
        with pytest.raises(ValueError, match="require grad"):  # autograd cannot see out=
            full(x, cos, sin, out=w * 2)
        flipped = torch._neg_view(out)  # writing through a sign bit
        full(x, cos, sin, out=flipped)
        torch.testing.assert_close(flipped, plain(x, cos, sin, "half_split"), **within)
        with pytest.raises(RuntimeError, match="immutable"):  # a zero tensor as out
            full(x, cos, sin, out=torch._efficientzerotensor(shape))
        return
    for i, t in enumerate((x, cos, sin)):  # autograd records, whichever needs a gradient
        leaf = t.detach().requires_grad_()
        args = [x, cos, sin]
        args[i] = leaf
        full(*args).sum().backward()
        assert leaf.grad is not None and leaf.grad.abs().sum() > 0
    for i in range(3):  # torch.func maps over any one of them
        args = [x, cos, sin]
        batched = torch.func.vmap(
            lambda v: full(*args[:i], v, *args[i + 1 :]))(args[i][None])
        assert torch.equal(batched[0], plain(x, cos, sin, "half_split"))
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.ones(shape))
        tangent = forward_ad.unpack_dual(full(dual, cos, sin)).tangent
    assert torch.equal(tangent, plain(torch.ones(shape), cos, sin, "half_split"))


@needs_kernel
@pytest.mark.parametrize("repeat", [False, True])
def test_writes_into_out_count_as_in_place_and_traces_see_the_formula(repeat):
    # a kernel write into out bumps its version counter, as torch's in-place operations
    # do, so that autograd refuses a backward pass that needs what out held; and
    # torch.jit.trace records the torch path, not a foreign call it cannot see
    x = torch.randn(2, 3, 7, 16)
    cos, sin = tables(torch.arange(7), 16, "half_split", torch.float32)
    kernels._calls.clear()  # nothing remembered: the full path
    if repeat:  # the call is remembered first
        apply_rotary(x, cos, sin, out=torch.empty_like(x))
    a = torch.randn(2, 3, 7, 16, requires_grad=True)
    b = a.exp()  # exp saves its output for the backward pass
    with torch.no_grad():
        apply_rotary(x, cos, sin, out=b)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()
    with torch.inference_mode():  # inference tensors, which have no version counter
        xi = torch.randn(2, 3, 7, 16)
        oi = torch.empty_like(xi)
        for _ in range(2):  # checked in full, then replayed
            assert torch.equal(apply_rotary(xi, cos, sin, out=oi), plain(xi, cos, sin, "half_split"))
    graph = torch.jit.trace(lambda v: apply_rotary(v, cos, sin), x, check_trace=False)
    y = torch.randn(2, 3, 7, 16)
    torch.testing.assert_close(graph(y), plain(y, cos, sin, "half_split"), rtol=0, atol=1e-6)


# The loader under real conditions (issue 24) -----------------------------------------


@needs_kernel
@pytest.mark.slow  # a fresh build in a subprocess
def test_under_umask_002_without_a_cache_the_new_directories_are_private(tmp_path):
    # a fresh home without ~/.cache, umask 002 (group-writable by default): every
    # directory the loader creates gets 0700, and the kernel loads from it
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    code = ("import os, json; os.umask(0o002)\n"
            "from ropelab.kernels import cpu\n"
            "print(json.dumps(cpu.status()['available']))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROPELAB_CACHE_DIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "true", run.stderr[-2000:]
    for d in (home / ".cache", home / ".cache" / "ropelab"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d


@needs_kernel
@pytest.mark.slow  # four processes and a build
def test_processes_starting_at_once_on_an_empty_cache_build_once(tmp_path):
    # four processes start together on an empty cache: one builds, the others wait on
    # the lock and load what it built
    cache = tmp_path / "cache"
    code = ("import json\nfrom ropelab.kernels import cpu\n"
            "s = cpu.status(); print(json.dumps([s['available'], s['reason']]))\n")
    env = {**os.environ, "ROPELAB_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    results = [json.loads(p.communicate(timeout=600)[0]) for p in procs]
    assert all(available for available, _ in results), results
    assert sorted(reason for _, reason in results) == ["compiled"] + ["loaded from cache"] * 3
    assert len(list(cache.glob("rotary-*.so"))) == 1


def test_the_fallback_warning_points_at_the_callers_line(monkeypatch, tmp_path):
    _fresh_state(monkeypatch, tmp_path)
    monkeypatch.setattr(_native, "_compiler", lambda: None)
    x = torch.randn(2, 3, 5, 16)
    cos, sin = tables(torch.arange(5), 16, "half_split", torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_rotary(x, cos, sin); line = sys._getframe().f_lineno  # noqa: E702
    (w,) = [w for w in caught if "kernel is unavailable" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line)


def test_without_the_private_torch_apis_the_dispatch_takes_the_torch_path(monkeypatch):
    # a torch that renamed _len_torch_dispatch_stack (or the two others): the dispatch
    # cannot tell whether a tracer is on, so it takes the torch path, always right
    for name in ("_len_torch_dispatch_stack", "_is_torch_function_mode_enabled",
                 "_get_tracing_state"):
        with pytest.MonkeyPatch.context() as mp:
            mp.delattr(torch._C, name)
            assert kernels._probes() is None
            mp.setattr(kernels, "_PROBES", kernels._probes())
            mp.setattr(kernels, "_calls", {})
            x = torch.randn(2, 3, 5, 16)
            cos, sin = tables(torch.arange(5), 16, "interleaved", torch.float32)
            for _ in range(2):  # checked, then (nothing remembered) checked again
                out = torch.empty_like(x)
                assert kernels.rotate_into(out, x, cos, sin, "interleaved") == "torch"
                torch.testing.assert_close(apply_rotary(x, cos, sin, layout="interleaved"),
                                           plain(x, cos, sin, "interleaved"))
            assert not kernels._calls
    assert kernels._probes() is not None
