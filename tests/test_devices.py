"""Device mixing, caught on a machine without a GPU: every public function on ``meta``.

The development and CI machines have no GPU, so a CPU tensor made inside the
library (``torch.arange(n)`` without ``device=``) that meets a CUDA input
would only fail on a GPU. On the ``meta`` device the same mistake fails here:
torch refuses an operation that mixes a meta tensor with a CPU tensor ("Tensor
on device cpu is not on the expected device meta"), and a meta tensor has no
values, so a read of one (``.item()``, ``bool(t)``: a host synchronisation on
a GPU) fails too. Each public function runs on meta inputs and must return
meta tensors.

Limits: a 0-dim CPU tensor mixes with any device in torch (on CUDA too), and
an index tensor on the CPU is accepted by indexing on meta as on CUDA, so
neither is caught; the fast kernels never run on meta (the dispatch takes the
torch path), so the kernels' own device handling is tested by the conformance
test on a GPU; a function whose output shape depends on values
(``packed_positions``, ``RotaryEmbedding`` growing its cache to the largest
position, ``positions_from_mask``'s check of the mask's values) cannot run on
meta and is listed in ``VALUE_DEPENDENT`` instead.
"""

from __future__ import annotations

import pytest
import torch

import ropelab

M = "meta"
VALUE_DEPENDENT = {"packed_positions", "positions_from_mask", "RotaryEmbedding"}


def meta_calls():
    x = torch.empty(2, 3, 5, 16, device=M)
    pos = torch.arange(5, device=M)
    theta = torch.empty(8, device=M)
    cos, sin = torch.empty(5, 16, device=M), torch.empty(5, 16, device=M)
    return {
        "angles": lambda: ropelab.angles(pos, theta),
        "cos_sin": lambda: ropelab.cos_sin(pos, theta),
        "cos_sin interleaved": lambda: ropelab.cos_sin(pos, theta, layout="interleaved",
                                                       attention_scaling=1.2,
                                                       dtype=torch.bfloat16),
        "apply_rotary": lambda: ropelab.apply_rotary(x, cos, sin),
        "apply_rotary out=": lambda: ropelab.apply_rotary(x, cos, sin,
                                                          out=torch.empty_like(x)),
        "apply_rotary partial": lambda: ropelab.apply_rotary(x, cos[:, :8], sin[:, :8],
                                                             rotary_dim=8),
        "apply_rotary_complex": lambda: ropelab.apply_rotary_complex(x, pos, theta),
        "rotate_half": lambda: ropelab.rotate_half(x),
        "rotate_interleaved": lambda: ropelab.rotate_interleaved(x),
        "rotation_matrix": lambda: ropelab.rotation_matrix(3, theta),
        "to_half_split": lambda: ropelab.to_half_split(x),
        "to_interleaved": lambda: ropelab.to_interleaved(x),
        "permute_qk_weight": lambda: ropelab.permute_qk_weight(
            torch.empty(32, 16, device=M), 2),
        "unpermute_qk_weight": lambda: ropelab.unpermute_qk_weight(
            torch.empty(32, 16, device=M), 2),
        "rerotate_keys": lambda: ropelab.rerotate_keys(x, 4, theta),
        "rope_scores": lambda: ropelab.rope_scores(x, x, pos, pos),
        "decay_bound": lambda: ropelab.decay_bound(torch.arange(4, device=M), 16),
    }


@pytest.mark.parametrize("name", sorted(meta_calls()))
def test_every_public_function_stays_on_its_inputs_device(name):
    result = meta_calls()[name]()
    for t in result if isinstance(result, tuple) else (result,):
        if isinstance(t, torch.Tensor):
            assert t.device.type == M, f"{name} returned a tensor on {t.device}"


def test_the_table_covers_the_public_api():
    # a public function that takes tensors is in the table or named as value-dependent
    no_tensors = {"default_device", "inv_freq", "wavelengths", "scaled_inv_freq",
                  "kernel_status"}  # built from numbers: checked where they are moved
    covered = {name.split()[0] for name in meta_calls()} | VALUE_DEPENDENT | no_tensors
    assert set(ropelab.__all__) <= covered, set(ropelab.__all__) - covered


def test_a_cpu_tensor_made_inside_a_function_is_caught():
    # the check can fail: the mistake it is for, made on purpose
    def forgets_the_device(x):
        return x * torch.arange(x.shape[-1])  # no device=: a CPU tensor

    with pytest.raises(RuntimeError, match="device"):
        forgets_the_device(torch.empty(2, 16, device=M))
    with pytest.raises(RuntimeError, match="meta"):  # a value read: a GPU sync
        bool(torch.empty(3, device=M).sum() > 0)
