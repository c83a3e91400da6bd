"""Chapter 11's plumbing (a trained model): the table of how far each pair turns
within a length, and the numbers the chapter reads off the toy's attention maps.

The toy model and its task are :mod:`ropelab.book.toy`; the tables read from the
results file are :mod:`ropelab.book.results`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from torch import Tensor

__all__ = ["attention_readout", "turns_table"]


def _times(k: int) -> str:
    return "L" if k == 1 else f"{k}L"


def turns_table(theta: Tensor, turns: Mapping[int, Tensor], *, every: int = 3) -> str:
    """Every ``every``-th pair j: its wavelength λ_j = 2π/θ_j and its turns by length.

    ``theta`` is ``(d/2,)``; ``turns[k]`` is ``(d/2,)``, the turns of every pair over
    a sequence of ``k`` training lengths (the chapter's ``(kL - 1)·θ_j / 2π``), a
    column headed ``turns in kL``.
    """
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    heads = [f"turns in {_times(k)}" for k in turns]
    lines = [f"{'pair j':>6}{'λ_j':>9}" + "".join(f"{h:>{len(h) + 2}}" for h in heads)]
    for j in range(0, len(theta), every):
        cells = "".join(
            f"{float(t[j]):>{len(h) + 2}.2f}" for h, t in zip(heads, turns.values())
        )
        lines.append(f"{j:>6}{2 * math.pi / float(theta[j]):>9.1f}" + cells)
    return "\n".join(lines)


def attention_readout(
    maps: Mapping[int, tuple[Tensor, Tensor]],
    value_positions: Mapping[int, int],
    train_len: int,
    *,
    detector: int = 1,
) -> str:
    """The numbers the chapter reads off one sequence's attention at each length.

    ``maps[n]`` is the first and the second layer's attention of one sequence of n
    tokens, each ``(heads, n, n)``; its value sits at ``value_positions[n]``, the
    marker just before it, the query last. ``detector`` is the first-layer head that
    looks one step back for the marker.

    At ``train_len``, one line: each second-layer head's weight from the query on the
    value, and the detector's weight from the value on the marker. At every other
    length, two: the other queries that put more than 0.5 on the marker (how many,
    the first and the last, and the weight at the keys the second layer fetches),
    then each second-layer head's largest weight from the query (the key it
    fetches) and the most any head puts on the value.
    """
    lines = []
    for n, (first, second) in maps.items():
        v, name = value_positions[n], _times(n // train_len)
        fetch = second[:, -1]  # (heads, n): the query's row in layer 2
        if n == train_len:
            on_value = [f"{w:.4f}" for w in fetch[:, v].tolist()]
            lines.append(f"{name}: layer 2 on the value {on_value} | layer 1 head "
                         f"{detector}, value on marker {first[detector, v, v - 1]:.2f}")
            continue
        on_marker = first[detector, :, v - 1].clone()
        on_marker[v] = 0.0  # the value's own row: the detector doing its job
        fired = (on_marker > 0.5).nonzero().flatten().tolist()
        top = fetch.argmax(-1).tolist()  # the key each head fetches
        at = sorted(set(top))
        span = f", at {fired[0]} to {fired[-1]}" if fired else ""
        lines.append(
            f"{name}: {len(fired)} other queries put > 0.5 on the marker{span}; "
            f"at {', '.join(map(str, at))}: "
            + ", ".join(f"{on_marker[p]:.3f}" for p in at)
        )
        lines.append(
            f"{name}: layer 2 on {', '.join(map(str, top))}: "
            + ", ".join(f"{fetch[h, p]:.2f}" for h, p in enumerate(top))
            + f"; on the value: at most {fetch[:, v].max():.0e}"
        )
    return "\n".join(lines)
