"""Chapter 08's plumbing (numerics): the measured-against-bound tables, the three error
sources of a float32 table, the damage table of the precision bugs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ropelab import frequencies, numerics

__all__ = [
    "angle_bound_ratios",
    "cos_bound_table",
    "cos_error_table",
    "damage_rows",
    "exact_half_split_cos",
    "llama_config",
    "source_curves",
    "spacing_rows",
    "three_sources",
]

F64 = torch.float64
FLOAT16_MAX = 65504


def llama_config(dim: int, base: float):
    """A tiny LLaMA config (no weights): head size ``dim``, RoPE base ``base``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=2 * dim,
        num_attention_heads=2,
        rope_parameters={"rope_type": "default", "rope_theta": base},
    )


def spacing_rows(
    positions: Sequence[int], dtypes: Mapping[str, torch.dtype]
) -> list[str]:
    """Lines of the gap between ``m`` and the next number of each dtype, 2^(e − p + 1)
    for 2^e ≤ m < 2^(e+1) (eq. ``num-bound``), each checked against torch.nextafter
    (AssertionError if they differ); ``inf`` where the dtype overflows."""
    lines = [f"{'position':>10}" + "".join(f"{name:>12}" for name in dtypes)]
    for m in positions:
        row = []
        for dt in dtypes.values():
            x = torch.tensor(float(m), dtype=dt)
            if torch.isinf(x):
                row.append("inf")
                continue
            p = numerics.significand_bits(dt)
            spacing = 2.0 ** (math.floor(math.log2(m)) - p + 1)
            gap = torch.nextafter(x, torch.tensor(math.inf, dtype=dt)) - x
            if float(gap) != spacing:
                raise AssertionError(
                    f"{dt} at {m}: nextafter gap {float(gap)} != {spacing}"
                )
            row.append(f"{spacing:.6g}")
        lines.append(f"{m:>10,}" + "".join(f"{s:>12}" for s in row))
    return lines


def _gamma3(dtype: torch.dtype) -> float:
    u = numerics.unit_roundoff(dtype)
    return 3 * u + 3 * u * u + u**3  # (1 + u)^3 - 1


def _largest_ratio(measured: Tensor, bound: Tensor) -> float:
    """max measured/bound, asserting measured ≤ bound everywhere (NaN fails)."""
    if not bool((measured <= bound).all()):
        raise AssertionError("a measured error exceeds its bound (or is NaN)")
    return float((measured / bound).max())


def angle_bound_ratios(
    positions: Tensor, dim: int, base: float, dtypes: Mapping[str, torch.dtype]
) -> str:
    """How close |ã_j − mθ_j| comes to γ₃·mθ_j (eq. ``num-anglebound``): the
    largest ratio per dtype over ``positions`` and all pairs, asserting it is ≤ 1.
    float16 is measured up to 65,504 and only where no frequency is subnormal."""
    theta = frequencies.inv_freq(dim, base, dtype=F64)
    exact = frequencies.angles(positions, theta)  # float64 reference
    parts = []
    for name, dt in dtypes.items():
        if dt == F64:
            continue
        keep = positions <= FLOAT16_MAX if dt == torch.float16 else slice(None)
        if dt == torch.float16 and bool((theta < torch.finfo(dt).tiny).any()):
            continue
        a = numerics.angles_in(positions[keep], theta, dt).double()
        error = (a - exact[keep]).abs()
        parts.append(f"{name} {_largest_ratio(error, _gamma3(dt) * exact[keep]):.2f}")
    return "largest error / bound: " + ", ".join(parts)


def cos_bound_table(
    positions: Tensor,
    dim: int,
    bases: Sequence[float],
    dtypes: Mapping[str, torch.dtype],
) -> list[str]:
    """Lines of the largest cos_error / cos_error_bound (eq. ``num-cosbound``) per
    dtype, base and place of the cosine (float64, or the angle's own dtype), each
    asserted ≤ 1; float16 up to 65,504, float64 against the 40-digit reference."""
    head = "".join(f"{f'b = {b:,.0f}':>20}" for b in bases)
    lines = [
        f"{'angle dtype':>12}{head}",
        f"{'':>12}" + "  cos f64  cos own" * len(bases),
    ]
    for name, dt in dtypes.items():
        keep = positions <= FLOAT16_MAX if dt == torch.float16 else slice(None)
        cells = []
        for base in bases:
            ratios = {}
            for cos_dt in dict.fromkeys((F64, dt)):  # float64: once
                err = numerics.cos_error(
                    positions[keep], dim, base, dt, cos_dtype=cos_dt, exact=dt == F64
                )
                bound = numerics.cos_error_bound(
                    positions[keep], dim, base, dt, cos_dtype=cos_dt
                )
                ratios[cos_dt] = _largest_ratio(err, bound)
            cells += [f"{ratios[F64]:>9.2f}", f"{ratios[dt]:>9.2f}"]
        lines.append(f"{name:>12}" + "".join(cells))
    return lines


def _fmt(x: float) -> str:
    return "nan" if math.isnan(x) else ("0" if x == 0 else f"{x:.1e}")


def cos_error_table(
    positions: Sequence[int],
    dim: int,
    base: float,
    dtypes: Mapping[str, torch.dtype],
    *,
    cos_in_dtype: bool,
) -> list[str]:
    """Lines of max_j |Δcos| at ``positions`` for each angle dtype, against the
    40-digit reference, the cosine taken in float64 or in the angle's dtype."""
    where = "the angle's dtype" if cos_in_dtype else "float64"
    lines = [f"cos taken in {where}",
             f"{'angle dtype':>12}" + "".join(f"{p:>10,}" for p in positions)]
    pos = torch.tensor(list(positions))
    for name, dt in dtypes.items():
        cos_dtype = dt if cos_in_dtype else F64
        err = numerics.cos_error(pos, dim, base, dt, cos_dtype=cos_dtype, exact=True)
        lines.append(f"{name:>12}" + "".join(f"{_fmt(float(e)):>10}" for e in err))
    return lines


def exact_half_split_cos(positions: Tensor, dim: int, base: float) -> Tensor:
    """cos(m·θ32_j) of the float32 frequencies a checkpoint computes, the product
    taken exactly (40 digits) and rounded once to float64, laid out half-split
    (each pair's cosine in channels j and j + d/2), as a cos table is.

    Args:
        positions: integer positions ``(n,)``, ≥ 0.
        dim: head dimension d (even).
        base: frequency base b.

    Returns:
        float64 ``(n, dim)`` on the CPU.
    """
    theta32 = frequencies.inv_freq(dim, base)  # float32, as the checkpoint has it
    cos, _ = numerics.exact_cos_sin(positions, dim, base, inv_freq=theta32)
    return torch.cat((cos, cos), dim=-1)


def three_sources(m: int, base: float, dim: int = 128) -> tuple[float, float]:
    """The first two error sources of a float32 table at position ``m``, largest over
    the pairs: the frequency's rounding m·|θ32 − θ| and the product's rounding
    |fl32(m·θ32) − m·θ32| (08_numerics, three sources)."""
    theta = frequencies.inv_freq(dim, base, dtype=F64)  # θ_j (float64 stands in)
    t32 = frequencies.inv_freq(dim, base)  # θ32, as a checkpoint's code computes it
    frequency = (m * (t32.double() - theta)).abs().max()
    product = ((m * t32).double() - m * t32.double()).abs().max()
    return float(frequency), float(product)


def source_curves(positions: Tensor, base: float, dim: int = 128) -> dict:
    """The curves of the error-sources figure: sources 1 and 2 at each position
    (largest over the pairs) and the constant roundings of cos and sin in float32
    and bfloat16."""
    m = positions.double()[:, None]
    theta = frequencies.inv_freq(dim, base, dtype=F64)
    t32 = frequencies.inv_freq(dim, base)
    return {
        "1. frequency: m·|θ32 − θ|": (m * (t32.double() - theta)).abs().amax(-1),
        "2. product: |fl32(m·θ32) − m·θ32|": (
            (m.float() * t32).double() - m * t32.double()).abs().amax(-1),
        "3. cos, sin rounded to float32": 2.0**-25,
        "3. cos, sin rounded to bfloat16": 2.0**-9,
    }


def damage_rows(
    damage: Mapping[str, Mapping[int, tuple[float, float]]], starts: Sequence[int]
) -> list[str]:
    """Lines of the bugs' damage table: per case and window start, the largest change
    of a logit and the largest total variation (eq. ``num-tv``), two significant
    digits, values below 1e-4 as ``<1e-4``."""
    def fmt(x: float) -> str:
        return "nan" if math.isnan(x) else ("<1e-4" if x < 1e-4 else f"{x:.2g}")

    lines = [
        f"{'':44}" + "".join(f"{'start ' + format(s, ','):>22}" for s in starts),
        f"{'case':44}" + f"{'max |Δℓ|':>11}{'max TV':>11}" * len(starts),
    ]
    for case, row in damage.items():
        lines.append(f"{case:44}" + "".join(
            f"{fmt(row[s][0]):>11}{fmt(row[s][1]):>11}" for s in starts))
    return lines
