"""Context extension: how each published method rescales θ_j (chapter
07_context_extension).

A registry maps a ``rope_type`` to a pure function ``(dim, base, params,
seq_len, dtype) -> (inv_freq, attention_scaling)``, in the manner of
transformers' ``ROPE_INIT_FUNCTIONS``. :func:`scaled_inv_freq` accepts the
rope dicts that transformers configs carry (``rope_type`` or the older
``type`` key) and returns the same numbers as transformers for the same dict
and head dim, with one deliberate difference: the pre-training context length
always comes from ``original_max_position_embeddings`` in the dict, for
``dynamic`` too (transformers reads the model config's
``max_position_embeddings`` there), and ``longrope`` needs ``factor`` in the
dict (transformers may derive it from the model config).

Types: ``default``, ``linear`` (Position Interpolation), ``dynamic`` (dynamic
NTK), ``yarn``, ``llama3``, ``longrope``. The NTK-aware base change
b·s^(d/(d-2)), which transformers has no type for, is :func:`ntk_scaled_base`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from . import frequencies  # frequencies.inv_freq: the name inv_freq is a parameter here
from ._checks import check_base, check_dim, check_inv_freq, check_number

__all__ = [
    "scaled_inv_freq",
    "ntk_scaled_base",
    "normalize_scaling",
    "yarn_correction_range",
    "yarn_ramp",
    "yarn_mscale",
    "ROPE_TYPES",
    "pairs_beyond_training",
]

RopeFn = Callable[
    [int, float, Mapping[str, Any], "int | None", torch.dtype], "tuple[Tensor, float]"
]

# keys every type accepts
_COMMON = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}


@dataclass(frozen=True)
class _Spec:
    fn: RopeFn
    required: frozenset[str]
    optional: frozenset[str]


_REGISTRY: dict[str, _Spec] = {}


def _register(
    name: str, required: set[str] = frozenset(), optional: set[str] = frozenset()
):
    def wrap(fn: RopeFn) -> RopeFn:
        _REGISTRY[name] = _Spec(fn, frozenset(required), frozenset(optional))
        return fn

    return wrap


def _factor(params: Mapping[str, Any], rope_type: str) -> float:
    factor = params.get("factor")
    if (
        isinstance(factor, bool)
        or not isinstance(factor, (int, float))
        or not 1.0 <= factor < math.inf
    ):
        raise ValueError(
            f"scaling['factor'] must be a finite number >= 1 for {rope_type!r}, got "
            f"{factor!r}"
        )
    return float(factor)


def _number(params: Mapping[str, Any], key: str, default: float | None = None, *,
            minimum: float | None = None, above: bool = False) -> float | None:
    """``params[key]`` (``default`` where absent or None) checked as a finite number
    at least ``minimum`` (above it when ``above``)."""
    value = params.get(key)
    if value is None:
        return default
    return check_number(value, f"scaling[{key!r}]", minimum=minimum, above=above)


def _original_len(params: Mapping[str, Any], rope_type: str) -> int:
    n = params.get("original_max_position_embeddings")
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(
            f"rope_type {rope_type!r} needs 'original_max_position_embeddings' "
            f"(the pre-training context length) as a positive int, got {n!r}"
        )
    return n


def _rotary_dim(dim: int, params: Mapping[str, Any]) -> int:
    prf = params.get("partial_rotary_factor", 1.0)
    if (
        isinstance(prf, bool)
        or not isinstance(prf, (int, float))
        or not 0.0 < prf <= 1.0
    ):
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be in (0, 1], got {prf!r}"
        )
    rd = int(dim * prf)
    if rd < 2 or rd % 2:
        raise ValueError(
            f"partial_rotary_factor={prf} leaves {rd} rotated channels of dim {dim}; "
            "that must be even and >= 2"
        )
    return rd


def ntk_scaled_base(base: float, factor: float, dim: int) -> float:
    """NTK-aware base change b' = b·s^(d/(d-2)) (07_context_extension, eq.
    ``ext-ntk``).

    With b' the slowest pair (j = d/2-1) turns s times slower, as under
    Position Interpolation, while the fastest (j = 0) is unchanged; the
    pairs in between are stretched by s^(2j/(d-2)).
    """
    dim = check_dim(dim)
    if dim < 4:
        raise ValueError(f"the NTK base change needs dim >= 4 (d/(d-2)), got {dim}")
    base = check_base(base)
    if (
        isinstance(factor, bool)
        or not isinstance(factor, (int, float))
        or not factor >= 1.0
    ):
        raise ValueError(f"factor must be a number >= 1, got {factor!r}")
    return base * factor ** (dim / (dim - 2))


@_register("default")
def _default(dim, base, params, seq_len, dtype):
    return frequencies.inv_freq(dim, base, dtype=dtype), 1.0


@_register("linear", {"factor"})
def _linear(dim, base, params, seq_len, dtype):
    """Position Interpolation: θ_j / s, i.e. position m is read as m / s."""
    factor = _factor(params, "linear")
    return frequencies.inv_freq(dim, base, dtype=dtype) / factor, 1.0


@_register("dynamic", {"factor", "original_max_position_embeddings"})
def _dynamic(dim, base, params, seq_len, dtype):
    """Dynamic NTK: the NTK base change with s' = s·L/L_orig - (s - 1) for the current
    length L."""
    factor = _factor(params, "dynamic")
    original = _original_len(params, "dynamic")
    length = original if seq_len is None else max(int(seq_len), original)
    new_base = base * ((factor * length / original) - (factor - 1)) ** (dim / (dim - 2))
    return frequencies.inv_freq(dim, new_base, dtype=dtype), 1.0


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature factor 0.1·mscale·ln(s) + 1 (1 for s <= 1)
    (07, eq. ``ext-yarn-temp``)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_correction_range(
    dim: int,
    base: float,
    original: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    *,
    truncate: bool = True,
) -> tuple[float, float]:
    """The pair indices (low, high) between which YaRN ramps, as the reference code
    computes them.

    Pair j makes L/λ_j = L·θ_j/(2π) turns over the original context L; the
    index at which that equals β is d·ln(L/(2πβ)) / (2 ln b). ``low`` comes
    from β_fast, ``high`` from β_slow; with ``truncate`` they are rounded
    outwards (floor, ceil), then clipped to [0, d-1].
    """

    def index(turns: float) -> float:
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = index(beta_fast), index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_ramp(
    dim: int,
    base: float,
    original: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    *,
    truncate: bool = True,
    form: str = "code",
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """YaRN's interpolation weight γ_j per pair: 1 = keep θ_j (extrapolate), 0 =
    divide by s (interpolate).

    ``form="code"``: the reference code and transformers, a linear ramp over
    the pair index j between :func:`yarn_correction_range`'s rounded bounds.
    ``form="paper"``: the paper's γ(r) with r_j = L/λ_j, linear in r between
    β_slow (γ=0) and β_fast (γ=1). (07_context_extension, eq. ``ext-yarn-ramp``.)

    Returns:
        Tensor ``(dim // 2,)`` in [0, 1].
    """
    if form == "code":
        low, high = yarn_correction_range(
            dim, base, original, beta_fast, beta_slow, truncate=truncate
        )
        if low == high:
            high += 0.001  # as the reference code: avoid a division by zero
        ramp = (
            (torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)
        ).clamp(0, 1)
        return (1 - ramp).to(dtype)
    if form == "paper":
        r = (
            original
            * frequencies.inv_freq(dim, base, dtype=torch.float64)
            / (2 * math.pi)
        )
        return ((r - beta_slow) / (beta_fast - beta_slow)).clamp(0, 1).to(dtype)
    raise ValueError(f"form must be 'code' or 'paper', got {form!r}")


@_register(
    "yarn",
    {"factor", "original_max_position_embeddings"},
    {
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "attention_factor",
        "truncate",
    },
)
def _yarn(dim, base, params, seq_len, dtype):
    """YaRN: interpolate the slow pairs, keep the fast ones, ramp between; scale
    attention by the temperature."""
    factor = _factor(params, "yarn")
    original = _original_len(params, "yarn")
    beta_fast = _number(params, "beta_fast") or 32
    beta_slow = _number(params, "beta_slow") or 1
    if not beta_fast > beta_slow:
        raise ValueError(
            f"yarn needs beta_fast > beta_slow, got beta_fast={beta_fast} and "
            f"beta_slow={beta_slow}"
        )
    attention_factor = _number(params, "attention_factor", minimum=0.0, above=True)
    if attention_factor is None:
        mscale = _number(params, "mscale", minimum=0.0, above=True)
        mscale_all_dim = _number(params, "mscale_all_dim", minimum=0.0, above=True)
        if mscale and mscale_all_dim:
            attention_factor = yarn_mscale(factor, mscale) / yarn_mscale(
                factor, mscale_all_dim
            )
        else:
            attention_factor = yarn_mscale(factor)
    theta = frequencies.inv_freq(dim, base, dtype=dtype)
    keep = yarn_ramp(
        dim,
        base,
        original,
        beta_fast,
        beta_slow,
        truncate=params.get("truncate", True),
        dtype=dtype,
    )
    return theta / factor * (1 - keep) + theta * keep, float(attention_factor)


@_register(
    "llama3",
    {
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    },
)
def _llama3(dim, base, params, seq_len, dtype):
    """Llama 3.1: keep short wavelengths, divide long ones by s, blend the band between.

    low_freq_factor = high_freq_factor (Llama 4 Scout: both 1) leaves no band:
    a step at the wavelength original/low, as in transformers.
    """
    factor = _factor(params, "llama3")
    original = _original_len(params, "llama3")
    low = _number(params, "low_freq_factor", minimum=0.0, above=True)
    high = _number(params, "high_freq_factor", minimum=0.0, above=True)
    if not low <= high:
        raise ValueError(
            f"llama3 needs 0 < low_freq_factor <= high_freq_factor, got {low!r} and "
            f"{high!r}"
        )
    theta = frequencies.inv_freq(dim, base, dtype=dtype)
    wavelen = 2 * math.pi / theta
    low_freq_wavelen, high_freq_wavelen = original / low, original / high
    scaled = torch.where(wavelen > low_freq_wavelen, theta / factor, theta)
    if low == high:  # no band to blend
        return scaled, 1.0
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


@_register(
    "longrope",
    {"short_factor", "long_factor", "original_max_position_embeddings", "factor"},
    {"attention_factor"},
)
def _longrope(dim, base, params, seq_len, dtype):
    """LongRoPE: a searched factor per pair, one set for short and one for long
    contexts."""
    factor = _factor(params, "longrope")
    original = _original_len(params, "longrope")
    for key in ("short_factor", "long_factor"):
        values = params[key]
        if not isinstance(values, (list, tuple)) or len(values) != dim // 2:
            got = (
                len(values)
                if isinstance(values, (list, tuple))
                else type(values).__name__
            )
            raise ValueError(
                f"scaling[{key!r}] must be a list of dim // 2 = {dim // 2} numbers, "
                f"got {got}"
            )
        for j, v in enumerate(values):  # each divides a frequency: finite and > 0
            check_number(v, f"scaling[{key!r}][{j}]", minimum=0.0, above=True)
    attention_factor = _number(params, "attention_factor", minimum=0.0, above=True)
    if attention_factor is None:
        attention_factor = (
            1.0
            if factor <= 1.0
            else math.sqrt(1 + math.log(factor) / math.log(original))
        )
    key = "long_factor" if seq_len and seq_len > original else "short_factor"
    # transformers divides once, 1 / (ext · b^(2j/d)); θ_j / ext would round twice
    ext = torch.tensor(params[key], dtype=dtype)
    return 1.0 / (ext * frequencies.base_powers(dim, base, dtype=dtype)), float(
        attention_factor
    )


ROPE_TYPES: tuple[str, ...] = tuple(_REGISTRY)


def normalize_scaling(scaling: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return ``scaling`` as a dict with ``rope_type`` set, after checking its keys.

    ``None`` means ``{"rope_type": "default"}``; the older ``type`` key is
    accepted. Missing required keys and unknown types raise ``ValueError``;
    unknown extra keys warn.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise TypeError(
            "scaling must be a dict (a transformers rope dict) or None, got "
            f"{type(scaling).__name__}"
        )
    params = dict(scaling)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in _REGISTRY:
        raise ValueError(f"unknown rope_type {rope_type!r}; ropelab knows {ROPE_TYPES}")
    params["rope_type"] = rope_type
    spec = _REGISTRY[rope_type]
    missing = sorted(spec.required - params.keys())
    if missing:
        hint = ""
        if "factor" in missing and rope_type in ("yarn", "longrope"):
            hint = (
                " (transformers derives 'factor' from the model config as "
                "max_position_embeddings / original_max_position_embeddings: "
                "pass that ratio)"
            )
        raise ValueError(
            f"rope_type {rope_type!r} needs {missing} in the scaling dict, got keys "
            f"{sorted(params)}{hint}"
        )
    extra = sorted(params.keys() - spec.required - spec.optional - _COMMON)
    if extra:
        warnings.warn(
            f"scaling keys {extra} are not used by rope_type {rope_type!r}",
            UserWarning,
            stacklevel=3,
        )
    return params


def scaled_inv_freq(
    dim: int,
    base: float,
    scaling: Mapping[str, Any] | None,
    *,
    seq_len: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, float]:
    """Frequencies θ'_j and attention scaling for a transformers-style rope dict
    (07_context_extension).

    Args:
        dim: the head dim d (``partial_rotary_factor`` in the dict rotates
            ``int(d * factor)`` channels, and θ is computed for those).
        base: the base b; a ``rope_theta`` in the dict must agree with it.
        scaling: e.g. ``{"rope_type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 4096}``.
        seq_len: the current sequence length (``dynamic`` and ``longrope`` depend on
            it).
        dtype: float32 (transformers' arithmetic) or float64.

    Returns:
        ``(inv_freq, attention_scaling)``: Tensor ``(rotary_dim // 2,)`` and the
        factor that multiplies cos and sin (YaRN's and LongRoPE's temperature; 1
        otherwise).

    Raises:
        TypeError: ``dim`` not an int, ``base`` not a number, ``scaling`` not a
            dict or None, ``dtype`` not float32/float64, a number of the dict
            (``attention_factor``, ``beta_fast``, ...) not a number.
        ValueError: ``dim`` or ``base`` out of range (as :func:`ropelab.inv_freq`);
            an unknown ``rope_type`` or a missing key; ``factor`` not finite and
            >= 1; ``original_max_position_embeddings`` not a positive int;
            ``attention_factor``, ``mscale``, ``low_freq_factor``,
            ``high_freq_factor`` and each entry of ``short_factor`` /
            ``long_factor`` not finite and > 0; ``beta_fast`` not above
            ``beta_slow``; ``rope_theta`` disagreeing with ``base``; ``seq_len``
            not a positive int.
    """
    dim = check_dim(dim)
    base = check_base(base)
    params = normalize_scaling(scaling)
    theta_key = params.get("rope_theta")
    if theta_key is not None and float(theta_key) != base:
        raise ValueError(
            f"scaling['rope_theta']={theta_key} disagrees with base={base}"
        )
    if seq_len is not None and (
        isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0
    ):
        raise ValueError(f"seq_len must be a positive int or None, got {seq_len!r}")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    rd = _rotary_dim(dim, params)
    theta, attention_scaling = _REGISTRY[params["rope_type"]].fn(
        rd, base, params, seq_len, dtype
    )
    return theta, float(attention_scaling)


def _check_length(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"{name} must be a positive int (a number of positions), got {value!r}"
        )
    return value


def pairs_beyond_training(
    inv_freq_train: Tensor,
    inv_freq_run: Tensor,
    train_len: int,
    run_len: int,
    *,
    slack: float = 0.0,
) -> int:
    """How many pairs reach angles at inference that they never reached in training
    (07, eq. ``ext-beyond``).

    During training (positions 0..L-1) pair j saw the angles [0, (L-1)·θ_j],
    which is the whole circle once (L-1)·θ_j ≥ 2π. At inference (positions
    0..L'-1, frequencies θ'_j) its largest angle is (L'-1)·θ'_j. The pair is
    *beyond* training when it never completed a turn, (L-1)·θ_j < 2π, and
    (L'-1)·θ'_j > (L-1+slack)·θ_j. ``slack`` (in training positions, default
    0) tolerates a small overshoot: Position Interpolation maps L'-1 to
    (L'-1)/s = L - 1/s, a fraction of a position past L-1, and ``slack=1``
    counts that as seen. Computed in float64.

    Args:
        inv_freq_train: θ_j of the trained model, ``(dim // 2,)``.
        inv_freq_run: θ'_j used at inference, same shape.
        train_len: training context L.
        run_len: inference context L'.
        slack: overshoot tolerated, in training positions (>= 0).

    Returns:
        The number of pairs, an int in 0..dim/2.
    """
    train = check_inv_freq(inv_freq_train).detach().to("cpu", torch.float64)
    run = check_inv_freq(inv_freq_run).detach().to("cpu", torch.float64)
    if train.shape != run.shape:
        raise ValueError(
            "inv_freq_train and inv_freq_run must have the same shape, got "
            f"{tuple(train.shape)} and {tuple(run.shape)}"
        )
    train_len = _check_length(train_len, "train_len")
    run_len = _check_length(run_len, "run_len")
    if (
        isinstance(slack, bool)
        or not isinstance(slack, (int, float))
        or not 0.0 <= slack < float("inf")
    ):
        raise ValueError(
            f"slack must be a finite number >= 0 (training positions), got {slack!r}"
        )
    seen = (train_len - 1) * train
    partial_turn = seen < 2 * math.pi
    beyond = (run_len - 1) * run > (train_len - 1 + slack) * train
    return int((partial_turn & beyond).sum())
