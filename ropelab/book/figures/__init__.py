"""Every figure the book shows, one function per figure, one module per chapter.

``from ropelab.book import figures`` then ``figures.frequency_ladder(...)``: each
function is re-exported here from its chapter's module (``figures.ch01`` ...
``figures.ch15``, ``figures.intro``), which holds it. The shared style lives in
``figures._style``.

Each function is pure: it takes data or parameters, computes what it needs
through ropelab, and returns a :class:`matplotlib.figure.Figure` with a
title, labelled axes (with units) and a legend where there is more than one
line. Figures are closed in pyplot before they are returned, so a notebook
shows each exactly once (as the cell's value) and no global figure state
leaks between cells. Only the notebooks import this package.
"""

from __future__ import annotations

from . import intro
from . import ch01
from . import ch02
from . import ch03
from . import ch04
from . import ch05
from . import ch06
from . import ch07
from . import ch08
from . import ch09
from . import ch10
from . import ch11
from . import ch12
from . import ch13
from . import ch14
from . import ch15
from ._style import (
    BOOK_STYLE,
    COLUMN_WIDTH,
    MAX_WIDTH,
    MIN_FONT_PT,
    rendered_font_sizes,
)
from .intro import rope_at_a_glance
from .ch01 import (
    sinusoidal_encoding,
    frequency_ladder,
    angle_sawtooth,
    wavelength_bars,
    full_turn_count,
    frequency_spectrum,
)
from .ch02 import shift_invariance, pair_rotation, pair_score
from .ch03 import pairing_diagram, score_comparison
from .ch04 import rotation_matrix_sparsity, rotation_cost
from .ch05 import cos_table, table_error, decode_scores
from .ch06 import toeplitz_scores, long_term_decay, pair_turns
from .ch07 import (
    context_extension_factors,
    pi_interpolation,
    angle_overshoot,
    stale_cache_error,
    yarn_ramps,
    attention_temperature,
    llama3_bands,
    longrope_factors,
)
from .ch08 import angle_precision, angle_error_sources
from .ch09 import cost_bars, bench_ratios, bench_grid
from .ch10 import patch_score_maps
from .ch11 import toy_attention, attention_entropy_by_length, extrapolation_accuracy
from .ch12 import packing_masks, rerotation_drift, dynamic_ntk_scores, layout_scores
from .ch13 import variant_spectra, variant_decay, relative_position_maps, layer_plans
from .ch14 import triton_programs, kernel_traffic
from .ch15 import pair_usage, attention_distance, extension_perplexity, rebuild_damage

# The figure modules, in reading order.
CHAPTERS = (
    intro,
    ch01,
    ch02,
    ch03,
    ch04,
    ch05,
    ch06,
    ch07,
    ch08,
    ch09,
    ch10,
    ch11,
    ch12,
    ch13,
    ch14,
    ch15,
)

__all__ = [
    "BOOK_STYLE",
    "COLUMN_WIDTH",
    "MAX_WIDTH",
    "MIN_FONT_PT",
    "rendered_font_sizes",
    "rope_at_a_glance",
    "sinusoidal_encoding",
    "frequency_ladder",
    "angle_sawtooth",
    "wavelength_bars",
    "full_turn_count",
    "frequency_spectrum",
    "shift_invariance",
    "pair_rotation",
    "pair_score",
    "pairing_diagram",
    "score_comparison",
    "rotation_matrix_sparsity",
    "rotation_cost",
    "cos_table",
    "table_error",
    "decode_scores",
    "toeplitz_scores",
    "long_term_decay",
    "pair_turns",
    "context_extension_factors",
    "pi_interpolation",
    "angle_overshoot",
    "stale_cache_error",
    "yarn_ramps",
    "attention_temperature",
    "llama3_bands",
    "longrope_factors",
    "angle_precision",
    "angle_error_sources",
    "cost_bars",
    "bench_ratios",
    "bench_grid",
    "patch_score_maps",
    "toy_attention",
    "attention_entropy_by_length",
    "extrapolation_accuracy",
    "packing_masks",
    "rerotation_drift",
    "dynamic_ntk_scores",
    "layout_scores",
    "variant_spectra",
    "variant_decay",
    "relative_position_maps",
    "layer_plans",
    "triton_programs",
    "kernel_traffic",
    "pair_usage",
    "attention_distance",
    "extension_perplexity",
    "rebuild_damage",
]
