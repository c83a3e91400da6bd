"""ropelab: Rotary Position Embedding, derived and checked.

The library behind *The RoPE Book*: each module backs one chapter.
Shapes follow one convention: ``x`` is ``(..., seq, dim)``.
"""

from .attention import decay_bound, rope_scores
from .cache import RotaryEmbedding
from .complex import apply_rotary_complex
from .device import default_device
from .frequencies import angles, inv_freq, wavelengths
from .kernels import kernel_status
from .matrix import rotation_matrix
from .pairing import (
    permute_qk_weight,
    to_half_split,
    to_interleaved,
    unpermute_qk_weight,
)
from .positions import packed_positions, positions_from_mask, rerotate_keys
from .rotary import apply_rotary, cos_sin, rotate_half, rotate_interleaved
from .scaling import scaled_inv_freq

__version__ = "0.1.0"

__all__ = [
    "RotaryEmbedding",
    "angles",
    "apply_rotary",
    "apply_rotary_complex",
    "cos_sin",
    "decay_bound",
    "default_device",
    "inv_freq",
    "kernel_status",
    "packed_positions",
    "permute_qk_weight",
    "positions_from_mask",
    "rerotate_keys",
    "rope_scores",
    "rotate_half",
    "rotate_interleaved",
    "rotation_matrix",
    "scaled_inv_freq",
    "to_half_split",
    "to_interleaved",
    "unpermute_qk_weight",
    "wavelengths",
]
