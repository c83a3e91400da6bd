"""ropelab.book.ch04: R written out in numpy, the executed operations, the timings."""

from __future__ import annotations

import math

import pytest
import torch

from ropelab.book import ch04

pytest.importorskip("transformers")


def test_numpy_rotation_matrix_by_hand():
    # d = 4, base 100: θ = (1, 0.1); position 2 turns pair 0 by 2 rad, pair 1 by 0.2
    c0, s0, c1, s1 = math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)
    f64 = torch.float64
    inter = torch.tensor([[c0, -s0, 0, 0], [s0, c0, 0, 0],
                          [0, 0, c1, -s1], [0, 0, s1, c1]], dtype=f64)
    half = torch.tensor([[c0, 0, -s0, 0], [0, c1, 0, -s1],
                         [s0, 0, c0, 0], [0, s1, 0, c1]], dtype=f64)
    r_int = ch04.numpy_rotation_matrix(2, 4, 100.0)
    r_half = ch04.numpy_rotation_matrix(2, 4, 100.0, layout="half_split")
    torch.testing.assert_close(r_int, inter, rtol=0, atol=1e-15)
    torch.testing.assert_close(r_half, half, rtol=0, atol=1e-15)
    assert torch.equal(ch04.numpy_rotation_matrix(0, 6), torch.eye(6, dtype=f64))
    with pytest.raises(ValueError, match="layout"):
        ch04.numpy_rotation_matrix(1, 4, layout="paired")


def test_executed_operations_per_vector():
    for d in (8, 32):
        ops = ch04.executed_operations(d, seq=4)
        assert ops["multiply-adds"] == d * d    # one per entry of R, zeros included
        assert ops["multiplications"] == 2 * d          # x·cos and rot(x)·sin
        assert ops["additions"] == d
        assert ops["negations"] == d // 2               # rotate_half negates one half


def test_time_forms_returns_a_positive_time_per_form():
    rows = ch04.time_forms((8,), seq=4, min_run_time=0.001)
    assert [r[0] for r in rows] == [8]
    assert all(t > 0 for _, *ts in rows for t in ts)


def test_reference_solution_is_r_written_out():
    from ropelab import inv_freq
    from ropelab.book.solutions import ch04 as solutions

    theta = inv_freq(16, dtype=torch.float64)
    for m in (0, 5, 1234):
        torch.testing.assert_close(solutions.rotation_matrix(m, theta),
                                   ch04.numpy_rotation_matrix(m, 16),
                                   rtol=0, atol=1e-12)
