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

import logging


class _NoFontCacheNotice(logging.Filter):
    """Drops matplotlib's "building the font cache" notice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "building the font cache" not in record.getMessage()


# On a machine without matplotlib's font cache (a fresh hosted notebook), the
# first import of pyplot builds it and, when that takes over 5 s, logs a notice
# to stderr, which a chapter's first cell would show. Nothing is wrong: the
# book's figures say nothing. Installed before any module below imports pyplot.
logging.getLogger("matplotlib.font_manager").addFilter(_NoFontCacheNotice())

from . import intro  # noqa: E402
from . import ch01  # noqa: E402
from . import ch02  # noqa: E402
from . import ch03  # noqa: E402
from . import ch04  # noqa: E402
from . import ch05  # noqa: E402
from . import ch06  # noqa: E402
from . import ch07  # noqa: E402
from . import ch08  # noqa: E402
from . import ch09  # noqa: E402
from . import ch10  # noqa: E402
from . import ch11  # noqa: E402
from . import ch12  # noqa: E402
from . import ch13  # noqa: E402
from . import ch14  # noqa: E402
from . import ch15  # noqa: E402
from ._style import (  # noqa: E402
    BOOK_STYLE,
    COLUMN_WIDTH,
    MAX_WIDTH,
    MIN_FONT_PT,
    rendered_font_sizes,
)
from .intro import rope_at_a_glance  # noqa: E402
from .ch01 import (  # noqa: E402
    sinusoidal_encoding,
    frequency_ladder,
    angle_sawtooth,
    wavelength_bars,
    full_turn_count,
    frequency_spectrum,
)
from .ch02 import shift_invariance, pair_rotation, pair_score  # noqa: E402
from .ch03 import pairing_diagram, score_comparison  # noqa: E402
from .ch04 import rotation_matrix_sparsity, rotation_cost  # noqa: E402
from .ch05 import cos_table, table_error, decode_scores  # noqa: E402
from .ch06 import toeplitz_scores, long_term_decay, pair_turns  # noqa: E402
from .ch07 import (  # noqa: E402
    context_extension_factors,
    pi_interpolation,
    angle_overshoot,
    stale_cache_error,
    yarn_ramps,
    attention_temperature,
    llama3_bands,
    longrope_factors,
)
from .ch08 import angle_precision, angle_error_sources, number_spacing  # noqa: E402
from .ch09 import cost_bars, bench_ratios, bench_grid  # noqa: E402
from .ch10 import patch_score_maps  # noqa: E402
from .ch11 import (  # noqa: E402
    toy_attention,
    attention_entropy_by_length,
    extrapolation_accuracy,
)
from .ch12 import (  # noqa: E402
    packing_masks,
    rerotation_drift,
    dynamic_ntk_scores,
    layout_scores,
)
from .ch13 import (  # noqa: E402
    variant_spectra,
    variant_decay,
    relative_position_maps,
    layer_plans,
)
from .ch14 import triton_programs, kernel_traffic  # noqa: E402
from .ch15 import (  # noqa: E402
    pair_usage,
    attention_distance,
    extension_perplexity,
    rebuild_damage,
)

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
    "number_spacing",
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
