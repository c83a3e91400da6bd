"""Tests for ropelab.frequencies."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ropelab.frequencies import full_turn_pairs, wavelengths

# --- chapter 01 additions ---

# full_turn_pairs: the number of pairs j with λ_j = 2π·base^(2j/d) <= L.


def test_full_turn_pairs_worked_example():
    # d = 8, base = 10^4: θ = 1, 10^-1, 10^-2, 10^-3, so λ = 2π, 20π, 200π, 2000π
    # ≈ 6.28, 62.83, 628.32, 6283.19 tokens.
    assert full_turn_pairs(8, 10000.0, 0) == 0
    assert full_turn_pairs(8, 10000.0, 6) == 0
    assert full_turn_pairs(8, 10000.0, 2 * math.pi) == 1  # λ_0 = 2π exactly: "at most" includes it
    assert full_turn_pairs(8, 10000.0, 62) == 1
    assert full_turn_pairs(8, 10000.0, 63) == 2
    assert full_turn_pairs(8, 10000.0, 100) == 2
    assert full_turn_pairs(8, 10000.0, 629) == 3
    assert full_turn_pairs(8, 10000.0, 6283) == 3
    assert full_turn_pairs(8, 10000.0, 6284) == 4
    assert full_turn_pairs(8, 10000.0, 10**9) == 4  # capped at d/2


def test_full_turn_pairs_llama_values():
    # d = 128: (d/2)·log(L/2π)/log(base), floored, plus one (worked out in the chapter).
    assert full_turn_pairs(128, 10000.0, 2048) == 41
    assert full_turn_pairs(128, 10000.0, 8192) == 50
    assert full_turn_pairs(128, 500000.0, 8192) == 35
    assert full_turn_pairs(128, 500000.0, 131072) == 49


def test_full_turn_pairs_on_a_wavelength_counts_it():
    # L exactly equal to a (float64) wavelength: that pair is included, the next is not.
    lam = wavelengths(64, 10000.0).tolist()
    for j, value in enumerate(lam):
        assert full_turn_pairs(64, 10000.0, value) == j + 1
        assert full_turn_pairs(64, 10000.0, math.nextafter(value, 0.0)) == j


@pytest.mark.parametrize(
    "args, err",
    [
        ((7, 10000.0, 100), ValueError),
        ((8, 1.0, 100), ValueError),
        ((8, 10000.0, -1), ValueError),
        ((8, 10000.0, float("nan")), ValueError),
        ((8, 10000.0, float("inf")), ValueError),
        ((8, 10000.0, "100"), TypeError),
        ((8, 10000.0, True), TypeError),
    ],
)
def test_full_turn_pairs_rejects_bad_arguments(args, err):
    with pytest.raises(err):
        full_turn_pairs(*args)


dims = st.integers(1, 128).map(lambda h: 2 * h)
bases = st.floats(1.5, 1e7, allow_nan=False)
lengths = st.floats(0.0, 1e8, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(dim=dims, base=bases, length=lengths)
def test_full_turn_pairs_equals_direct_count(dim, base, length):
    direct = int((wavelengths(dim, base) <= length).sum())
    assert full_turn_pairs(dim, base, length) == direct


@settings(max_examples=60, deadline=None)
@given(dim=dims, base=bases, a=lengths, b=lengths)
def test_full_turn_pairs_monotone_in_context_len(dim, base, a, b):
    lo, hi = sorted((a, b))
    assert 0 <= full_turn_pairs(dim, base, lo) <= full_turn_pairs(dim, base, hi) <= dim // 2


@settings(max_examples=60, deadline=None)
@given(dim=dims, a=bases, b=bases, length=lengths)
def test_full_turn_pairs_monotone_in_base(dim, a, b, length):
    # A larger base stretches every wavelength, so fewer pairs fit in the context.
    lo, hi = sorted((a, b))
    assert full_turn_pairs(dim, hi, length) <= full_turn_pairs(dim, lo, length)
