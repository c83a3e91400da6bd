"""ropelab.book.ch02: the Euler form in numpy, and the three bfloat16 paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ropelab.book import ch02

pytest.importorskip("transformers")


def test_numpy_theta_is_the_ladder():
    np.testing.assert_allclose(ch02.numpy_theta(4, 100.0), [1.0, 0.1], rtol=1e-15)
    with pytest.raises(ValueError, match="d must be"):
        ch02.numpy_theta(5)


def test_sinusoid_is_vaswanis_encoding_in_pairs():
    theta = torch.tensor([1.0, 0.1], dtype=torch.float64)
    want = [math.sin(3.0), math.cos(3.0), math.sin(0.3), math.cos(0.3)]
    want = torch.tensor(want, dtype=torch.float64)
    torch.testing.assert_close(ch02.sinusoid(3, theta), want, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="inv_freq must be"):
        ch02.sinusoid(3, theta[None])


def test_euler_rotate_turns_a_unit_pair_by_m_radians():
    x = torch.tensor([[1.0, 0.0]] * 3, dtype=torch.float64)  # d = 2: θ_0 = 1
    got = ch02.euler_rotate(x, [0, 1, 7])
    want = torch.tensor([[math.cos(m), math.sin(m)] for m in (0, 1, 7)],
                        dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-15)


def test_euler_rotate_is_the_pair_formula_written_out():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    got = ch02.euler_rotate(x, range(3, 8), base=100.0)
    want = torch.empty_like(x)
    for s, m in enumerate(range(3, 8)):
        for j, theta in enumerate((1.0, 0.1)):  # 100^(-2j/4)
            c, si = math.cos(m * theta), math.sin(m * theta)
            a, b = x[:, s, 2 * j], x[:, s, 2 * j + 1]
            want[:, s, 2 * j], want[:, s, 2 * j + 1] = a * c - b * si, b * c + a * si
    torch.testing.assert_close(got, want, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="positions"):
        ch02.euler_rotate(x, range(4))


def test_closed_form_scores_are_the_rotated_dot_products():
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)
    t = torch.arange(-3, 4)
    torch.testing.assert_close(ch02.closed_form_scores(q, q, t), torch.cos(t.double()))
    torch.manual_seed(1)
    q, k = torch.randn(2, 8, dtype=torch.float64)
    rq = ch02.euler_rotate(q.expand(6, 8), range(6))
    rk = ch02.euler_rotate(k.expand(6, 8), range(6))
    dist = torch.arange(6)[:, None] - torch.arange(6)[None, :]
    torch.testing.assert_close(ch02.closed_form_scores(q, k, dist), rq @ rk.T,
                               rtol=0, atol=1e-13)


def test_bfloat16_paths_round_once_or_five_times():
    torch.manual_seed(2)
    x = torch.randn(1, 2, 16, 32).to(torch.bfloat16)
    paths = ch02.bfloat16_paths(x, range(16))
    (r_meta, meta), (r_ours, ours), (r_hf, hf) = paths.values()
    assert (r_meta, r_ours, r_hf) == (1, 1, 5)
    assert torch.equal(meta, ours) and meta.dtype == hf.dtype == torch.bfloat16
    exact = ch02.euler_rotate(x, range(16))
    nearest = exact.to(torch.bfloat16)
    assert int((meta != nearest).sum()) <= 2  # double rounding near a midpoint, rarely
    assert int((hf != nearest).sum()) > 0.1 * x.numel()
    assert (hf.double() - exact).abs().max() < 0.05
    with pytest.raises(ValueError, match="bfloat16"):
        ch02.bfloat16_paths(x.float(), range(16))


def test_reference_solution_rotates_a_pair_as_the_real_formula():
    from ropelab.book.solutions import ch02 as solutions

    cases = ((1.0, 0.0, 1, 1.0), (0.3, -1.2, 7, 0.5), (2.0, 0.5, 1000, 1e-3))
    for x1, x2, m, theta in cases:
        c, s = math.cos(m * theta), math.sin(m * theta)
        got = solutions.rotate_pair(x1, x2, m, theta)
        assert got == pytest.approx((x1 * c - x2 * s, x2 * c + x1 * s), abs=1e-12)
