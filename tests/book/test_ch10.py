"""Tests for ropelab.book.ch10: the table of a 2D score along three lines."""

import pytest
import torch

from ropelab.book import ch10


def test_axis_table_reads_row_column_and_diagonal_from_the_centre():
    # S(Δx, Δy) = f(Δx) + g(Δy) on offsets -2..2, worked by hand
    f = torch.tensor([1.0, 3.0, 10.0, 3.0, 2.0])
    g = torch.tensor([0.5, 4.0, 20.0, 4.0, 1.0])
    table = ch10.axis_table(f[:, None] + g[None, :], ks=(1, 2)).splitlines()
    assert table[0] == "S(0, 0) = |q|² = 30.00, the largest |S|: 30.00"
    assert table[2].split() == ["1", "23.00", "14.00", "7.00"]  # f(1)+g(0), f(0)+g(1)
    assert table[3].split() == ["2", "22.00", "11.00", "3.00"]


def test_axis_table_refuses_an_even_table_and_steps_past_its_edge():
    with pytest.raises(ValueError, match="square"):
        ch10.axis_table(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="half-width 1"):
        ch10.axis_table(torch.zeros(3, 3), ks=(2,))


def test_init_directions_reads_each_halfs_first_pair_in_degrees():
    theta = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [0.0, 1.0]],
                          [[0.0, -1.0], [0.0, -1.0], [1.0, 1.0], [5.0, 5.0]]])
    lines = ch10.init_directions(theta).splitlines()
    assert lines == ["head 0: pairs 0-1 at    0.0°, 2-3 at   90.0°",
                     "head 1: pairs 0-1 at  -90.0°, 2-3 at   45.0°"]


def test_init_directions_of_mixed_init_are_a_quarter_turn_apart():
    from ropelab.multi_axis import mixed_theta_init

    init = mixed_theta_init(16, 3, generator=torch.Generator().manual_seed(0))
    for line in ch10.init_directions(init).splitlines():
        first, second = (float(s.rstrip("°,")) for s in line.split()[5::3])
        assert (second - first) % 360 == pytest.approx(90.0, abs=0.11)
    with pytest.raises(ValueError, match="heads, d/2, 2"):
        ch10.init_directions(torch.zeros(4, 2))
