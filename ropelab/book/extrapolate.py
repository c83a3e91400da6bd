"""Train the toy decoder at L, break it at 2L..8L, repair it (11_trained_model).

``python -m ropelab.book.extrapolate --json PATH`` trains the passkey model of
:mod:`ropelab.book.toy` at ``--train-len`` L, evaluates it at L, 2L, 4L and 8L
under every method of chapter 07 (no scaling, Position Interpolation,
NTK-aware, dynamic NTK, YaRN, Llama 3), each without fine-tuning and after
``--finetune-steps`` steps at the target length (``--factor`` × L), and
trains the same model at other bases, scored as trained without scaling (the
base-choice comparison). It also scores the main model, untouched, under
chapter 13's methods that remap positions instead of frequencies (ReRoPE,
leaky ReRoPE, SelfExtend, dual chunk attention; :func:`remaps`). For a fair
comparison it adds static NTK-aware scaling at the scales dynamic NTK applies
(``--ntk-scales``, :func:`effective_scale`), and the ablations of the chapter
(``--ablations``: slow or fast pairs only, one layer only, YaRN without its
temperature, accuracy by distance, a fine-tune at the base ``--beta``).
``--seeds N`` runs N seeds one after another; ``--merge`` combines the files
of separate runs. It prints one table and writes::

    {"train_length": 64, "config": {...}, "settings": {..., "seeds": [0, ...]},
     "runs": [{"seed": 0, "weights": "trained", "cpu_kernels": "AVX2",
               "torch": "2.13.0", "command": "python -m ..."}, ...],
     "results": [{"method": "none", "base": 100.0, "finetune_steps": 0,
                  "length": 256, "accuracy": 0.24, "loss": 6.2, "seed": 0}, ...],
     "by_distance": [{"method": "none", "length": 256, "lo": 1, "hi": 32,
                      "right": 10, "count": 37, "seed": 0, ...}, ...]}

Everything runs on the CPU in float32 with deterministic algorithms and a
fixed thread count, so the same options give the same file bit for bit on
the same kernels. torch picks its CPU kernels by the vector instructions the
CPU has (AVX2, AVX-512), and they sum in different orders: the shipped
weights come from the AVX2 kernels, which :data:`SHIPPED_KERNELS` (an
environment variable, read when torch starts) selects on an x86-64 CPU with
AVX-512 too (checked on an AMD EPYC)::

    ATEN_CPU_CAPABILITY=avx2 python -m ropelab.book.extrapolate ...
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Mapping, Sequence

import torch

from ropelab.frequencies import full_turn_pairs, inv_freq
from ropelab.scaling import ntk_scaled_base, scaled_inv_freq
from ropelab.variants import (
    RemapPass,
    dual_chunk_passes,
    rerope_passes,
    self_extend_passes,
)

from .results import (
    base_table,
    distance_table,
    load,
    merge,
    shipped_results,
    spread_table,
    summary,
    table,
    wilson,
)
from .toy import (
    ToyConfig,
    ToyDecoder,
    deterministic,
    evaluate,
    evaluate_by_distance,
    train,
)

__all__ = [
    "Method",
    "methods",
    "effective_scale",
    "ntk_at",
    "ablations",
    "wilson",
    "summary",
    "spread_table",
    "base_table",
    "distance_table",
    "table",
    "merge",
    "Remap",
    "remaps",
    "Settings",
    "run",
    "load",
    "shipped_results",
    "shipped_weights",
    "train_base_model",
    "main",
    "SHIPPED_KERNELS",
]

#: The environment that selects the kernels the shipped weights came from, torch's
#: AVX2 ones. torch reads it once when it starts, so set it before the process
#: starts (``python -m ropelab.book.extrapolate`` says so on an AVX-512 CPU).
SHIPPED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2"}

DEFAULT_BASE = 100.0
OTHER_BASES = (
    25.0,
    1e6,
)  # the base-choice comparison, scored as trained (see the chapter)
METHODS = ("none", "pi", "ntk", "dynamic", "yarn", "llama3")
NTK_SCALES = (8.0, 13.0, 29.0)  # dynamic NTK's scale at 2.5L.., 4L, 8L for factor 4
ABLATIONS = ("pairs", "layers", "yarn_t1", "distance", "beta")
BETA = 2500.0  # the fine-tuning base Liu et al.'s bound gives for 8L (exercise 2)
REMAPS = ("rerope", "leaky_rerope", "self_extend", "dual_chunk")


@dataclass(frozen=True)
class Method:
    """A context extension: a rope dict for ``scaled_inv_freq`` and a base.

    The ablations set ``inv_freq`` (frequencies ``(head_dim // 2,)`` used as
    they are, in place of ``scaling``) or ``layers`` (the 0-based layers that
    get the method; the others keep the trained frequencies).
    """

    name: str
    scaling: Mapping[str, Any] | None
    base: float
    inv_freq: tuple[float, ...] | None = None
    layers: tuple[int, ...] | None = None

    def forward_kwargs(self) -> dict[str, Any]:
        """The keywords of :func:`ropelab.book.toy.evaluate` for this method."""
        theta = None if self.inv_freq is None else torch.tensor(self.inv_freq)
        return dict(
            scaling=self.scaling, base=self.base, inv_freq=theta, layers=self.layers
        )

    def theta(self, head_dim: int, length: int) -> torch.Tensor:
        """θ'_j ``(head_dim // 2,)`` float64 at sequence length ``length``."""
        if self.inv_freq is not None:
            return torch.tensor(self.inv_freq, dtype=torch.float64)
        return scaled_inv_freq(
            head_dim, self.base, self.scaling, seq_len=length, dtype=torch.float64
        )[0]


def effective_scale(method: Method, base: float, head_dim: int, length: int) -> float:
    """How much slower the method turns the slowest pair at ``length``.

    The ratio θ_{d/2-1} / θ'_{d/2-1} of the plain to the method's frequency.

    PI, NTK-aware at factor s, YaRN and Llama 3 give s at every length (all of
    them divide the slowest pair by s); dynamic NTK gives 1 up to L and
    s·n/L - (s - 1) at length n > L, e.g. 13 at 4L and 29 at 8L for s = 4.
    """
    plain = inv_freq(head_dim, base, dtype=torch.float64)
    return float(plain[-1] / method.theta(head_dim, length)[-1])


def ntk_at(base: float, head_dim: int, scale: float) -> Method:
    """Static NTK-aware scaling at ``scale``: base b·s^(d/(d-2)), named ``ntk@s``."""
    return Method(f"ntk@{scale:g}", None, ntk_scaled_base(base, scale, head_dim))


def ablations(
    base: float, head_dim: int, train_len: int, factor: float
) -> list[Method]:
    """The zero-shot ablations of 11: which pairs, which layer, YaRN's temperature.

    ``pi_slow`` divides by ``factor`` only the slow pairs, those that never
    complete a turn within ``train_len`` (λ_j > L - 1), and keeps the fast
    ones; ``pi_fast`` does the opposite. ``dynamic_layer1`` / ``_layer2``
    apply dynamic NTK to one layer only. ``yarn_t1`` is YaRN without its
    attention temperature (``attention_factor`` 1).
    """
    theta = inv_freq(head_dim, base, dtype=torch.float32)
    fast = full_turn_pairs(head_dim, base, train_len - 1)
    slow_only = torch.cat([theta[:fast], theta[fast:] / factor])
    fast_only = torch.cat([theta[:fast] / factor, theta[fast:]])
    orig = {"original_max_position_embeddings": train_len}
    dynamic = {"rope_type": "dynamic", "factor": factor, **orig}
    return [
        Method("pi_slow", None, base, inv_freq=tuple(slow_only.tolist())),
        Method("pi_fast", None, base, inv_freq=tuple(fast_only.tolist())),
        Method("dynamic_layer1", dynamic, base, layers=(0,)),
        Method("dynamic_layer2", dynamic, base, layers=(1,)),
        Method(
            "yarn_t1",
            {"rope_type": "yarn", "factor": factor, "attention_factor": 1.0, **orig},
            base,
        ),
    ]


def methods(base: float, head_dim: int, train_len: int, factor: float) -> list[Method]:
    """Chapter 07's methods extending ``train_len`` by ``factor`` (transformers dicts).

    NTK-aware has no transformers type: it is the plain frequencies at the
    base :func:`ropelab.scaling.ntk_scaled_base` gives. Dynamic NTK rescales
    with the current length and leaves lengths up to ``train_len`` alone.
    """
    orig = {"original_max_position_embeddings": train_len}
    return [
        Method("none", None, base),
        Method("pi", {"rope_type": "linear", "factor": factor}, base),
        Method("ntk", None, ntk_scaled_base(base, factor, head_dim)),
        Method("dynamic", {"rope_type": "dynamic", "factor": factor, **orig}, base),
        Method("yarn", {"rope_type": "yarn", "factor": factor, **orig}, base),
        Method(
            "llama3",
            {
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                **orig,
            },
            base,
        ),
    ]


@dataclass(frozen=True)
class Remap:
    """A position remapping (13): ``passes(seq)`` gives its RoPE passes at ``seq``."""

    name: str
    passes: Callable[[int], list[RemapPass]]
    params: Mapping[str, float]


def remaps(train_len: int, factor: float) -> list[Remap]:
    """Chapter 13's remappings, set so that no angle exceeds training at ``factor``·L.

    Window w = L/2 for all three window methods. Leaky ReRoPE's slope k and
    SelfExtend's group G are 2·factor, which keeps the largest ρ within L
    up to factor·L (w + (sL - w)/k ≤ L needs k ≥ 2s - 1 at w = L/2; the
    grouped query ⌊m/G⌋ + w - w/G stays below L for G ≥ 2s - 1 as well).
    Dual chunk attention uses chunks of 3L/4 and the training length L.
    """
    w, k = train_len // 2, max(2, int(round(2 * factor)))
    chunk = max(1, 3 * train_len // 4)
    return [
        Remap("rerope", lambda n: rerope_passes(n, w), {"window": w}),
        Remap(
            "leaky_rerope",
            lambda n: rerope_passes(n, w, leak=float(k)),
            {"window": w, "leak": k},
        ),
        Remap(
            "self_extend",
            lambda n: self_extend_passes(n, k, w),
            {"window": w, "group": k},
        ),
        Remap(
            "dual_chunk",
            lambda n: dual_chunk_passes(n, chunk, train_len),
            {"chunk": chunk, "context": train_len},
        ),
    ]


@dataclass(frozen=True)
class Settings:
    """Every option that changes the results (the CLI's flags)."""

    train_len: int = 64
    multiples: tuple[int, ...] = (1, 2, 4, 8)
    factor: float = 4.0
    steps: int = 1000
    finetune_steps: int = 100
    seed: int = 0
    samples: int = 256
    base: float = DEFAULT_BASE
    other_bases: tuple[float, ...] = OTHER_BASES
    methods: tuple[str, ...] = METHODS
    remaps: tuple[str, ...] = REMAPS
    ntk_scales: tuple[float, ...] = NTK_SCALES
    ablations: tuple[str, ...] = ABLATIONS
    beta: float = BETA
    beta_multiples: tuple[int, ...] = (1, 2, 4, 8, 16)

    @property
    def distance_edges(self) -> list[int]:
        """Bins of how far back the value sits at the target length: within L/2,
        within L, within 2L, beyond."""
        n = self.train_len
        return [1, n // 2, n - 1, 2 * n, self.target_len - 1]

    @property
    def lengths(self) -> list[int]:
        return [self.train_len * m for m in self.multiples]

    @property
    def target_len(self) -> int:
        return int(round(self.train_len * self.factor))


def train_base_model(settings: Settings, base: float | None = None) -> ToyDecoder:
    """A fresh model (seed ``settings.seed``) trained ``settings.steps`` steps at L."""
    cfg = ToyConfig(
        base=settings.base if base is None else base, train_len=settings.train_len
    )
    torch.manual_seed(settings.seed)
    model = ToyDecoder(cfg)
    train(model, steps=settings.steps, length=settings.train_len, seed=settings.seed)
    return model


def _rows(
    model: ToyDecoder,
    method: Method,
    steps: int,
    settings: Settings,
    label: str,
    remap: Remap | None = None,
    lengths: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for length in settings.lengths if lengths is None else lengths:
        if remap is None:
            score = evaluate(
                model, length, samples=settings.samples, **method.forward_kwargs()
            )
        else:
            score = evaluate(
                model, length, remap=remap.passes(length), samples=settings.samples
            )
        rows.append(
            {
                "method": label,
                "base": float(method.base),
                "finetune_steps": steps,
                "length": length,
                "accuracy": score["accuracy"],
                "loss": round(score["loss"], 6),
                "seed": settings.seed,
            }
        )
    return rows


def _finetune(model: ToyDecoder, method: Method, settings: Settings) -> ToyDecoder:
    tuned = copy.deepcopy(model)
    train(
        tuned,
        steps=settings.finetune_steps,
        length=settings.target_len,
        seed=settings.seed + 1,
        scaling=method.scaling,
        base=method.base,
        lr=1e-3,
    )
    return tuned


def _same_frequencies(a: Method, b: Method, head_dim: int, length: int) -> bool:
    """Whether two methods give the model the same tables at ``length`` (float32)."""
    if a.inv_freq is not None or b.inv_freq is not None:
        return False
    ta, sa = scaled_inv_freq(head_dim, a.base, a.scaling, seq_len=length)
    tb, sb = scaled_inv_freq(head_dim, b.base, b.scaling, seq_len=length)
    return bool(torch.equal(ta, tb)) and sa == sb


def run(
    settings: Settings = Settings(),
    *,
    threads: int = 1,
    log=None,
    models: dict[str, ToyDecoder] | None = None,
    trained: ToyDecoder | None = None,
) -> dict[str, Any]:
    """The whole experiment: the results dict that ``--json`` writes (module docstring).

    ``log`` (e.g. ``print``) receives one line per finished step; ``models``,
    if a dict, receives the main model before any fine-tune under ``"main"``;
    ``trained`` skips training the main model and uses these weights (they
    must come from the same settings, so that the results are the same).
    """
    deterministic(threads)
    say = log or (lambda *_: None)
    results: list[dict[str, Any]] = []
    start = time.perf_counter()
    cfg = ToyConfig(base=settings.base, train_len=settings.train_len)
    chosen = [
        m
        for m in methods(
            settings.base, cfg.head_dim, settings.train_len, settings.factor
        )
        if m.name in settings.methods
    ]
    chosen_remaps = [
        r
        for r in remaps(settings.train_len, settings.factor)
        if r.name in settings.remaps
    ]
    if trained is not None:
        model = trained
    elif chosen or chosen_remaps or models is not None:
        model = train_base_model(settings)
        say(f"trained base {settings.base:g} ({time.perf_counter() - start:.0f} s)")
    if models is not None:
        models["main"] = model
    tuned: dict[str, tuple[Method, ToyDecoder]] = {}
    for method in chosen:
        results += _rows(model, method, 0, settings, method.name)
        if settings.finetune_steps:
            tuned[method.name] = (method, _finetune(model, method, settings))
            results += _rows(
                tuned[method.name][1],
                method,
                settings.finetune_steps,
                settings,
                method.name,
            )
        say(f"{method.name} ({time.perf_counter() - start:.0f} s)")
    for scale in settings.ntk_scales:
        method = ntk_at(settings.base, cfg.head_dim, scale)
        results += _rows(model, method, 0, settings, method.name)
        # a fine-tune at 4L with the same tables is the same computation: dynamic
        # NTK's fine-tune at 4L is ntk@13's for factor 4, so those weights give
        # ntk@13's fine-tuned rows (the base held at 4L's for every length)
        for m, weights in tuned.values():
            if _same_frequencies(m, method, cfg.head_dim, settings.target_len):
                results += _rows(
                    weights, method, settings.finetune_steps, settings, method.name
                )
                break
        say(f"{method.name} ({time.perf_counter() - start:.0f} s)")
    plain = Method("none", None, settings.base)
    for remap in chosen_remaps:
        results += _rows(model, plain, 0, settings, remap.name, remap)
        say(f"{remap.name} ({time.perf_counter() - start:.0f} s)")
    chosen_ablations = [
        m
        for m in ablations(
            settings.base, cfg.head_dim, settings.train_len, settings.factor
        )
        if ("pairs" if m.name.startswith("pi_") else
            "layers" if "_layer" in m.name else m.name) in settings.ablations
    ]
    for method in chosen_ablations:
        results += _rows(model, method, 0, settings, method.name)
        say(f"{method.name} ({time.perf_counter() - start:.0f} s)")
    by_distance = []
    if "distance" in settings.ablations:
        for method in methods(
            settings.base, cfg.head_dim, settings.train_len, settings.factor
        ):
            if method.name not in ("none", "dynamic"):
                continue
            for b in evaluate_by_distance(
                model,
                settings.target_len,
                settings.distance_edges,
                scaling=method.scaling,
                base=method.base,
                samples=settings.samples,
            ):
                by_distance.append(
                    {
                        "method": method.name,
                        "finetune_steps": 0,
                        "length": settings.target_len,
                        **b,
                        "seed": settings.seed,
                    }
                )
        say(f"by distance ({time.perf_counter() - start:.0f} s)")
    if "beta" in settings.ablations and settings.finetune_steps:
        method = Method(f"beta={settings.beta:g}", None, settings.beta)
        lengths = [settings.train_len * m for m in settings.beta_multiples]
        results += _rows(
            _finetune(model, method, settings),
            method,
            settings.finetune_steps,
            settings,
            method.name,
            lengths=lengths,
        )
        say(f"{method.name} ({time.perf_counter() - start:.0f} s)")
    for base in settings.other_bases:
        other = train_base_model(settings, base)
        plain = Method(f"base={base:g}", None, base)
        results += _rows(other, plain, 0, settings, plain.name)
        say(f"{plain.name} ({time.perf_counter() - start:.0f} s)")
    config = cfg.to_dict()
    return {
        "train_length": settings.train_len,
        "config": config,
        "settings": {
            "multiples": list(settings.multiples),
            "factor": settings.factor,
            "steps": settings.steps,
            "finetune_steps": settings.finetune_steps,
            "seed": settings.seed,
            "samples": settings.samples,
            "base": settings.base,
            "other_bases": list(settings.other_bases),
            "methods": list(settings.methods),
            "remaps": {
                r.name: dict(r.params)
                for r in remaps(settings.train_len, settings.factor)
                if r.name in settings.remaps
            },
            "ntk_scales": list(settings.ntk_scales),
            "ablations": list(settings.ablations),
            "beta": settings.beta,
            "beta_multiples": list(settings.beta_multiples),
            "distance_edges": settings.distance_edges,
            "threads": threads,
            "dtype": "float32",
            "device": "cpu",
            "torch": torch.__version__.split("+")[0],
        },
        "runs": [
            {
                "seed": settings.seed,
                "weights": "trained" if trained is None else "loaded",
                "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
                "torch": torch.__version__,
            }
        ],
        "results": results,
        "by_distance": by_distance,
    }


def shipped_weights() -> ToyDecoder:
    """The main model the book ships (default options, no fine-tune), in eval mode."""
    with resources.as_file(
        resources.files("ropelab.book").joinpath("data/toy_base100.pt")
    ) as path:
        state = torch.load(path, weights_only=True)
    model = ToyDecoder(ToyConfig(base=DEFAULT_BASE))
    model.load_state_dict(state)
    return model.eval()


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ropelab.book.extrapolate",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    d = Settings()
    parser.add_argument(
        "--json", metavar="PATH", help="write the results as JSON to PATH"
    )
    parser.add_argument(
        "--train-len",
        type=_positive_int,
        default=d.train_len,
        help="training length L (tokens)",
    )
    parser.add_argument(
        "--multiples",
        type=_positive_int,
        nargs="+",
        default=list(d.multiples),
        help="evaluate at these multiples of L",
    )
    parser.add_argument(
        "--factor",
        type=float,
        default=d.factor,
        help="extension factor s the methods are set for; fine-tunes run at s·L",
    )
    parser.add_argument(
        "--steps", type=_positive_int, default=d.steps, help="training steps at L"
    )
    parser.add_argument(
        "--finetune-steps",
        type=int,
        default=d.finetune_steps,
        help="fine-tuning steps at s·L per method (0: none)",
    )
    parser.add_argument(
        "--samples",
        type=_positive_int,
        default=d.samples,
        help="evaluation sequences per length",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        help="seed of the weights, batches and fine-tunes",
    )
    parser.add_argument(
        "--base", type=float, default=d.base, help="RoPE base of the main model"
    )
    parser.add_argument(
        "--other-bases",
        type=float,
        nargs="*",
        default=list(d.other_bases),
        help="bases of the comparison models, scored as trained (none: skip)",
    )
    parser.add_argument(
        "--methods",
        nargs="*",
        choices=METHODS,
        default=list(METHODS),
        help="context extensions to apply to the main model (none: skip them); each "
        "method's rows do not depend on which others run",
    )
    parser.add_argument(
        "--remaps",
        nargs="*",
        choices=REMAPS,
        default=list(REMAPS),
        help="position remappings (chapter 13) to score on the main model, as "
        "trained (none: skip them)",
    )
    parser.add_argument(
        "--ntk-scales",
        type=float,
        nargs="*",
        default=list(d.ntk_scales),
        help="static NTK-aware scales to compare at matched scale (dynamic NTK at "
        "factor 4 applies 13 at 4L, 29 at 8L), zero-shot; fine-tuned too where a "
        "fine-tuned method trained with the same tables at s·L (none: skip)",
    )
    parser.add_argument(
        "--ablations",
        nargs="*",
        choices=ABLATIONS,
        default=list(d.ablations),
        help="pairs: interpolate only the slow or only the fast pairs; layers: "
        "dynamic NTK in one layer only; yarn_t1: YaRN without its temperature; "
        "distance: accuracy by how far back the value sits; beta: fine-tune at "
        "the base --beta and evaluate up to 16L (none: skip)",
    )
    parser.add_argument(
        "--beta",
        type=float,
        default=d.beta,
        help="fine-tuning base of the 'beta' ablation (Liu et al.'s bound)",
    )
    parser.add_argument(
        "--seeds",
        type=_positive_int,
        default=1,
        help="run seeds --seed .. --seed + N - 1 one after another, in one file",
    )
    parser.add_argument(
        "--merge",
        metavar="PATH",
        nargs="+",
        help="combine results files that differ only in their seed into --json "
        "(runs nothing else)",
    )
    parser.add_argument(
        "--threads",
        type=_positive_int,
        default=1,
        help="torch CPU threads (results are reproducible for a fixed count)",
    )
    parser.add_argument(
        "--save-weights",
        metavar="PATH",
        help="also save the main model's trained weights",
    )
    parser.add_argument(
        "--weights",
        metavar="PATH",
        help="use these trained weights for the main model instead of training it "
        "(they must "
        "come from the same options; the results are then the same)",
    )
    args = parser.parse_args(argv)
    if args.finetune_steps < 0:
        parser.error(f"--finetune-steps must be >= 0, got {args.finetune_steps}")
    if args.merge:
        if not args.json:
            parser.error("--merge needs --json")
        try:
            data = merge([load(path) for path in args.merge])
        except ValueError as err:
            parser.error(str(err))
        print(table(data))
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        return 0
    settings = Settings(
        train_len=args.train_len,
        multiples=tuple(args.multiples),
        factor=args.factor,
        steps=args.steps,
        finetune_steps=args.finetune_steps,
        seed=args.seed,
        samples=args.samples,
        base=args.base,
        other_bases=tuple(args.other_bases),
        methods=tuple(m for m in METHODS if m in args.methods),
        remaps=tuple(r for r in REMAPS if r in args.remaps),
        ntk_scales=tuple(args.ntk_scales),
        ablations=tuple(a for a in ABLATIONS if a in args.ablations),
        beta=args.beta,
    )
    capability = torch.backends.cpu.get_cpu_capability()
    if capability == "AVX512":
        env = " ".join(f"{k}={v}" for k, v in SHIPPED_KERNELS.items())
        print(
            f"torch runs its {capability} kernels; the shipped weights come from "
            f"the AVX2 ones (set {env} to reproduce them bit for bit)",
            file=sys.stderr,
        )
    wall, cpu = time.perf_counter(), time.process_time()
    models: dict[str, ToyDecoder] | None = {} if args.save_weights else None
    trained = None
    if args.weights:
        trained = ToyDecoder(
            ToyConfig(base=settings.base, train_len=settings.train_len)
        )
        trained.load_state_dict(torch.load(args.weights, weights_only=True))
    command = " ".join(
        ["python -m ropelab.book.extrapolate"]
        + list(sys.argv[1:] if argv is None else argv)
    )
    kernels_env = os.environ.get("ATEN_CPU_CAPABILITY")
    parts = []
    for i in range(args.seeds):
        one = dataclasses.replace(settings, seed=settings.seed + i)
        part = run(
            one,
            threads=args.threads,
            log=lambda line: print(line, file=sys.stderr, flush=True),
            models=models if i == 0 else None,
            trained=trained if i == 0 else None,
        )
        for record in part["runs"]:
            record["command"] = command
            record["ATEN_CPU_CAPABILITY"] = kernels_env
            if record["weights"] == "loaded":
                record["weights"] = f"loaded from {os.path.basename(args.weights)}"
        parts.append(part)
    data = merge(parts) if len(parts) > 1 else parts[0]
    print(table(data))
    print(
        f"wall {time.perf_counter() - wall:.0f} s, "
        f"CPU {time.process_time() - cpu:.0f} s",
        file=sys.stderr,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    if args.save_weights:
        torch.save(models["main"].state_dict(), args.save_weights)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
