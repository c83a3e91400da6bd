"""Host time of one eager apply_rotary call up to the GPU launch, measured without a GPU.

The Triton backend takes CPU tensors here (TRITON_INTERPRET=1, dispatch routed to it)
and its launch is replaced by a no-op, so what is timed is everything the host does
before a launch: argument checks or the replay of a call already checked, the
dispatch, the plan lookup, the data pointers. Not timed: the launcher's own C call
(cuLaunchKernel and its argument packing) and the CUDA-only lookups (current device,
raw stream), a few microseconds on a GPU machine; the GPU run measures them.

    TRITON_INTERPRET=1 python tools/host_cost.py
"""

import os
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

import ropelab  # noqa: E402
from ropelab import kernels  # noqa: E402
from ropelab.kernels import triton as kt  # noqa: E402


def per_call(fn, n=20000, repeats=9):
    """Fastest over ``repeats`` of the mean CPU time per call of ``n`` calls, in µs:
    process time, so that waiting for a core on a shared machine is left out."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - t0) / n * 1e6)
    return min(times)


def main():
    kt._triton_launch = lambda plan, tensors, kernel=None: None  # the launch: a no-op
    kernels._route = lambda device_type: (kt,)
    torch.set_num_threads(1)
    for shape, label in (
        ((8, 32, 1, 128), "decode (8, 32, 1, 128)"),
        ((1, 32, 4096, 128), "prefill (1, 32, 4096, 128)"),
    ):
        x = torch.randn(shape, dtype=torch.bfloat16)
        c, s = ropelab.cos_sin(
            torch.arange(shape[2]), ropelab.inv_freq(128), dtype=torch.bfloat16
        )
        out = torch.empty_like(x)
        cases = {
            "apply_rotary(out=), replayed": lambda: ropelab.apply_rotary(
                x, c, s, out=out
            ),
            "apply_rotary(), replayed": lambda: ropelab.apply_rotary(x, c, s),
            "kt.apply_rotary(out=), checked": lambda: kt.apply_rotary(x, c, s, out=out),
            "apply_rotary_at(out=)": lambda: kt.apply_rotary_at(
                x, c, s, torch.arange(shape[2]), out=out
            ),
        }

        def full():
            kernels._calls.clear()
            ropelab.apply_rotary(x, c, s, out=out)

        cases["apply_rotary(out=), checked"] = full
        for name, fn in cases.items():
            print(f"{label:<28} {name:<32} {per_call(fn, n=2000):6.1f} µs", flush=True)


if __name__ == "__main__":
    sys.exit(main())
