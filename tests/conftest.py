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
