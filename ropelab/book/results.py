"""Seeds, intervals and tables of chapter 11's results file (``extrapolate.json``).

:func:`merge` combines the files of separate ``python -m ropelab.book.extrapolate``
runs; :func:`summary` and :func:`spread_table` give each accuracy with its spread
over seeds and Wilson's interval (:func:`wilson`), :func:`base_table` for the models
trained at other bases and :func:`distance_table` by how far back the value sits;
:func:`table` prints one seed's.
:mod:`ropelab.book.extrapolate` re-exports every public name here.
"""

from __future__ import annotations

import copy
import json
import os
from importlib import resources
from typing import Any, Mapping, Sequence

__all__ = [
    "wilson",
    "merge",
    "summary",
    "spread_table",
    "base_table",
    "distance_table",
    "table",
    "load",
    "shipped_results",
]


def wilson(right: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson's 95 % score interval for ``right`` successes in ``n`` trials."""
    if n < 1 or not 0 <= right <= n:
        raise ValueError(f"need 0 <= right <= n and n >= 1, got {right}, {n}")
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    low = 0.0 if right == 0 else max(0.0, centre - half)
    high = 1.0 if right == n else min(1.0, centre + half)
    return low, high


def merge(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One results dict from runs of the same experiment (``--merge``).

    The runs may differ in their seed and in which methods, remappings,
    scales, ablations and bases they ran (a zero-shot pass with
    ``--finetune-steps 0`` and a pass that fine-tunes a few methods, say),
    but not in anything that changes a row's value: the model, lengths,
    training steps, samples, thread count, and the fine-tuning steps of the
    runs that fine-tune. Rows, distance bins and run records are
    concatenated in seed order (one run's rows that another already has,
    the same key with the same values, are dropped); list settings become
    the union, ``settings["seeds"]`` the seeds and ``settings["seed"]`` the
    first, the seed of the shipped weights. Raises ValueError if the runs
    disagree, or give one row two different values.
    """
    if not parts:
        raise ValueError("merge needs at least one results dict")
    parts = sorted(parts, key=lambda p: min(_seeds(p)))
    listed = ("seed", "seeds", "finetune_steps", "other_bases", "methods", "remaps",
              "ntk_scales", "ablations")

    def core(p: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in p["settings"].items() if k not in listed}

    for p in parts[1:]:
        if core(p) != core(parts[0]) or p["config"] != parts[0]["config"]:
            raise ValueError("the runs differ in more than their seed and methods")
    steps = {p["settings"]["finetune_steps"] for p in parts} - {0}
    if len(steps) > 1:
        raise ValueError(f"the runs fine-tune for different steps: {sorted(steps)}")
    out = copy.deepcopy(dict(parts[0]))
    settings = out["settings"]
    settings["finetune_steps"] = steps.pop() if steps else 0
    for key in ("other_bases", "methods", "ntk_scales", "ablations"):
        settings[key] = list(
            dict.fromkeys(x for p in parts for x in p["settings"][key])
        )
    settings["remaps"] = {
        k: v for p in parts for k, v in p["settings"]["remaps"].items()
    }
    seeds = sorted({s for p in parts for s in _seeds(p)})
    settings["seed"], settings["seeds"] = seeds[0], seeds
    for key, fields in (
        ("results", ("method", "finetune_steps", "length", "seed")),
        ("by_distance", ("method", "finetune_steps", "length", "lo", "seed")),
    ):
        rows: dict[tuple, dict[str, Any]] = {}
        for p in parts:
            for r in p.get(key, []):
                k = tuple(r[f] for f in fields)
                if k in rows and rows[k] != r:
                    raise ValueError(f"two runs give {k} different values")
                rows.setdefault(k, r)
        out[key] = sorted(rows.values(), key=lambda r: r["seed"])
    out["runs"] = [x for p in parts for x in p.get("runs", [])]
    return out


def _seeds(data: Mapping[str, Any]) -> list[int]:
    s = data["settings"]
    return list(s.get("seeds", [s["seed"]]))


def summary(
    rows: Sequence[Mapping[str, Any]], samples: int
) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Accuracy over seeds for each (method, fine-tune steps, length).

    Returns, per key: ``accuracies`` (in seed order), ``mean``, ``sd`` (sample
    standard deviation over seeds, 0 for one seed), ``min``, ``max``, and
    ``low``/``high``: the lowest and highest end of any seed's Wilson 95 %
    interval on ``samples`` sequences (:func:`wilson`), an envelope of
    evaluation noise and seed spread together.
    """
    grouped: dict[tuple[str, int, int], list[tuple[int, float]]] = {}
    for r in rows:
        key = (r["method"], r["finetune_steps"], r["length"])
        grouped.setdefault(key, []).append((r.get("seed", 0), r["accuracy"]))
    out = {}
    for key, pairs in grouped.items():
        acc = [a for _, a in sorted(pairs)]
        mean = sum(acc) / len(acc)
        var = sum((a - mean) ** 2 for a in acc) / max(1, len(acc) - 1)
        ends = [wilson(round(a * samples), samples) for a in acc]
        out[key] = {
            "accuracies": acc,
            "mean": mean,
            "sd": var**0.5,
            "min": min(acc),
            "max": max(acc),
            "low": min(e[0] for e in ends),
            "high": max(e[1] for e in ends),
        }
    return out


def _end(x: float) -> str:
    return "1" if x >= 0.995 else f"{x:.2f}"[1:]


def spread_table(
    data: Mapping[str, Any],
    keys: Sequence[tuple[str, int]],
    *,
    labels: Mapping[str, str] | None = None,
    lengths: Sequence[int] | None = None,
) -> str:
    """Accuracy over seeds, one row per (method, fine-tune steps) in ``keys``.

    A cell is the mean over the seeds, then the lowest and highest end of any
    seed's Wilson 95 % interval (:func:`summary`), e.g. ``0.97 .93–1``; the
    last column counts the seeds. ``labels`` renames methods.
    """
    stats = summary(data["results"], data["settings"]["samples"])
    train_len = data["train_length"]
    if lengths is None:
        lengths = sorted({n for (m, st, n) in stats if (m, st) in set(keys)})
    labels = labels or {}
    head = f"{'':<24}" + "".join(f"{f'{n // train_len}L':>13}" for n in lengths)
    lines = [head + "  seeds"]
    for name, steps in keys:
        label = labels.get(name, name) + (f", {steps} ft" if steps else "")
        cells, seeds = "", 0
        for n in lengths:
            st = stats.get((name, steps, n))
            if st is None:
                cells += f"{'':>13}"
                continue
            seeds = max(seeds, len(st["accuracies"]))
            text = f"{st['mean']:.2f} {_end(st['low'])}–{_end(st['high'])}"
            cells += f"{text:>13}"
        lines.append(f"{label:<24}{cells}  {seeds:>5}")
    return "\n".join(lines)


def base_table(data: Mapping[str, Any], bases: Sequence[float]) -> str:
    """:func:`spread_table` of the models trained at each of ``bases``, as trained.

    The model at the experiment's own base is the method ``"none"``, one at another
    base ``"base=<b>"`` (``--other-bases``); rows are labelled ``base <b>``.
    """
    own = data["settings"]["base"]
    keys = {b: "none" if b == own else f"base={b:g}" for b in bases}
    return spread_table(
        data, [(k, 0) for k in keys.values()],
        labels={k: f"base {b:g}" for b, k in keys.items()},
    )


def distance_table(data: Mapping[str, Any], methods: Mapping[str, str]) -> str:
    """Accuracy by how far back the value sits, a column per method (``by_distance``).

    ``methods`` maps a method's name to its column's heading. A row is a bin of
    distances and its count n of the evaluation sequences; a cell is the mean over
    the seeds of the bin's accuracy, then the lowest and highest end of any seed's
    Wilson 95 % interval (:func:`wilson`), e.g. ``0.96 0.75–1.00``.
    """
    runs: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
    count: dict[tuple[int, int], int] = {}
    lengths = set()
    for b in data["by_distance"]:
        runs.setdefault((b["method"], b["lo"], b["hi"]), []).append(
            (b["right"], b["count"])
        )
        count[(b["lo"], b["hi"])] = b["count"]
        lengths.add(b["length"])
    if len(lengths) != 1:
        raise ValueError(f"the bins must come from one length, got {sorted(lengths)}")
    times = lengths.pop() // data["train_length"]
    heads = "".join(f"{h:>16}" for h in methods.values())
    lines = [f"at {times}L, value back by    n" + heads]
    for lo, hi in sorted(count):
        cells = ""
        for m in methods:
            seeds = runs[(m, lo, hi)]
            ends = [wilson(r, n) for r, n in seeds]
            mean = sum(r / n for r, n in seeds) / len(seeds)
            low, high = min(e[0] for e in ends), max(e[1] for e in ends)
            cells += f"{f'{mean:.2f} {low:.2f}–{high:.2f}':>16}"
        lines.append(f"{f'{lo}–{hi - 1} tokens':<20}{count[(lo, hi)]:>5}" + cells)
    return "\n".join(lines)


def table(data: Mapping[str, Any]) -> str:
    """The results as a table: a row per method and fine-tune, accuracy by length.

    With several seeds, the first seed's (the shipped weights') accuracies.
    """
    first = _seeds(data)[0] if "settings" in data else None
    lengths = sorted({r["length"] for r in data["results"]})
    keys: dict[tuple[str, int], dict[int, float]] = {}
    for r in data["results"]:
        if first is not None and r.get("seed", first) != first:
            continue
        keys.setdefault((r["method"], r["finetune_steps"]), {})[r["length"]] = r[
            "accuracy"
        ]
    head = f"{'method':<14}{'fine-tune':>10}" + "".join(f"{n:>8}" for n in lengths)
    lines = [head, "-" * len(head)]
    for (name, steps), acc in keys.items():
        lines.append(
            f"{name:<14}{steps:>10}"
            + "".join(f"{acc[n]:>8.3f}" if n in acc else f"{'':>8}" for n in lengths)
        )
    return "\n".join(lines)


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a results file written by ``--json``."""
    with open(path) as f:
        return json.load(f)


def shipped_results() -> dict[str, Any]:
    """The results the book ships (``data/extrapolate.json``, the default options)."""
    return json.loads(
        resources.files("ropelab.book").joinpath("data/extrapolate.json").read_text()
    )
