"""Chapter 09's figures (performance): counted bytes, and measured ratios to copy_."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass

from matplotlib.figure import Figure

from ropelab.book.cost import cost_model

from ._style import finish, new_figure

__all__ = ["cost_bars", "bench_ratios", "bench_grid"]


def cost_bars(methods, *, dim: int = 128, dtype: str = "float32") -> Figure:
    """Bytes each method reads, writes and allocates per token-head, by the cost model
    (09_performance).

    Stacked bars (read, written) against the floor 2·d·s, and a hatched bar
    beside each for the fresh memory it allocates, from
    :func:`ropelab.book.cost.cost_model` for a ``dim``-channel head in ``dtype``.

    Args:
        methods: names from ``ropelab.book.cost.METHODS``.
        dim: head dimension d.
        dtype: the dtype of x, e.g. ``"float32"``.
    """
    costs = [cost_model(dim, dtype, method=m) for m in methods]
    if not costs:
        raise ValueError("methods is empty")
    floor = 2 * dim * costs[0].itemsize
    fig, ax = new_figure(width=6.4, height=4.2)
    xs = range(len(costs))
    ax.bar(
        [x - 0.2 for x in xs],
        [c.bytes_read / floor for c in costs],
        0.4,
        color="C0",
        label="read",
    )
    ax.bar(
        [x - 0.2 for x in xs],
        [c.bytes_written / floor for c in costs],
        0.4,
        bottom=[c.bytes_read / floor for c in costs],
        color="C1",
        label="written",
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [c.bytes_allocated / floor for c in costs],
        0.4,
        color="white",
        edgecolor="C2",
        hatch="//",
        label="allocated",
    )
    ax.axhline(1.0, color="0.2", ls="--", lw=1.2, label="the floor 2ds = 1")
    ax.set_xticks(list(xs), list(methods), rotation=35, ha="right")
    ax.set_xlabel("method")
    ax.set_ylabel("bytes per token-head / 2ds")
    ax.grid(True, axis="y", alpha=0.3)
    # below the axes: inside, the legend would cover the last method's bars
    fig.legend(loc="outside lower center", ncol=4)
    return finish(fig, f"Bytes moved and allocated per token-head, d = {dim}, {dtype}")


def bench_ratios(results, *, model: bool = True) -> Figure:
    """Measured time of each method over its memory floor: bars per method and shape,
    one panel per dtype (09_performance).

    The y axis is log scaled. A dashed line marks the floor (1×: ``copy_``,
    which reads and writes the same bytes into a preallocated buffer), a grey
    band the HF formula ``x*cos + rotate_half(x)*sin``. With ``model`` a black
    tick per method marks the bytes it moves over the floor's, by
    :func:`ropelab.book.cost.cost_model` (eq. ``perf-floor``): where the bar stands
    far above its tick, something other than memory traffic costs the time
    (allocation for ``clone`` and every method that returns new tensors,
    arithmetic for the dense R, per-call overhead for tiny tensors).

    Args:
        results: :class:`ropelab.bench.Result` objects or their dicts (as in
            a ``--json`` file), any shapes and dtypes; methods without a time
            (skipped) get no bar.
        model: draw the cost model's ratio as a tick per method.

    Returns:
        A Figure with one axis per dtype.
    """
    rows = [asdict(r) if is_dataclass(r) else dict(r) for r in results]
    if not rows:
        raise ValueError("results is empty")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    shapes = list(dict.fromkeys(tuple(r["shape"]) for r in rows))
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m != "copy_"]
    width = 0.8 / len(shapes)
    fig, axes = new_figure(
        len(dtypes),
        1,
        width=6.8,
        height=1.6 + 3.4 * len(dtypes),
        sharex=True,
        squeeze=False,
    )
    for ax, dtype in zip(axes[:, 0], dtypes):
        table = {
            (tuple(r["shape"]), r["method"]): r for r in rows if r["dtype"] == dtype
        }
        if "hf" in methods:
            i = methods.index("hf")
            ax.axvspan(
                i - 0.45, i + 0.45, color="0.88", zorder=0, label="the HF formula"
            )
        for k, shape in enumerate(shapes):
            xs, ys = [], []
            for j, method in enumerate(methods):
                r = table.get((shape, method))
                x = j + (k - (len(shapes) - 1) / 2) * width
                if r is not None and r["ratio_floor"] is not None:
                    xs.append(x)
                    ys.append(r["ratio_floor"])
                elif r is not None:
                    ax.text(
                        x,
                        1.15,
                        "skipped",
                        rotation=90,
                        ha="center",
                        va="bottom",
                        color=f"C{k}",
                    )
            ax.bar(xs, ys, width, color=f"C{k}", label=f"shape {shape}", zorder=2)
        ax.axhline(
            1.0,
            color="0.2",
            ls="--",
            lw=1.2,
            label="memory floor (copy_) = 1×",
            zorder=3,
        )
        if model:
            ticks = [
                (j, cost_model(int(shapes[0][-1]), dtype, method=m).ratio_floor)
                for j, m in enumerate(methods)
            ]
            ax.scatter(
                [j for j, _ in ticks],
                [v for _, v in ticks],
                marker="_",
                s=400,
                linewidths=2.5,
                color="k",
                zorder=4,
                label="cost model: bytes moved / floor",
            )
        ax.set_yscale("log")
        ax.set_xticks(range(len(methods)), methods, rotation=35, ha="right")
        ax.set_xlabel("method")
        ax.set_title(dtype)
        ax.set_ylabel("time / time of copy_ (×)")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return finish(
        fig, "Time of each method over the memory floor (log scale; lower is better)"
    )


def bench_grid(grid, goals=()) -> Figure:
    """apply_rotary(..., out=) over copy_ against the sequence length, one line per
    layout and axis order (09_performance).

    One panel per dtype, log-scaled sequence length; the goals' limits for
    ``copy_`` baselines are drawn as dotted steps at the lengths they cover.

    Args:
        grid: :class:`ropelab.bench.GridResult` objects or their dicts
            (a ``--json`` file's ``grid``).
        goals: the goals (dicts with ``shapes``, ``limit``, ``against``, ``dtypes``),
            optional.
    """
    rows = [asdict(r) if is_dataclass(r) else dict(r) for r in grid]
    rows = [r for r in rows if r["against"] == "copy_" and r["call"] == "out"]
    if not rows:
        raise ValueError("grid has no results against copy_")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = new_figure(
        1,
        len(dtypes),
        width=1.0 + 3.4 * len(dtypes),
        height=4.2,
        sharey=True,
        squeeze=False,
    )
    names = {"heads": "(b, h, s, d)", "positions": "(b, s, h, d)"}
    for ax, dtype in zip(axes[0], dtypes):
        series = dict.fromkeys(
            (r["layout"], r["order"]) for r in rows if r["dtype"] == dtype
        )
        for k, (layout, order) in enumerate(series):
            pts = sorted(
                (r["shape"][2], r["ratio"])
                for r in rows
                if (r["dtype"], r["layout"], r["order"]) == (dtype, layout, order)
            )
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="os^v"[k % 4],
                color=f"C{k}",
                ls="-" if order == "heads" else "--",
                label=f"{layout}, {names.get(order, order)}",
            )
        for g in goals:
            if g.get("against") == "copy_" and dtype in g.get("dtypes", ()):
                for shape in g["shapes"]:
                    s = shape[2]
                    ax.plot(
                        [s / 1.6, s * 1.6], [g["limit"]] * 2, color="0.3", ls=":", lw=2
                    )
        ax.axhline(1.0, color="0.2", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length S (tokens)")
        ax.set_title(dtype)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("time / time of copy_ (×)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return finish(fig, "apply_rotary(..., out=) over copy_ (dotted: the goals)")
