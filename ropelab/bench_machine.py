"""Where the benchmark's numbers come from: the machine, the instruction sets its
CPU results apply to, and the kernel that ran (``python -m ropelab.bench``'s header
and the ``machine`` record of its ``--json`` file). :mod:`ropelab.bench`
re-exports these names.
"""

from __future__ import annotations

import os
import platform

import torch

from .kernels import kernel_status

__all__ = ["isa_summary", "kernel_summary", "machine_info"]


def kernel_summary() -> str:
    """One line on ropelab's fused CPU kernel: compiled now (and how long it took),
    cached, or why not."""
    st = kernel_status()
    if not st["available"]:
        return f"unavailable ({st['reason']}): apply_rotary takes its torch path"
    threads = "OpenMP threads" if st["openmp"] else "one thread"
    how = (
        f"compiled in {st['compile_s']:.2f} s"
        if st["compile_s"] is not None
        else "loaded from cache"
    )
    isa = {64: "AVX-512", 32: "AVX2"}.get(st["vector_bytes"], "no vector")
    rounding = ", AVX512-BF16 rounding" if st["hardware_bf16"] else ""
    return (f"fused C kernel ({isa} instructions{rounding}), {how}, {threads}, "
            f"{', '.join(st['dtypes'])}")


def machine_info(device: torch.device) -> dict[str, object]:
    """Where the numbers come from: CPU or GPU name, torch version, threads."""
    info: dict[str, object] = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [
                line.split(":", 1)[1].strip()
                for line in f
                if line.startswith("model name")
            ]
        if names:
            info["cpu"] = names[0]
    except OSError:
        pass
    if device.type == "cuda":
        from .bench_gpu import path_summary

        info["gpu"] = torch.cuda.get_device_name(device)
        info["kernel"] = path_summary(device)
    else:
        info["kernel"] = kernel_summary()
        info["isa"] = isa_summary()
    return info


def isa_summary() -> str:
    """Which instruction sets the CPU results apply to: those the C kernel ran with
    here, and the CPU's own, since a CPU without them (AVX2 alone, say) runs a
    narrower kernel at other ratios."""
    st = kernel_status()
    if not st["available"]:
        return "none: the torch path ran, whatever the CPU has"
    vector = {64: "AVX-512", 32: "AVX2"}.get(st["vector_bytes"], "no vector ISA")
    bf16 = " with AVX512-BF16 rounding" if st["hardware_bf16"] else ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        flags = []
    names = ("avx2", "avx512f", "avx512bw", "avx512_bf16")
    has = [name for name in names if name in flags]
    return (f"CPUs whose kernel runs {vector}{bf16}; this CPU has "
            f"{', '.join(has) or 'none of avx2, avx512f, avx512bw, avx512_bf16'}")
