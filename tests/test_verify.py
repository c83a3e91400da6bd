"""Tests for ropelab.verify.check_close, the assertion behind every equation cell."""

import math

import pytest
import torch

from ropelab.verify import check_close, max_abs_diff


def test_prints_a_stable_line(capsys):
    assert check_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-9]), tol=1e-6, label="eq. (theta)") is None
    assert capsys.readouterr().out == "eq. (theta): max |Δ| < 1e-06\n"


def test_fails_when_the_sides_differ():
    with pytest.raises(AssertionError, match=r"eq\. \(x\): max \|Δ\| = 1\.000e-03 exceeds tol = 1e-06"):
        check_close(torch.tensor([1.0]), torch.tensor([1.001], dtype=torch.float64), tol=1e-6, label="eq. (x)")
    with pytest.raises(AssertionError):
        check_close(torch.tensor([float("nan")]), torch.tensor([0.0]), tol=1.0)


def test_complex_numbers_and_broadcasting():
    assert max_abs_diff(torch.tensor([3 + 4j]), torch.tensor([0j])) == pytest.approx(5.0)
    assert max_abs_diff(torch.ones(2, 3), 1.0) == 0.0
    assert max_abs_diff(math.pi, torch.tensor(3.0)) == pytest.approx(math.pi - 3)
    with pytest.raises(ValueError, match=r"shapes \(2,\) and \(3,\)"):
        max_abs_diff(torch.ones(2), torch.ones(3))
    with pytest.raises(ValueError, match="tol must be positive"):
        check_close(1.0, 1.0, tol=0)


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
