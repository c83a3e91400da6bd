"""Tests for ropelab.book.checks: the assertions behind every equation cell and exercise check."""

import math

import pytest
import torch

from ropelab.book.checks import check_close, check_equal, checks, learner_or_reference, max_abs_diff


def test_check_close_prints_one_stable_line(capsys):
    assert check_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-9]), tol=1e-6, label="eq. (3)") is None
    assert capsys.readouterr().out == "✓ eq. (3) (|Δ| ≤ 1e-06)\n"


def test_check_close_fails_when_the_sides_differ():
    with pytest.raises(AssertionError, match=r"eq\. \(x\): max \|Δ\| = 1\.000e-03 exceeds tol = 1e-06"):
        check_close(torch.tensor([1.0]), torch.tensor([1.001], dtype=torch.float64), tol=1e-6, label="eq. (x)")
    with pytest.raises(AssertionError):
        check_close(torch.tensor([float("nan")]), torch.tensor([0.0]), tol=1.0)
    with pytest.raises(ValueError, match="tol must be positive"):
        check_close(1.0, 1.0, tol=0)


def test_check_equal_is_exact(capsys):
    check_equal(torch.tensor([1, 2]), torch.tensor([1, 2]), label="counts")
    check_equal(41, 41, label="pairs")
    assert capsys.readouterr().out == "✓ counts (exact)\n✓ pairs (exact)\n"
    with pytest.raises(AssertionError, match=r"pairs: not equal \(41 != 42\)"):
        check_equal(41, 42, label="pairs")
    with pytest.raises(AssertionError, match="dtypes torch.float32 and torch.float64"):
        check_equal(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"max \|Δ\| = 1\.000e\+00"):
        check_equal(torch.tensor([1.0]), torch.tensor([2.0]))
    with pytest.raises(AssertionError, match=r"shapes \(2,\) and \(3,\)"):
        check_equal(torch.ones(2), torch.ones(3))


def test_checks_groups_a_cell_into_one_line(capsys):
    with checks("eq. (3) for both bases"):
        check_close(1.0, 1.0 + 1e-13, tol=1e-12)
        check_close(2.0, 2.0, tol=1e-6)
        check_equal(3, 3)
    assert capsys.readouterr().out == "✓ eq. (3) for both bases (3 comparisons: 1 exact, 2 with |Δ| ≤ 1e-06)\n"
    with checks("one exact"):
        check_equal(1, 1)
    with checks("one close"):
        check_close(1.0, 1.0, tol=1e-9)
    assert capsys.readouterr().out == "✓ one exact (exact)\n✓ one close (|Δ| ≤ 1e-09)\n"
    with checks("all exact"):
        check_equal(1, 1)
        check_equal(2, 2)
    with checks("all close"):
        check_close(1.0, 1.0, tol=1e-9)
        check_close(1.0, 1.0, tol=1e-6)
    out = capsys.readouterr().out
    assert out == "✓ all exact (2 comparisons, all exact)\n✓ all close (2 comparisons, |Δ| ≤ 1e-06)\n"


def test_checks_fails_loudly_and_prints_nothing(capsys):
    with pytest.raises(AssertionError, match=r"^block: inner: max \|Δ\|"):
        with checks("block"):
            check_close(1.0, 1.0, tol=1e-9)
            check_close(1.0, 2.0, tol=1e-9, label="inner")
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="ran no comparison"):
        with checks("empty"):
            pass
    # a failed block leaves no state behind: the next check prints as usual
    check_equal(1, 1, label="after")
    assert capsys.readouterr().out == "✓ after (exact)\n"


def test_learner_or_reference():
    def my_double(x):
        raise NotImplementedError

    def reference(x):
        return 2 * x

    assert learner_or_reference(my_double, reference, 3) == (reference, "the reference solution")

    def my_triple(x):
        return 3 * x

    fn, who = learner_or_reference(my_triple, reference, 3)
    assert fn is my_triple and who == "your my_triple"

    def broken(x):
        raise TypeError("learner bug")

    with pytest.raises(TypeError, match="learner bug"):
        learner_or_reference(broken, reference, 3)


def test_complex_numbers_and_broadcasting():
    assert max_abs_diff(torch.tensor([3 + 4j]), torch.tensor([0j])) == pytest.approx(5.0)
    assert max_abs_diff(torch.ones(2, 3), 1.0) == 0.0
    assert max_abs_diff(math.pi, torch.tensor(3.0)) == pytest.approx(math.pi - 3)
    with pytest.raises(ValueError, match=r"shapes \(2,\) and \(3,\)"):
        max_abs_diff(torch.ones(2), torch.ones(3))


def test_python_float_side_is_kept_in_float64():
    # A Python float must not go through float32, or a float64 tensor compared
    # with the same number would show a difference of ~1e-7.
    exact = torch.tensor(2 * math.pi, dtype=torch.float64)
    assert max_abs_diff(exact, 2 * math.pi) == 0.0
    assert max_abs_diff(2 * math.pi, exact) == 0.0
    assert max_abs_diff(torch.tensor([1.0 / 3], dtype=torch.float64), [1.0 / 3]) == 0.0
    assert max_abs_diff(torch.tensor(1 + 2j, dtype=torch.complex128), 1 + 2j) == 0.0
