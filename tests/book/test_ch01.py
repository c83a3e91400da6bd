"""ropelab.book.ch01, chapter 01's exact references, against values worked out by
hand."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

from ropelab.book import ch01


def test_exact_theta_is_the_geometric_ladder():
    # base 100, d = 4: θ = (100^0, 100^(-1/2)) = (1, 1/10)
    theta = ch01.exact_theta(4, 100.0)
    with mpmath.workdps(40):
        assert theta[0] == 1
        assert abs(theta[1] - mpmath.mpf(1) / 10) < mpmath.mpf(10) ** -38
    assert len(ch01.exact_theta(128, 10000.0)) == 64


def test_exact_wavelengths_are_two_pi_over_theta():
    lam = ch01.exact_wavelengths(4, 100.0)
    with mpmath.workdps(40):
        assert abs(lam[0] - 2 * mpmath.pi) < mpmath.mpf(10) ** -35
        assert abs(lam[1] - 20 * mpmath.pi) < mpmath.mpf(10) ** -35


def test_exact_full_turns_decides_the_float_two_pi():
    # the float nearest 2π lies below 2π, so no pair has λ_0 = 2π <= L
    assert ch01.exact_full_turns(128, 10000.0, 2 * math.pi) == 0
    assert ch01.exact_full_turns(128, 10000.0, math.nextafter(2 * math.pi, 7.0)) == 1
    assert ch01.exact_full_turns(128, 10000.0, 1e9) == 64
    assert ch01.exact_full_turns(128, 10000.0, 0.0) == 0


def test_exact_full_turns_counts_the_pairs_below_l():
    lam = ch01.exact_wavelengths(16, 10000.0)
    for j in range(8):
        below, above = float(lam[j] * (1 - 1e-9)), float(lam[j] * (1 + 1e-9))
        assert ch01.exact_full_turns(16, 10000.0, below) == j
        assert ch01.exact_full_turns(16, 10000.0, above) == j + 1


@pytest.mark.parametrize(("d", "exact"), [(64, True), (128, True), (80, False),
                                          (96, False), (112, False), (2, True)])
def test_exponent_is_exact_only_for_powers_of_two(d, exact):
    assert ch01.exponent_is_exact(d) is exact


def test_relative_errors_vanish_for_exact_floats_and_see_one_ulp():
    theta = torch.tensor([1.0, 0.5])  # base 4, d = 4: θ = (1, 1/2), exact in float32
    assert ch01.relative_errors(theta, 4.0).tolist() == [0.0, 0.0]
    above = torch.nextafter(torch.tensor(0.5), torch.tensor(1.0))  # one float32 ulp up
    off = torch.tensor([1.0, float(above)])
    err = ch01.relative_errors(off, 4.0)
    assert err[0] == 0 and err[1] == pytest.approx(2.0**-23)


def test_turns_completed_counts_full_turns_of_a_table():
    for theta, length in ((1.0, 14), (0.3, 200), (2.5, 50)):
        a = theta * torch.arange(length, dtype=torch.float64)
        table = torch.polar(torch.ones_like(a), a)[:, None]
        want = math.floor((length - 1) * theta / (2 * math.pi))
        assert ch01.turns_completed(table).tolist() == [want]


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="d must be"):
        ch01.exact_theta(7, 10000.0)
    with pytest.raises(ValueError, match="base"):
        ch01.exact_wavelengths(8, 1.0)
    with pytest.raises(ValueError, match="1-d"):
        ch01.relative_errors(torch.ones(2, 2), 10000.0)
    with pytest.raises(ValueError, match="complex"):
        ch01.turns_completed(torch.ones(4, 2))


def test_reference_solution_matches_the_exact_frequencies():
    from ropelab.book.solutions import ch01 as solutions

    for d, base in ((8, 10000.0), (80, 500000.0), (128, 10000.0)):
        theta = solutions.inv_freq(d, base)
        assert theta.dtype == torch.float32 and theta.shape == (d // 2,)
        # float64 rounded once: within float32's unit roundoff of the exact value
        assert float(ch01.relative_errors(theta, base).max()) <= 2.0**-24 * (1 + 1e-9)
