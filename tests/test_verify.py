"""Tests for ropelab.verify."""

import math

import torch

from ropelab.verify import check_close, max_abs_diff

# --- chapter 01 additions ---


def test_python_float_side_is_kept_in_float64():
    # A Python float used to go through torch.as_tensor, i.e. float32, so a float64
    # tensor compared with the same number showed a difference of ~1e-7.
    exact = torch.tensor(2 * math.pi, dtype=torch.float64)
    assert max_abs_diff(exact, 2 * math.pi) == 0.0
    assert max_abs_diff(2 * math.pi, exact) == 0.0
    assert max_abs_diff(torch.tensor([1.0 / 3], dtype=torch.float64), [1.0 / 3]) == 0.0
    assert max_abs_diff(torch.tensor(1 + 2j, dtype=torch.complex128), 1 + 2j) == 0.0
    check_close(exact, 2 * math.pi, tol=1e-15)
