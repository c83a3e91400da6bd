"""Chapter 11's figures (trained model): attention, entropy and accuracy by length."""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure

from ._style import MAX_WIDTH, finish, new_figure

__all__ = ["toy_attention", "attention_entropy_by_length", "extrapolation_accuracy"]


def toy_attention(maps: dict, *, value_positions: dict, train_len: int) -> Figure:
    """The toy decoder's attention for one sequence per length: the previous-token head
    and the query's row (11).

    One row of panels per length. Left: the first layer's head that attends
    one position back, as a heatmap over every query and key position, the
    marker's key column (one before the value) dotted, and a red ring on each
    query other than the value that puts over half its weight on the marker
    (the marker detector misfiring). Right: the second layer's attention
    from the query (last position) over all key positions, one line per head,
    with the value's position marked.

    Args:
        maps: length -> ``(layer1, layer2)``, each ``(heads, seq, seq)`` attention
            weights.
        value_positions: length -> the value's position in that sequence.
        train_len: the training length L (marked on the right panels).
    """
    fig, axes = new_figure(
        len(maps), 2, width=MAX_WIDTH, height=3.3 * len(maps) + 0.4, squeeze=False
    )
    for (left, right), (length, (first, second)) in zip(axes, maps.items()):
        first = first.detach().to("cpu", torch.float64)
        second = second.detach().to("cpu", torch.float64)
        prev = first.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
        head = int(prev.argmax())
        window = first[head]
        extent = (-0.5, length - 0.5, length - 0.5, -0.5)
        image = left.imshow(
            window.numpy(),
            cmap="viridis",
            vmin=0.0,
            vmax=1.0,
            extent=extent,
            interpolation="nearest",
        )
        fig.colorbar(image, ax=left, shrink=0.85, label="attention weight")
        left.axvline(value_positions[length] - 1, color="w", linestyle=":", lw=0.8)
        marker = value_positions[length] - 1
        on_marker = window[:, marker].clone()
        on_marker[marker + 1] = 0.0  # the value's row is the detector working
        rows = torch.nonzero(on_marker > 0.5).flatten()
        if len(rows):
            left.scatter(
                [marker] * len(rows),
                rows.numpy(),
                s=40,
                facecolors="none",
                edgecolors="r",
                linewidths=1.0,
                label="> 0.5 on the marker,\nnot from the value",
            )
            left.legend(loc="upper right", fontsize="small")
        left.set_xlabel("key position n (tokens)")
        left.set_ylabel("query position m (tokens)")
        left.set_title(f"layer 1, head {head}, length {length}")
        for h in range(second.shape[0]):
            right.plot(
                range(length), second[h, -1].numpy(), label=f"head {h}", linewidth=1.0
            )
        right.axvline(value_positions[length], color="k", linestyle=":", label="value")
        if length > train_len:
            right.axvspan(
                -0.5,
                length - train_len - 0.5,
                color="0.9",
                label=f"> L = {train_len} back",
            )
        right.set_xlabel("key position n (tokens)")
        right.set_ylabel("attention weight")
        right.set_title(f"layer 2, the query's row, length {length}")
        right.set_ylim(0.0, 1.05)
        right.legend(loc="upper right")
    return finish(
        fig, "Where the trained model looks, at its training length and beyond"
    )


def attention_entropy_by_length(lengths, entropies: dict) -> Figure:
    """Mean attention entropy of the query's row against sequence length, with log n for
    uniform attention (11).

    Args:
        lengths: the sequence lengths (tokens).
        entropies: line label -> one entropy (nats) per length.
    """
    fig, ax = new_figure()
    lengths = list(lengths)
    for label, values in entropies.items():
        ax.plot(lengths, list(values), marker="o", label=label)
    ax.plot(
        lengths,
        [math.log(n) for n in lengths],
        color="0.5",
        linestyle="--",
        label="uniform, log n",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("attention entropy (nats)")
    ax.legend()
    return finish(fig, "Attention spreads out beyond the training length")


def extrapolation_accuracy(
    results, *, methods=None, train_len: int, title: str
) -> Figure:
    """Accuracy against length for each method, without and with fine-tuning, side by
    side (11).

    Args:
        results: rows as in ``ropelab.book.extrapolate`` (method, finetune_steps,
            length, accuracy), optionally with ``low`` and ``high``: an interval
            drawn as an error bar (points of one length are spread a little
            sideways so that the bars stay apart).
        methods: the method names to draw, in order (default: all, in first-seen order).
        train_len: the training length L (a dotted line).
        title: the figure's title.
    """
    names = (
        list(dict.fromkeys(r["method"] for r in results))
        if methods is None
        else list(methods)
    )
    steps = sorted({r["finetune_steps"] for r in results})
    fig, axes = new_figure(
        1, len(steps), width=MAX_WIDTH, height=4.6, sharey=True, squeeze=False
    )
    for ax, n_steps in zip(axes[0], steps):
        for i, name in enumerate(names):
            rows = sorted(
                (
                    r
                    for r in results
                    if r["method"] == name and r["finetune_steps"] == n_steps
                ),
                key=lambda r: r["length"],
            )
            if rows:  # a marker and dash per method: lines that coincide stay apart
                x = [r["length"] * 1.03 ** (i - len(names) / 2) for r in rows]
                y = [r["accuracy"] for r in rows]
                spread = None
                if all("low" in r and "high" in r for r in rows):
                    spread = [
                        [a - r["low"] for a, r in zip(y, rows)],
                        [r["high"] - a for a, r in zip(y, rows)],
                    ]
                ax.errorbar(
                    x,
                    y,
                    yerr=spread,
                    label=name,
                    marker="osD^vPX*"[i % 8],
                    linestyle=("-", "--", "-.", ":")[i % 4],
                    alpha=0.85,
                    capsize=2 if spread else 0,
                )
        lengths = sorted({r["length"] for r in results})
        ax.axvline(train_len, color="0.5", linestyle=":", label=f"L = {train_len}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("evaluation length (tokens)")
        ax.set_title(
            "no fine-tuning" if n_steps == 0 else f"after {n_steps} fine-tuning steps"
        )
    axes[0][0].set_ylabel("accuracy (fraction of answers right)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4)
    return finish(fig, title)
