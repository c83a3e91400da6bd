"""Every figure the book shows, one function per figure.

Each function is pure: it takes data or parameters, computes what it needs
through ropelab, and returns a :class:`matplotlib.figure.Figure` with a
title, labelled axes (with units) and a legend where there is more than one
line. Figures are closed in pyplot before they are returned, so a notebook
shows each exactly once (as the cell's value) and no global figure state
leaks between cells. Only the notebooks import this module.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__: list[str] = []


def _new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0, **kw):
    """A fresh (fig, axes) pair, detached from pyplot's figure manager."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)
    return fig, axes


def _finish(fig: Figure, title: str) -> Figure:
    fig.suptitle(title)
    return fig


# --- 01_frequencies -------------------------------------------------------


# --- 02_complex_rotation --------------------------------------------------


# --- 03_pairing -------------------------------------------------------------


# --- 04_rotation_matrix ---------------------------------------------------


# --- 05_cache_and_decoding ----------------------------------------------


# --- 06_attention_and_decay ---------------------------------------------
