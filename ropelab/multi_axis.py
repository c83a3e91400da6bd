"""RoPE over more than one position axis: 2D axial and mixed RoPE for image patches,
M-RoPE (chapter 10_multi_axis).

A patch of an image sits at a column x and a row y. Axial RoPE gives half of
the d/2 channel pairs to each axis: pair j < d/4 turns by x·θ_j, pair
j + d/4 by y·θ_j, with the per-axis ladder θ_j = b^(-4j/d)
(10_multi_axis, eq. ``multi-axial``). Mixed RoPE (Heo et al., RoPE-Mixed)
gives every pair its own direction in the plane, a learnable (θx_j, θy_j), and
turns it by x·θx_j + y·θy_j (eq. ``multi-mixed``). Axial is the special case
θ = (θ_j, 0) and (0, θ_j). In both, the score of a query at p = (x, y) and a key
at p' depends on Δ = p - p' only (eq. ``multi-relative``).

M-RoPE (Qwen2-VL) gives every token three position ids (time, height, width)
and splits the d/2 frequency pairs into three consecutive sections, one per
axis (``mrope_section``, e.g. [16, 24, 24] for head_dim 128): pair j turns by
p_{axis(j)}·θ_j with the ordinary 1D ladder θ_j (eq. ``multi-mrope``). Text
tokens carry three equal ids, and then M-RoPE is ordinary 1D RoPE
(eq. ``multi-mrope-text``).

Positions are integer tensors: ``positions_xy`` is ``(..., n, 2)`` holding
(x, y) = (column, row); ``position_ids_3`` is ``(3, ..., seq)`` holding
(t, h, w). Pairs are indexed from 0, as in the rest of the library.
"""

from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_base,
    check_dim,
    check_number,
    check_table_dtype,
    check_x,
)
from .complex import pair_products
from .frequencies import angles, inv_freq
from .rotary import apply_rotary, cos_sin_from_angles

__all__ = [
    "grid_positions",
    "axial_inv_freq",
    "axial_theta_xy",
    "axial_angles",
    "mixed_angles",
    "mixed_theta_init",
    "apply_axial",
    "apply_mixed",
    "rope_scores_2d",
    "relative_score_2d",
    "mrope_pair_axes",
    "mrope_angles",
    "mrope_cos_sin",
    "mrope_position_ids",
]

Segment = tuple  # ("text", n) or ("image", (rows, cols))


# --- checks ---------------------------------------------------------------------


def _check_dim4(dim: object) -> int:
    dim = check_dim(dim)
    if dim % 4:
        raise ValueError(
            f"dim must be divisible by 4 (d/4 pairs per image axis), got {dim}"
        )
    return dim


def _as_positions_xy(
    positions_xy: object, device: torch.device | None = None
) -> Tensor:
    """Integer (x, y) positions ``(..., n, 2)`` as int64, on ``device``."""
    if isinstance(positions_xy, Tensor):
        shape = tuple(positions_xy.shape)
    else:
        try:
            shape = tuple(torch.as_tensor(positions_xy).shape)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                "positions_xy must be an integer tensor (..., n, 2), got "
                f"{type(positions_xy).__name__}"
            ) from None
    if len(shape) < 2 or shape[-1] != 2:
        raise ValueError(
            "positions_xy must have shape (..., n, 2) holding (x, y) = (column, row), "
            f"got {shape}"
        )
    try:
        return as_positions(
            positions_xy
            if isinstance(positions_xy, Tensor)
            else torch.as_tensor(positions_xy),
            device,
        )
    except TypeError as err:
        raise TypeError(f"positions_xy: {err}") from None
    except ValueError as err:
        raise ValueError(f"positions_xy: {err}") from None


def _check_theta_xy(theta_xy: object) -> Tensor:
    if not isinstance(theta_xy, Tensor):
        raise TypeError(
            "theta_xy must be a torch.Tensor (..., dim//2, 2), got "
            f"{type(theta_xy).__name__}"
        )
    if theta_xy.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            "theta_xy must be float32 or float64 (angles are never narrower), got "
            f"{theta_xy.dtype}"
        )
    if theta_xy.ndim < 2 or theta_xy.shape[-1] != 2 or theta_xy.shape[-2] == 0:
        raise ValueError(
            "theta_xy must have shape (..., dim//2, 2) holding (θx_j, θy_j) per "
            f"pair, got {tuple(theta_xy.shape)}"
        )
    return theta_xy


# --- 2D: axial and mixed ---------------------------------------------------------


def grid_positions(
    rows: int, cols: int, *, device: torch.device | str | None = None
) -> Tensor:
    """The (x, y) = (column, row) position of every patch of a rows × cols grid, row by
    row (10_multi_axis).

    Patch p = r·cols + c (the order in which a ViT flattens its patches) sits
    at x = c, y = r.

    Returns:
        int64 tensor ``(rows * cols, 2)``.
    """
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {type(v).__name__} {v!r}")
        if v <= 0:
            raise ValueError(f"{name} must be positive, got {v}")
    y, x = torch.meshgrid(
        torch.arange(rows, device=device),
        torch.arange(cols, device=device),
        indexing="ij",
    )
    return torch.stack((x.reshape(-1), y.reshape(-1)), dim=-1)


def axial_inv_freq(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    """The per-axis frequency ladder of axial RoPE, θ_j = base^(-4j/d), j = 0..d/4-1
    (10_multi_axis, eq. ``multi-axial``).

    Each axis gets d/4 pairs, so the ladder is the 1D one of a head of size
    d/2: ``inv_freq(dim // 2, base)``, bit for bit. Heo et al. use base 100
    for ViTs; Qwen2-VL's vision encoder uses 10,000.

    Returns:
        Tensor ``(dim // 4,)``.
    """
    dim = _check_dim4(dim)
    return inv_freq(dim // 2, base, dtype=dtype)


def axial_theta_xy(
    dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> Tensor:
    """Axial RoPE written as mixed frequencies: (θ_j, 0) for pairs j < d/4, (0, θ_j)
    for pair j + d/4 (eq. ``multi-mixed``).

    With these, :func:`mixed_angles` equals :func:`axial_angles` exactly.

    Returns:
        Tensor ``(dim // 2, 2)`` with columns (θx, θy).
    """
    theta = axial_inv_freq(dim, base, dtype=dtype)
    zero = torch.zeros_like(theta)
    return torch.cat(
        (torch.stack((theta, zero), -1), torch.stack((zero, theta), -1)), dim=0
    )


def axial_angles(
    positions_xy: Union[Tensor, Sequence],
    dim: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The angle of every pair for patches at (x, y): cat(x·θ, y·θ)
    (10_multi_axis, eq. ``multi-axial``).

    Pairs 0..d/4-1 turn with the column x, pairs d/4..d/2-1 with the row y,
    both with the ladder θ of :func:`axial_inv_freq`. This is the order of
    Heo et al.'s RoPE-Axial (x first); Qwen2-VL's vision encoder puts the row
    first. Computed in ``dtype`` (float32 or float64).

    Args:
        positions_xy: integer ``(..., n, 2)`` holding (x, y) = (column, row), e.g.
            :func:`grid_positions`.
        dim: head dimension d, divisible by 4.
        base: the base b > 1.

    Returns:
        Tensor ``(..., n, dim // 2)`` on the positions' device.
    """
    theta = axial_inv_freq(dim, base, dtype=dtype)
    pos = _as_positions_xy(positions_xy)
    theta = theta.to(pos.device)
    return torch.cat((angles(pos[..., 0], theta), angles(pos[..., 1], theta)), dim=-1)


def mixed_angles(positions_xy: Union[Tensor, Sequence], theta_xy: Tensor) -> Tensor:
    """Angles of mixed (learnable-direction) RoPE: x·θx_j + y·θy_j for every pair j
    (10_multi_axis, eq. ``multi-mixed``).

    Heo et al.'s RoPE-Mixed learns (θx_j, θy_j) per pair and per head, so a
    pair can turn along any direction of the image plane, the diagonal
    included. Differentiable in ``theta_xy``; computed in its dtype.

    Args:
        positions_xy: integer ``(..., n, 2)`` (x, y) positions.
        theta_xy: ``(..., dim//2, 2)`` frequencies, e.g. ``(heads, dim//2, 2)``;
            its leading axes broadcast against the positions' leading axes.

    Returns:
        Tensor ``(..., n, dim // 2)`` (broadcast leading axes), in ``theta_xy``'s dtype.
    """
    theta_xy = _check_theta_xy(theta_xy)
    pos = _as_positions_xy(positions_xy, theta_xy.device).to(theta_xy.dtype)
    tx, ty = (
        theta_xy[..., 0].unsqueeze(-2),
        theta_xy[..., 1].unsqueeze(-2),
    )  # (..., 1, P)
    return pos[..., 0:1] * tx + pos[..., 1:2] * ty


def mixed_theta_init(
    dim: int,
    n_heads: int,
    base: float = 10.0,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Heo et al.'s initial RoPE-Mixed frequencies: the axial ladder, turned by a random
    angle per head.

    Head h draws φ_h uniformly in [0, 2π). Pair j < d/4 gets
    θ_j·(cos φ_h, sin φ_h) and pair j + d/4 gets θ_j·(cos(φ_h + π/2), sin(φ_h +
    π/2)), with θ_j = base^(-4j/d) (their default base for RoPE-Mixed is 10).
    Training then moves every (θx, θy) freely. With φ_h = 0 this is axial
    RoPE up to the rounding of cos(π/2).

    Returns:
        Tensor ``(n_heads, dim // 2, 2)`` (wrap it in ``torch.nn.Parameter`` to learn
        it).
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads <= 0:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    mag = axial_inv_freq(dim, check_base(base), dtype=dtype)
    phi = torch.rand(n_heads, 1, generator=generator, dtype=dtype) * (2 * torch.pi)
    first = torch.stack((mag * phi.cos(), mag * phi.sin()), dim=-1)
    second = torch.stack(
        (mag * (phi + torch.pi / 2).cos(), mag * (phi + torch.pi / 2).sin()), dim=-1
    )
    return torch.cat((first, second), dim=1)


def _angle_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def apply_axial(
    x: Tensor,
    positions_xy: Union[Tensor, Sequence],
    *,
    base: float = 10000.0,
    layout: str = "half_split",
) -> Tensor:
    """Rotate every patch vector by its axial angles (10_multi_axis, eq.
    ``multi-axial``).

    Angles are computed in float64 for a float64 ``x``, else float32.

    Args:
        x: ``(..., n, dim)`` patch vectors, dim divisible by 4 (e.g.
            ``(batch, heads, n, dim)``).
        positions_xy: integer ``(n, 2)`` (x, y) positions, or ``(..., n, 2)``
            broadcastable to ``x``.
        base: the base b > 1.
        layout: ``"half_split"`` or ``"interleaved"`` pairing of x's channels.

    Returns:
        Tensor of ``x``'s shape, dtype and device.
    """
    x = check_x(x)
    dim = _check_dim4(x.shape[-1])
    pos = _as_positions_xy(positions_xy, x.device)
    if pos.shape[-2] != x.shape[-2]:
        raise ValueError(
            f"positions_xy must have shape (..., n, 2) with n = {x.shape[-2]} to match "
            f"x of shape {tuple(x.shape)}, got {tuple(pos.shape)}"
        )
    a = axial_angles(pos, dim, base, dtype=_angle_dtype(x))
    cos, sin = cos_sin_from_angles(a, layout=layout, dtype=a.dtype)
    return apply_rotary(x, cos, sin, layout=layout)


def apply_mixed(
    x: Tensor,
    positions_xy: Union[Tensor, Sequence],
    theta_xy: Tensor,
    *,
    layout: str = "half_split",
) -> Tensor:
    """Rotate every patch vector by its mixed angles x·θx + y·θy
    (10_multi_axis, eq. ``multi-mixed``).

    Differentiable in ``theta_xy`` (and ``x``).

    Args:
        x: ``(..., n, dim)``, e.g. ``(batch, heads, n, dim)``.
        positions_xy: integer ``(n, 2)`` (x, y) positions.
        theta_xy: ``(dim//2, 2)`` or per head ``(heads, dim//2, 2)`` (broadcast as
            ``(heads, n, dim//2)`` against ``x``'s leading axes).
        layout: ``"half_split"`` or ``"interleaved"``.

    Returns:
        Tensor of ``x``'s shape, dtype and device.
    """
    x = check_x(x)
    theta_xy = _check_theta_xy(theta_xy)
    if theta_xy.shape[-2] * 2 != x.shape[-1]:
        raise ValueError(
            f"theta_xy must have dim//2 = {x.shape[-1] // 2} pairs to match x of shape "
            f"{tuple(x.shape)}, got {tuple(theta_xy.shape)}"
        )
    pos = _as_positions_xy(positions_xy, x.device)
    if pos.shape[-2] != x.shape[-2]:
        raise ValueError(
            f"positions_xy must have shape (..., n, 2) with n = {x.shape[-2]} to match "
            f"x of shape {tuple(x.shape)}, got {tuple(pos.shape)}"
        )
    a = mixed_angles(pos, theta_xy.to(x.device))
    cos, sin = cos_sin_from_angles(a, layout=layout, dtype=a.dtype)
    return apply_rotary(x, cos, sin, layout=layout)


def rope_scores_2d(
    q: Tensor,
    k: Tensor,
    positions_q: Union[Tensor, Sequence],
    positions_k: Union[Tensor, Sequence],
    theta_xy: Tensor,
    *,
    layout: str = "half_split",
) -> Tensor:
    """Raw scores after 2D RoPE: S[m, n] = ⟨R_{p_m} q_m, R_{p_n} k_n⟩
    (10_multi_axis, eq. ``multi-relative``).

    Rotates with :func:`apply_mixed`; pass ``axial_theta_xy(dim, base)`` for
    axial RoPE. No 1/√d scale, no softmax.

    Args:
        q: ``(..., Lq, dim)``; k: ``(..., Lk, dim)``.
        positions_q: integer ``(Lq, 2)``; positions_k: integer ``(Lk, 2)``, (x, y) each.
        theta_xy: ``(dim//2, 2)`` (or per head, see :func:`apply_mixed`).

    Returns:
        Tensor ``(..., Lq, Lk)``.
    """
    q_rot = apply_mixed(q, positions_q, theta_xy, layout=layout)
    k_rot = apply_mixed(k, positions_k, theta_xy, layout=layout)
    dtype = torch.promote_types(q.dtype, k.dtype)
    return q_rot.to(dtype) @ k_rot.to(dtype).transpose(-1, -2)


def relative_score_2d(
    q: Tensor,
    k: Tensor,
    deltas_xy: Union[Tensor, Sequence],
    theta_xy: Tensor,
    *,
    layout: str = "half_split",
) -> Tensor:
    """The 2D score as a function of Δ = p - p' only: Re Σ_j h_j
    e^{i(Δx·θx_j + Δy·θy_j)} (eq. ``multi-relative``).

    h_j = q_j·conj(k_j) are the pair products of :func:`ropelab.complex.pair_products`.
    Nothing is rotated: this is the closed form of :func:`rope_scores_2d`.

    Args:
        q, k: ``(..., dim)`` unrotated vectors with broadcastable leading axes.
        deltas_xy: integer offsets ``(*D, 2)`` of any sign, (Δx, Δy) = query minus key
            position.
        theta_xy: ``(dim//2, 2)``.

    Returns:
        Tensor ``(..., *D)``: float64 for float64 q and k (complex128 sums), else
        float32.
    """
    theta_xy = _check_theta_xy(theta_xy)
    if theta_xy.ndim != 2:
        raise ValueError(
            f"theta_xy must have shape (dim//2, 2) here, got {tuple(theta_xy.shape)}"
        )
    h = pair_products(q, k, layout=layout)
    if h.shape[-1] != theta_xy.shape[0]:
        raise ValueError(
            f"theta_xy has {theta_xy.shape[0]} pairs but q and k have {h.shape[-1]}"
        )
    d = deltas_xy if isinstance(deltas_xy, Tensor) else torch.as_tensor(deltas_xy)
    if d.is_floating_point() or d.is_complex() or d.dtype == torch.bool:
        raise TypeError(f"deltas_xy must be integers, got dtype {d.dtype}")
    if d.ndim < 1 or d.shape[-1] != 2:
        raise ValueError(
            "deltas_xy must have shape (*D, 2) holding (Δx, Δy), got "
            f"{tuple(d.shape)}"
        )
    real = torch.float64 if h.dtype == torch.complex128 else torch.float32
    d = d.to(h.device, real)
    th = theta_xy.to(h.device, real)
    phase = d[..., 0:1] * th[:, 0] + d[..., 1:2] * th[:, 1]  # (*D, P)
    phasor = torch.polar(torch.ones((), dtype=real, device=h.device), phase)
    out = h @ phasor.reshape(-1, h.shape[-1]).transpose(0, 1)
    return out.real.reshape(h.shape[:-1] + d.shape[:-1])


# --- M-RoPE (Qwen2-VL) -------------------------------------------------------------


def _check_section(mrope_section: object, half: int | None = None) -> list[int]:
    if not isinstance(mrope_section, (list, tuple)) or len(mrope_section) != 3:
        raise ValueError(
            "mrope_section must be a list of 3 ints (pairs for t, h, w), got "
            f"{mrope_section!r}"
        )
    for s in mrope_section:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(
                f"mrope_section must hold non-negative ints, got {mrope_section!r}"
            )
    if half is not None and sum(mrope_section) != half:
        raise ValueError(
            f"mrope_section must sum to dim//2 = {half} (it counts frequency pairs), "
            f"got {list(mrope_section)} with sum {sum(mrope_section)}"
        )
    return list(mrope_section)


def _as_position_ids_3(position_ids_3: object, device: torch.device) -> Tensor:
    if not isinstance(position_ids_3, Tensor):
        raise TypeError(
            "position_ids_3 must be an integer tensor (3, batch, seq), got "
            f"{type(position_ids_3).__name__}"
        )
    if position_ids_3.ndim < 2 or position_ids_3.shape[0] != 3:
        raise ValueError(
            "position_ids_3 must have shape (3, batch, seq) holding (t, h, w) ids, "
            f"got {tuple(position_ids_3.shape)}"
        )
    try:
        return as_positions(position_ids_3, device)
    except (TypeError, ValueError) as err:
        raise type(err)(f"position_ids_3: {err}") from None


def mrope_pair_axes(mrope_section: Sequence[int]) -> Tensor:
    """Which position axis (0 = t, 1 = h, 2 = w) turns each frequency pair j
    (10_multi_axis, eq. ``multi-mrope``).

    The pairs are cut into three consecutive sections of the given sizes:
    [16, 24, 24] gives pairs 0-15 to time, 16-39 to height, 40-63 to width.

    Returns:
        int64 tensor ``(sum(mrope_section),)``.
    """
    section = _check_section(mrope_section)
    return torch.repeat_interleave(torch.arange(3), torch.tensor(section))


def mrope_angles(
    position_ids_3: Tensor, inv_freq: Tensor, mrope_section: Sequence[int]
) -> Tensor:
    """M-RoPE angles p_{axis(j)}·θ_j: each pair turns with the id of its section's
    axis (10_multi_axis, eq. ``multi-mrope``).

    Args:
        position_ids_3: integer ``(3, ..., seq)`` ids (t, h, w), e.g.
            ``(3, batch, seq)``.
        inv_freq: ``(dim // 2,)`` the ordinary 1D ladder θ_j.
        mrope_section: three pair counts summing to dim // 2.

    Returns:
        Tensor ``(..., seq, dim // 2)`` in ``inv_freq``'s dtype.
    """
    section = _check_section(
        mrope_section, inv_freq.shape[-1] if isinstance(inv_freq, Tensor) else None
    )
    a = angles(
        _as_position_ids_3(position_ids_3, getattr(inv_freq, "device", None)), inv_freq
    )  # (3, ..., seq, P)
    return torch.cat(
        [chunk[i] for i, chunk in enumerate(a.split(section, dim=-1))], dim=-1
    )


def mrope_cos_sin(
    position_ids_3: Tensor,
    inv_freq: Tensor,
    mrope_section: Sequence[int],
    *,
    attention_scaling: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """Half-split cos/sin tables of M-RoPE, built as transformers' Qwen2-VL builds them
    (10_multi_axis, eq. ``multi-mrope``).

    Three ordinary half-split tables are made, one per axis (angles in
    ``inv_freq``'s dtype, cos/sin there, times ``attention_scaling``); the
    channel axis is cut into the six chunks ``mrope_section * 2`` and chunk i
    is taken from axis i mod 3, then the table is cast to ``dtype``. The same
    numbers as :func:`ropelab.rotary.cos_sin_from_angles` of :func:`mrope_angles`.

    Args:
        position_ids_3: integer ``(3, batch, seq)`` ids (t, h, w)
            (any ``(3, ..., seq)``).
        inv_freq: ``(dim // 2,)`` frequencies.
        mrope_section: three pair counts summing to dim // 2, e.g. [16, 24, 24] for dim
            128.

    Returns:
        ``(cos, sin)``, each ``(batch, seq, dim)`` in ``dtype`` (half-split layout).
    """
    section = _check_section(
        mrope_section, inv_freq.shape[-1] if isinstance(inv_freq, Tensor) else None
    )
    a = angles(
        _as_position_ids_3(position_ids_3, getattr(inv_freq, "device", None)), inv_freq
    )
    a = torch.cat((a, a), dim=-1)  # (3, ..., seq, dim): three half-split tables
    dtype = check_table_dtype(dtype)
    attention_scaling = check_number(attention_scaling, "attention_scaling",
                                     minimum=0.0, above=True)
    tables = []
    for t in (a.cos(), a.sin()):
        if attention_scaling != 1.0:
            t = t * attention_scaling
        t = torch.cat(
            [chunk[i % 3] for i, chunk in enumerate(t.split(section * 2, dim=-1))],
            dim=-1,
        )
        tables.append(t.to(dtype))
    return tables[0], tables[1]


def mrope_position_ids(
    segments: Sequence[Segment], *, device: torch.device | str | None = None
) -> Tensor:
    """M-RoPE position ids (t, h, w) for a sequence of text runs and images
    (10_multi_axis, eq. ``multi-mrope-ids``).

    The rule of Qwen2-VL's ``get_rope_index``, for one sequence and images
    already counted in LLM tokens (after patch merging):

    * a text run of n tokens gets three equal ids s, s+1, ..., s+n-1;
    * an image of rows × cols tokens, in row-major order, gets t = s,
      h = s + row, w = s + col;
    * the next segment starts at s = (largest id so far) + 1, and the first at 0.

    Args:
        segments: e.g. ``[("text", 3), ("image", (2, 3)), ("text", 2)]``.

    Returns:
        int64 tensor ``(3, seq)``; add a batch axis with ``[:, None]``.
    """
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence):
        raise TypeError(
            "segments must be a sequence of (kind, size) tuples, got "
            f"{type(segments).__name__}"
        )
    parts, start = [], 0
    for i, seg in enumerate(segments):
        if not isinstance(seg, (tuple, list)) or len(seg) != 2:
            raise ValueError(
                f"segments[{i}] must be ('text', n) or ('image', (rows, cols)), got "
                f"{seg!r}"
            )
        kind, size = seg
        if kind == "text":
            if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                raise ValueError(
                    f"segments[{i}]: a text run needs a positive int length, got "
                    f"{size!r}"
                )
            part = (start + torch.arange(size, device=device)).expand(3, size)
        elif kind == "image":
            if (
                not isinstance(size, (tuple, list))
                or len(size) != 2
                or any(
                    isinstance(v, bool) or not isinstance(v, int) or v <= 0
                    for v in size
                )
            ):
                raise ValueError(
                    f"segments[{i}]: an image needs (rows, cols), positive ints, got "
                    f"{size!r}"
                )
            rows, cols = size
            xy = grid_positions(rows, cols, device=device)
            part = (
                torch.stack((torch.zeros_like(xy[:, 0]), xy[:, 1], xy[:, 0])) + start
            )  # (t, h, w) = (0, row, col) + s
        else:
            raise ValueError(
                f"segments[{i}]: kind must be 'text' or 'image', got {kind!r}"
            )
        parts.append(part)
        start = int(part.max()) + 1
    if not parts:
        raise ValueError("segments must not be empty")
    return torch.cat(parts, dim=1)
