"""A fused CPU kernel for :func:`ropelab.apply_rotary`, compiled on first use
(09_performance).

Applying RoPE reads ``x``, ``cos`` and ``sin`` and writes the result; the
arithmetic is negligible, so the time is memory traffic. torch's eager
operators each make a pass over memory, and half-split pairs need three of
them even without temporaries, with 64-element inner loops over half-rows.
``cpu.c`` does the whole formula in one pass, row by row: about the
traffic of ``out.copy_(x)``.

The C source ships with the package. On the first CPU call ropelab compiles
it with the system C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``)
into a per-user cache directory (``$ROPELAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/ropelab``, else ``~/.cache/ropelab``) keyed by the source,
the flags and the compiler, and loads it with :mod:`ctypes`; later processes
load the cached library. The compile took 1.1 s with gcc 12 on an idle
2-core machine, longer on a loaded one (4.4 s was seen for an earlier,
smaller version of the source).

Loading a shared library runs its code, so the cache is trusted only if no
other user can have written to it: the directory is created with mode 0700
and must be owned by this user and writable by no one else, and no directory
above it may be writable by others without the sticky bit (``/tmp`` is fine).
A library that another user owns or that others can write is deleted and
rebuilt, never loaded. A library that does not load (a corrupt or truncated
file) is rebuilt once. At most :data:`_KEEP` builds are kept; older ones (other
source versions, compilers or flags) are deleted. Where there is no
compiler, the compile fails, the cache is not private, the platform is
Windows, or ``ROPELAB_NATIVE=0`` is set, :func:`rotate` returns ``False``,
the caller uses its torch path (same results within one rounding, slower),
and the first such call warns once, unless ``ROPELAB_NATIVE=0`` asked for it.
:func:`status` reports what happened and how long the compile took.

Rows are split between ``torch.get_num_threads()`` threads with OpenMP when
the compiler supports it (``-fopenmp``). Where torch ships GNU OpenMP (its
Linux wheels do), the library, linked against ``libgomp.so.1``, shares the
runtime torch has already loaded, and so its thread pool.
Without OpenMP the kernel runs on one thread. The loaded library and the
runners for the shapes it has seen (:func:`plan`) are this module's only state.

The directories it creates (the cache and any missing parent, e.g.
``~/.cache``) get mode 0700 whatever the umask. Processes that start at once
on an empty cache build the library once: the build holds a lock file in the
cache directory, and a process that waited for it loads what the first built.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor


__all__ = ["NAME", "plan", "rotate", "status"]

_SOURCE = Path(__file__).with_name("cpu.c")
_MAXD = 4  # leading axes the kernel indexes (MAXD in cpu.c)
_DTYPES = {torch.float32: 0, torch.float64: 1, torch.bfloat16: 2, torch.float16: 3}
# elements below which one thread beats waking others (torch's at::internal::GRAIN_SIZE)
_GRAIN = 32768
# Bytes of cos and sin per block of positions (0: half the L2 cache), and the bytes of
# out from which it is written with non-temporal stores (0: 16 MiB; negative: never).
# Tests shrink both to reach the kernel's blocked and streaming paths with small
# tensors.
_BLOCK_BYTES = 0
_STREAM_FROM = 0
# What the last call that reached the kernel did (its return value): bit 0 set when
# out was written with non-temporal stores, bit 1 when positions went in blocks.
# Tests read it; it is one value for the process, not per thread.
STREAMED, BLOCKED = 1, 2
_last_path = 0

_KEEP = 4  # builds kept in the cache directory, newest first
_lock = threading.Lock()
_state: dict[str, Any] = {}
_warned = False


def _cache_dir() -> Path:
    if os.environ.get("ROPELAB_CACHE_DIR"):
        return Path(os.environ["ROPELAB_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ropelab"


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC", "").split()
    if cc and shutil.which(cc[0]):
        return [shutil.which(cc[0]) or cc[0], *cc[1:]]
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


# -ffp-contract=off: no fused multiply-add, so float32/float64 match torch's formula
# bit for bit. -fno-tree-vectorize: the vector loops are written out by hand, and
# GCC 12's auto-vectorizer turns the scalar loops' alternating a*c - b*s, b*c + a*s
# into fused vfmaddsub (one rounding less) despite -ffp-contract=off where AVX-512
# provides it.
_FLAGS = (
    "-O3", "-shared", "-fPIC", "-std=c11", "-ffp-contract=off", "-fno-math-errno",
    "-fno-tree-vectorize",
)  # fmt: skip


_AVX2 = ("-mavx2", "-mf16c")
_AVX512 = (*_AVX2, "-mavx512f", "-mavx512bw")
_AVX512_BF16 = (*_AVX512, "-mavx512bf16")


def _cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def _isa_flags() -> list[str]:
    """The vector ISA to compile for, on x86 CPUs: AVX-512 (F and BW) where torch
    finds AVX-512, with AVX512-BF16 where the CPU has it, else AVX2 where
    torch finds AVX2; with F16C for the 16-bit conversions. The library is built on
    the machine that runs it, so this is the machine's own ISA."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    capability = torch.backends.cpu.get_cpu_capability()
    if capability == "AVX512":
        bf16 = "avx512_bf16" in _cpu_flags()
        return list(_AVX512_BF16 if bf16 else _AVX512)
    return list(_AVX2) if capability == "AVX2" else []


def _library_name(cc: list[str]) -> str:
    """The cached library's file name, keyed by the source, the flags, the compiler and
    the CPU."""
    st = os.stat(cc[0])
    recipe = [
        _SOURCE.read_bytes(),
        " ".join([*cc, *_FLAGS, *_isa_flags()]).encode(),
        f"{st.st_size}:{st.st_mtime_ns}".encode(),
        platform.machine().encode(),
    ]
    key = hashlib.sha256(b"\0".join(recipe)).hexdigest()[:16]
    return f"rotary-{key}.so"


def _check_private(directory: Path) -> Path:
    """``directory`` resolved, after checking that no other user can have written to it.

    It must be a directory owned by this user and writable by no one else,
    and every directory above it owned by this user or root, and writable by
    others only with the sticky bit (``/tmp``), so that no one else can swap
    it for theirs. Raises RuntimeError saying what is wrong.
    """
    real = Path(os.path.realpath(directory))
    uid = os.geteuid()
    st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"cache path {real} is not a directory")
    if st.st_uid != uid:
        raise RuntimeError(
            f"cache directory {real} belongs to uid {st.st_uid}, not to this user "
            f"({uid}); set ROPELAB_CACHE_DIR to a private directory"
        )
    if st.st_mode & 0o022:
        raise RuntimeError(
            f"cache directory {real} is writable by other users (mode "
            f"{stat.S_IMODE(st.st_mode):o}): run chmod 700 on it and delete its "
            "files, or set ROPELAB_CACHE_DIR to a private directory"
        )
    for parent in real.parents:
        pst = os.stat(parent)
        if pst.st_uid not in (uid, 0) or (
            pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX
        ):
            raise RuntimeError(
                f"{parent}, above the cache directory {real}, can be changed by "
                "other users; set ROPELAB_CACHE_DIR to a private directory"
            )
    return real


def _untrusted(path: Path) -> str | None:
    """Why the library at ``path`` must not be loaded (another owner, writable by
    others), or None."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _build(cc: list[str], target: Path) -> None:
    """Compile the kernel into ``target``, with what the compiler supports of: the
    vector ISA of :func:`_isa_flags`, OpenMP, and float16 (``_Float16``); a plain build
    is the last resort."""
    fd, tmp = tempfile.mkstemp(suffix=".so", prefix="tmp-", dir=target.parent)
    os.close(fd)
    try:
        errors = []
        isa = _isa_flags()
        # an older compiler: AVX-512 without its BF16 part, then AVX2
        isas = [isa] + [flags for flags in (list(_AVX512), list(_AVX2))
                        if len(flags) < len(isa) and isa[:len(flags)] == flags]
        for extra in (
            *([*flags, "-fopenmp", "-DROPELAB_HAVE_FLOAT16"] for flags in isas),
            *([*flags, "-fopenmp"] for flags in isas),
            ["-fopenmp"],
            *([*flags, "-DROPELAB_HAVE_FLOAT16"] for flags in isas),
            [],
        ):
            proc = subprocess.run(
                [*cc, *_FLAGS, *extra, str(_SOURCE), "-o", tmp],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode == 0:
                os.chmod(
                    tmp, 0o700
                )  # the linker applied the umask, which may leave it group-writable
                os.replace(
                    tmp, target
                )  # atomic: a concurrent process sees the old file or the whole new one
                return
            errors.append(proc.stderr.strip().splitlines()[-1:] or ["(no message)"])
        raise RuntimeError(f"{' '.join(cc)} failed: {errors[-1][0]}")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _prune(directory: Path, keep: Path) -> None:
    """Delete all but the newest :data:`_KEEP` builds (``keep`` always stays) and
    temporary files that a killed compile left for more than an hour."""

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    builds = sorted(
        (p for p in directory.glob("rotary-*.so") if p != keep), key=mtime, reverse=True
    )
    stale = [p for p in directory.glob("tmp-*.so") if time.time() - mtime(p) > 3600]
    for path in builds[_KEEP - 1 :] + stale:
        try:
            path.unlink()
        except OSError:
            pass  # another process got there first


def _open(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.ropelab_features.restype = ctypes.c_int
    i64p = ctypes.POINTER(ctypes.c_int64)
    lib.ropelab_rotate.restype = ctypes.c_int
    lib.ropelab_rotate.argtypes = [
        ctypes.c_int, ctypes.c_int, ctypes.c_int, i64p,
        ctypes.c_void_p, i64p, ctypes.c_void_p, i64p,
        ctypes.c_void_p, i64p, ctypes.c_void_p, i64p,
        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
        ctypes.c_int64, ctypes.c_int64,
    ]  # fmt: skip
    lib.ropelab_run.restype = ctypes.c_int
    lib.ropelab_run.argtypes = [
        i64p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
    ]  # fmt: skip
    return lib


def _load() -> dict[str, Any]:
    """Find or build the library once per process; the result is cached in
    ``_state``."""
    with _lock:
        if _state:
            return _state
        state: dict[str, Any] = {
            "available": False,
            "lib": None,
            "compile_s": None,
            "path": None,
            "dtypes": frozenset(),
            "openmp": False,
            "vector_bytes": 0,
            "hardware_bf16": False,
            "replaced": None,
            # (dtypes, shapes, strides, layout) -> (ropelab_run's plan, whether to
            # split the work between threads)
            "plans": {},
        }
        try:
            if os.environ.get("ROPELAB_NATIVE", "1").strip().lower() in (
                "0",
                "false",
                "no",
                "off",
            ):
                raise RuntimeError("disabled by ROPELAB_NATIVE")
            if os.name == "nt":
                raise RuntimeError("not built on Windows")
            cc = _compiler()
            if cc is None:
                raise RuntimeError("no C compiler found ($CC, cc, gcc, clang)")
            directory = _cache_dir()
            _make_private_dirs(directory)
            target = _check_private(directory) / _library_name(cc)
            with _build_lock(target.parent):  # one build for processes starting at once
                lib = _find_or_build(cc, target, state)
                _prune(target.parent, keep=target)
            mask = lib.ropelab_features()
            state.update(
                available=True,
                lib=lib,
                path=str(target),
                reason="compiled"
                if state["compile_s"] is not None
                else "loaded from cache",
                dtypes=frozenset(
                    dt for dt, code in _DTYPES.items() if mask >> code & 1
                ),
                openmp=bool(mask >> 8 & 1),
                vector_bytes=mask >> 9 & 0x7F,
                hardware_bf16=bool(mask >> 16 & 1),
            )
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            state["reason"] = str(exc)
        _state.update(state)
        return _state


def _make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and each missing parent with mode 0700, whatever the umask
    (``mkdir(parents=True)`` gives parents the umask's mode: 0775 under umask 002,
    which :func:`_check_private` then rightly refuses)."""
    missing = []
    path = Path(os.path.abspath(directory))
    while not os.path.isdir(path):
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # another process made it just now
            continue
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask: 0700 meant


@contextlib.contextmanager
def _build_lock(directory: Path):
    """Hold an exclusive lock on ``directory/.lock`` (POSIX ``flock``), so that one
    process builds the library while the others wait and then load it."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (the build is atomic anyway: rename)
        yield
        return
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _find_or_build(cc: list[str], target: Path, state: dict[str, Any]) -> ctypes.CDLL:
    """Load the library at ``target``, building it first if it is missing, and once
    more if it does not load; an untrusted file there is deleted, never loaded."""
    if os.path.lexists(target) and (why := _untrusted(target)):
        state["replaced"] = f"deleted {target.name}, {why}"
        target.unlink()
    for attempt in (1, 2):
        if not target.exists():
            t0 = time.perf_counter()
            _build(cc, target)
            state["compile_s"] = time.perf_counter() - t0
        try:
            return _open(target)
        except (OSError, AttributeError) as exc:  # corrupt, truncated, not our library
            if attempt == 2:
                raise RuntimeError(
                    f"{target} does not load after a rebuild: {exc}") from exc
            state["replaced"] = f"rebuilt {target.name}, which did not load"
            target.unlink(missing_ok=True)
    raise AssertionError("unreachable")


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised by this function's caller at the
    first frame outside ropelab and torch: the user's line that called apply_rotary."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ropelab/
    inside = (here + os.sep, os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    frame, level = sys._getframe(2), 2  # 1: warnings.warn's caller, 2: its caller
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


def _warn_fallback(state: dict[str, Any]) -> None:
    """Say once per process that apply_rotary runs without the kernel, unless the user
    asked for it."""
    global _warned
    if not _warned and state["reason"] != "disabled by ROPELAB_NATIVE":
        _warned = True
        warnings.warn(
            f"ropelab's fused CPU kernel is unavailable ({state['reason']}); "
            "apply_rotary uses its torch path: the same results within one rounding, "
            "slower. ROPELAB_NATIVE=0 silences this.",
            RuntimeWarning,
            stacklevel=_caller_stacklevel(),
        )


def status() -> dict[str, Any]:
    """Whether the fused kernel is in use, and why not if it is not.

    Returns a dict with ``available`` (bool), ``reason`` (``"compiled"``,
    ``"loaded from cache"`` or why it is unavailable), ``compile_s`` (seconds
    the compile took in this process, or None), ``path``, ``dtypes``,
    ``openmp`` (whether rows are split between threads), ``vector_bytes``
    (its widest vector store: 64 with AVX-512, 32 with AVX2, 0 without),
    ``hardware_bf16`` (whether bfloat16 results are rounded by AVX512-BF16's
    instruction, to the same bits) and ``replaced`` (None, or which untrusted or
    corrupt library was deleted and rebuilt).
    Building happens here if it has not yet.
    """
    state = {k: v for k, v in _load().items() if k not in ("lib", "plans")}
    state["dtypes"] = [
        str(dt).removeprefix("torch.") for dt in _DTYPES if dt in state["dtypes"]
    ]
    return state


_PLAIN = (
    torch.Tensor,
    torch.nn.Parameter,
)  # subclasses (FakeTensor, ...) may have no data to point at

NAME = "cpu"


def _usable(t: Tensor) -> bool:
    """Whether the kernel can read or write ``t`` through its data pointer: on the
    CPU, without torch's lazy negation bit, not a zero tensor (which has no data)."""
    return t.is_cpu and not t.is_neg() and not t._is_zerotensor()


def _run(plan: Any, big: bool, x: int, out: int, cos: int, sin: int) -> bool:
    """One call of ``ropelab_run`` on these data pointers, with this call's threads and
    the module's block and streaming settings; whether it ran."""
    global _last_path
    _last_path = done = _state["lib"].ropelab_run(
        plan, x, out, cos, sin,
        torch.get_num_threads() if big else 1, _BLOCK_BYTES, _STREAM_FROM,
    )  # fmt: skip
    return done >= 0


def _coalesce(
    sizes: list[int], strides: list[list[int]]
) -> tuple[list[int], list[list[int]]]:
    """Merge leading axes that are contiguous with the next one in every tensor, and
    drop size-1 axes."""
    keep = [i for i, n in enumerate(sizes) if n != 1]
    sizes = [sizes[i] for i in keep]
    strides = [[st[i] for i in keep] for st in strides]
    i = len(sizes) - 2
    while i >= 0:
        if all(st[i] == st[i + 1] * sizes[i + 1] for st in strides):
            sizes[i + 1] *= sizes[i]
            del sizes[i]
            for st in strides:
                del st[i]
        i -= 1
    return sizes, strides


def _plan(x: Tensor, out: Tensor, cos: Tensor, sin: Tensor) -> tuple | None:
    """The kernel's shape arguments for these shapes and strides, or None if it cannot
    take them.

    Returns ``(ndim, sizes, [x, out, cos, sin strides], rows)``, lists of ints.
    """
    lead = list(x.shape[:-1])
    try:
        tables = [t.expand(*lead, x.shape[-1]) for t in (cos, sin)]
    except RuntimeError:
        return None
    tensors = (x, out, *tables)
    if any(t.stride(-1) != 1 for t in tensors):
        return None
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape)):
        # out broadcast over an axis: torch refuses such an out=, and so does the kernel
        return None
    sizes, strides = _coalesce(lead, [list(t.stride()[:-1]) for t in tensors])
    if len(sizes) > _MAXD:
        return None
    rows = 1
    for n in sizes:
        rows *= n
    return len(sizes), sizes, strides, rows


def plan(
    out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int
) -> Callable[[Tensor, Tensor, Tensor, Tensor], bool] | None:
    """The backend contract of :mod:`ropelab.kernels`: a runner for calls of this
    signature, or None where the kernel cannot take them.

    It takes CPU tensors of float32, float64, bfloat16 or float16 (float16
    where the compiler has ``_Float16``) whose rows are contiguous (tables
    included), once the library has loaded. In place (``out`` is ``x``) is
    fine: each row is read before it is written. The shape arguments for each
    combination of shapes and strides are worked out once and kept (a
    decoding loop calls with the same shapes at every step); the runner only
    passes the data pointers.
    """
    for t in (out, x, cos, sin):
        if type(t) not in _PLAIN or not _usable(t):
            return None
    state = _state or _load()
    if not state["available"]:
        _warn_fallback(state)
        return None
    key = (*_plan_key(x, out, cos, sin, layout), rotary_dim)
    plans = state["plans"]
    runner = plans.get(key, False)
    if runner is False:
        runner = _runner(state, out, x, cos, sin, layout, rotary_dim)
        if len(plans) >= 256:
            plans.clear()
        plans[key] = runner
    return runner


def _runner(
    state: dict[str, Any], out: Tensor, x: Tensor, cos: Tensor, sin: Tensor,
    layout: str, r: int,
) -> Callable[[Tensor, Tensor, Tensor, Tensor], bool] | None:
    """The runner :func:`plan` keeps for one signature."""
    dim = x.shape[-1]
    head_x = x if r == dim else x[..., :r]
    head_out = out if r == dim else out[..., :r]
    call = _call_args(state, head_x, head_out, cos, sin, layout)
    if call is None:
        return None

    def tail(out: Tensor, x: Tensor) -> None:  # the channels past rotary_dim: copied
        if r < dim and out.data_ptr() != x.data_ptr():
            out[..., r:] = x[..., r:]

    if not call:  # nothing to rotate
        return lambda out, x, cos, sin: True
    kernel_plan, big = call

    def runner(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor) -> bool:
        pointers = (x.data_ptr(), out.data_ptr(), cos.data_ptr(), sin.data_ptr())
        if not _run(kernel_plan, big, *pointers):
            return False
        tail(out, x)
        return True

    return runner


def rotate(out: Tensor, x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> bool:
    """``out = x·cos + rot(x)·sin`` in one pass if the kernel applies (every channel
    rotated); False to let the caller do it. Tests call the kernel this way."""
    runner = plan(out, x, cos, sin, layout, x.shape[-1])
    return runner is not None and runner(out, x, cos, sin)


def _plan_key(x: Tensor, out: Tensor, cos: Tensor, sin: Tensor, layout: str) -> tuple:
    """What ``ropelab_run``'s plan depends on: dtypes, shapes, strides, layout."""
    return (x.dtype, out.dtype, cos.dtype, sin.dtype, x.shape, x.stride(), out.stride(),
            cos.shape, cos.stride(), sin.shape, sin.stride(), layout)  # fmt: skip


def _call_args(
    state: dict[str, Any], x: Tensor, out: Tensor, cos: Tensor, sin: Tensor, layout: str
) -> tuple | None:
    """``ropelab_run``'s plan for these dtypes, shapes and strides (see ``cpu.c``),
    and whether the call is worth waking other threads; None if the kernel cannot
    take them, () if x is empty."""
    dtype = x.dtype
    if dtype not in _DTYPES or dtype not in state["dtypes"]:
        return None
    if out.dtype != dtype or cos.dtype != dtype or sin.dtype != dtype:
        return None
    if x.numel() == 0:
        return ()
    plan = _plan(x, out, cos, sin)
    if plan is None:
        return None
    ndim, sizes, strides, rows = plan
    pad = [0] * (_MAXD - ndim)
    packed = [_DTYPES[dtype], layout == "interleaved", ndim, x.shape[-1] // 2, rows]
    for axes in (sizes, *strides):
        packed += [*axes, *pad]
    big = state["openmp"] and x.numel() >= 2 * _GRAIN  # worth waking other threads
    return (ctypes.c_int64 * len(packed))(*packed), big
