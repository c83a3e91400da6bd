"""Shared pytest set-up: hypothesis profile for a 2-core CI machine; Triton's interpreter without a GPU."""

import os

import torch

# Without a GPU, Triton kernels run in Triton's interpreter on CPU tensors. The
# variable must be set before anything imports triton (it is read when a
# kernel is decorated), so it is set here, before any test module loads.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import settings

settings.register_profile("ropelab", max_examples=60, deadline=None)
settings.load_profile("ropelab")

# The files that take longest, heaviest first (seconds summed over their tests with
# `--durations=0` on 2 cores, 2026-12-05). pytest-xdist's --dist loadfile hands whole
# files to workers in collection order, so starting these first ends the run with
# short files on every worker, not one long file on one: 431 s -> about 404 s for
# `make test`. Only the order changes; every file still runs.
RUN_FIRST = (
    "tests/book/test_extrapolate.py",  # 145
    "tests/book/test_render.py",  # 131
    "tests/book/test_real_model.py",  # 89
    "book/15_real_model.ipynb",  # 65
    "tests/book/test_first_cells.py",  # 59
    "tests/test_kernels.py",  # 57
    "tests/book/test_toy.py",  # 38
    "tests/book/test_figures.py",  # 34
    "tests/test_triton.py",  # 27
)


def pytest_collection_modifyitems(config, items):
    """Move the files of RUN_FIRST to the front, in its order; the rest keep theirs."""
    root = config.rootpath

    def rank(item):
        inside = item.path.is_relative_to(root)
        path = item.path.relative_to(root).as_posix() if inside else ""
        return RUN_FIRST.index(path) if path in RUN_FIRST else len(RUN_FIRST)

    items.sort(key=rank)  # stable: tests within a file keep their order
