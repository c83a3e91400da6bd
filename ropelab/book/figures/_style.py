"""The book's one figure style, shared by every figure module: sizes, fonts, colours.

A figure is a ``_BookFigure`` made by :func:`new_figure` and titled by
:func:`finish`; :func:`rendered_font_sizes` says how large its text reads in
the book's column.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = [
    "BOOK_STYLE",
    "COLUMN_WIDTH",
    "DPI",
    "FLOOR_PT",
    "MAX_WIDTH",
    "MIN_FONT_PT",
    "PAD",
    "finish",
    "new_figure",
    "overlaps",
    "rendered_font_sizes",
    "wrap_title",
]

# --- the book's one figure style ------------------------------------------
#
# A figure is shown as a PNG scaled to fit the book's text column (7 in =
# 672 CSS px in a 1280 px window, 768 px at 1400; the image's max-width is
# 100 %). Text must read at MIN_FONT_PT points or more *as rendered*, so:
# - no figure is wider than MAX_WIDTH: a wider request is scaled down to it,
#   height in proportion (the fonts keep their size, so they grow relative to
#   the drawing). The notebook stores the figure's tight bounding box plus
#   0.1 in of padding on each side (savefig.pad_inches), hence 0.2 in less
#   than the column;
# - the PNG is rendered at DPI = 192 (twice the CSS 96 px/in: sharp on HiDPI
#   screens and in print), so it is at least as wide as the column and the
#   browser only ever scales it *down to the column* or shows it larger:
#   every figure inch is at least one rendered inch;
# - every text is drawn at FLOOR_PT or larger (enforced when the figure is
#   drawn, whatever sizes a figure function asked for): 5 % over MIN_FONT_PT,
#   the slack for a drawing whose bounding box runs a little past its edges.
# The figure background is transparent and the axes white: on a light page the
# figure sits on the page, in dark mode the theme puts a light card behind
# images, and the white plot area stays readable on both.
COLUMN_WIDTH = 7.0  # inches: the book column at 96 CSS px per inch
PAD = 0.1  # inches around the tight bounding box in the stored PNG
MAX_WIDTH = COLUMN_WIDTH - 2 * PAD  # the widest figure
MIN_FONT_PT = 9.0  # the smallest text as rendered, in points
FLOOR_PT = 9.5  # the smallest text as drawn
DPI = 192
BOOK_STYLE: dict[str, object] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.pad_inches": PAD,
    "axes.facecolor": "white",
    "font.family": "DejaVu Sans",
    "mathtext.fontset": "dejavusans",
    "font.size": 11.0,
    "axes.titlesize": 11.0,
    "axes.labelsize": 11.0,
    "figure.titlesize": 12.0,
    "figure.titleweight": "bold",
    "xtick.labelsize": 10.0,
    "ytick.labelsize": 10.0,
    "legend.fontsize": 10.0,
    "legend.title_fontsize": 10.0,
    "legend.framealpha": 0.9,
    "axes.grid": False,
    "grid.alpha": 0.3,
    # Okabe-Ito colours: told apart with the common colour-vision deficiencies.
    "axes.prop_cycle": mpl.cycler(
        color=[
            "#0072B2",
            "#D55E00",
            "#009E73",
            "#CC79A7",
            "#E69F00",
            "#56B4E9",
            "#F0E442",
            "#000000",
        ]
    ),
}


class _BookFigure(Figure):
    """A Figure that draws in the book's style, whatever its functions asked for.

    Text sizes given as names ("small") or points below FLOOR_PT are raised
    to FLOOR_PT when the figure is drawn (saved, displayed), and ticks made
    during the draw take BOOK_STYLE's sizes.
    """

    def draw(self, renderer):
        with mpl.rc_context(BOOK_STYLE):
            for text in self.findobj(Text):
                if text.get_fontsize() < FLOOR_PT:
                    text.set_fontsize(FLOOR_PT)
            for ax in self.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                        for label in (tick.label1, tick.label2):
                            if label.get_fontsize() < FLOOR_PT:
                                label.set_fontsize(FLOOR_PT)
                ax.tick_params(which="both", labelsize=max(FLOOR_PT, tick_size(ax)))
            return super().draw(renderer)


def tick_size(ax) -> float:
    """The size new tick labels of ``ax`` get (its tick_params, else the style)."""
    size = ax.xaxis._major_tick_kw.get("labelsize", BOOK_STYLE["xtick.labelsize"])
    return float(mpl.font_manager.FontProperties(size=size).get_size_in_points())


def new_figure(
    nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 4.0, **kw
):
    """A fresh (fig, axes) pair in the book's style, detached from pyplot.

    ``width`` and ``height`` are in inches; a width over MAX_WIDTH is scaled
    down to it, the height in proportion, so the figure is never shrunk in the
    column (its text would shrink with it).
    """
    if width > MAX_WIDTH:
        width, height = MAX_WIDTH, height * MAX_WIDTH / width
    with mpl.rc_context(BOOK_STYLE):
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(width, height),
            layout="constrained",
            FigureClass=_BookFigure,
            **kw,
        )
    plt.close(fig)
    return fig, axes


def wrap_title(title: str, chars: int) -> str:
    """``title`` broken at spaces into lines of at most ``chars`` characters.

    Never breaks inside ``$...$`` (mathtext must stay on one line); an explicit
    newline in the title is kept.
    """
    lines = []
    for paragraph in title.split("\n"):
        words, line = [], ""
        for word in paragraph.split(" "):  # re-join the words of a $...$ span
            if words and words[-1].count("$") % 2:
                words[-1] += " " + word
            else:
                words.append(word)
        for word in words:
            if line and len(line) + 1 + len(word) > chars:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "\n".join(lines)


def finish(fig: Figure, title: str) -> Figure:
    """Give ``fig`` its title, in the book's style, wrapped to the figure's width."""
    size = float(BOOK_STYLE["figure.titlesize"])
    # A bold DejaVu Sans character is about 0.65 em wide on average.
    chars = int(fig.get_figwidth() * 72 / (0.65 * size))
    with mpl.rc_context(BOOK_STYLE):
        fig.suptitle(wrap_title(title, chars))
    return fig


def rendered_font_sizes(
    fig: Figure, column_px: float = COLUMN_WIDTH * 96
) -> list[tuple[str, float]]:
    """Each visible text of ``fig`` and its size in points as the book shows it.

    The notebook stores the figure as a PNG of its tight bounding box plus
    PAD on each side at ``fig.dpi``; the page shows it at its natural size
    (96 px per CSS inch) or, if wider, scaled down to the column
    (``column_px`` CSS pixels).

    Returns:
        (text, rendered size in pt) for every visible, non-empty text.
    """
    fig.draw_without_rendering()  # lays it out and applies the style, as saving does
    width_in = fig.get_tightbbox().width + 2 * PAD  # inches, as the notebook stores it
    natural_px = width_in * fig.dpi
    # rendered inches per figure inch
    scale = min(natural_px, column_px) / (width_in * 96)
    return [
        (t.get_text(), t.get_fontsize() * scale)
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure(root=True) is fig
    ]


def _all_axes(fig: Figure) -> list:
    """The figure's axes and their insets (child axes), depth first."""
    out = []

    def walk(ax) -> None:
        out.append(ax)
        for child in ax.child_axes:
            walk(child)

    for ax in fig.axes:
        walk(ax)
    return out


def _text_boxes(fig: Figure, renderer) -> list[tuple[str, object, str, Bbox]]:
    """(kind, owner, name, box in display pixels) of each visible text and legend."""
    boxes, seen = [], set()

    def add(kind: str, owner: object, artist) -> None:
        if artist is None or not artist.get_visible() or id(artist) in seen:
            return
        seen.add(id(artist))
        name = artist.get_text() if isinstance(artist, Text) else "legend"
        if isinstance(artist, Text) and not name.strip():
            return
        box = artist.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((kind, owner, f"{kind} {name.strip()[:40]!r}", box))

    add("title", fig, fig._suptitle)
    for text in fig.texts:
        add("text", fig, text)
    for legend in fig.legends:
        add("legend", fig, legend)
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        for title in (ax.title, ax._left_title, ax._right_title):
            add("title", ax, title)
        for axis, key in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if not (ax.axison and axis.get_visible()):
                continue  # an axes drawn without its axes (a diagram)
            add("label", ax, axis.label)
            for tick in axis._update_ticks():  # the ticks drawn: inside the view
                for label in (tick.label1, tick.label2):
                    add("tick", (ax, key), label)
        for text in ax.texts:
            add("text", ax, text)
        add("legend", ax, ax.get_legend())
    return boxes


def _data_points(ax) -> list[tuple[str, np.ndarray]]:
    """The plotted data of ``ax`` as display points: lines (densified), markers,
    bars."""
    out = []
    for line in ax.lines:
        if line.get_transform() is not ax.transData:
            continue  # a reference line across the axes (axhline, axvline)
        if not line.get_visible() or len(line.get_xydata()) == 0:
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_linestyle() not in ("None", "", " ") and 1 < len(xy) < 400:
            t = np.linspace(0.0, 1.0, 12)[:, None, None]
            xy = (xy[:-1] + t * (xy[1:] - xy[:-1])).reshape(-1, 2)
        out.append((f"line {line.get_label()!r}", xy))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and coll.get_visible():
            offsets = coll.get_offset_transform().transform(coll.get_offsets())
            out.append((f"markers {coll.get_label()!r}", np.asarray(offsets)))
    for patch in ax.patches:
        if (
            isinstance(patch, Rectangle)
            and patch.get_visible()
            and patch.get_height() != 0
        ):
            box = patch.get_window_extent()
            if box.height >= 0.98 * ax.bbox.height or box.width >= 0.98 * ax.bbox.width:
                continue  # a shaded band across the axes (axvspan), not data
            xs, ys = np.linspace(box.x0, box.x1, 6), np.linspace(box.y0, box.y1, 6)
            grid = np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2)
            out.append((f"bar {patch.get_label()!r}", grid))
    return out


def overlaps(fig: Figure, *, tolerance_px: float = 2.0) -> list[str]:
    """What collides in ``fig`` as drawn: text on text, and a legend on its data.

    Compares the rendered bounding boxes (display pixels at ``fig.dpi``) of
    the suptitle, axes titles, axis labels (colour bars' too), tick labels,
    texts and annotations, and legends (each legend as one box). Two boxes
    collide when they share more than ``tolerance_px`` in both directions;
    the tick labels of one axes are not compared with each other. A legend
    inside an axes covers data when a point of a plotted line (its segments
    sampled), a marker or a bar of that axes lies inside the legend's box;
    reference lines and shaded bands across the whole axes do not count.

    Returns:
        One line per collision, e.g. ``"title 'Decay' overlaps label 'score'"``;
        empty when nothing collides.
    """
    fig.draw_without_rendering()  # lays it out in the book's style, as saving does
    renderer = fig._get_renderer()  # an Agg renderer also for a figure outside pyplot
    boxes = _text_boxes(fig, renderer)
    found = []
    for i, (kind_a, owner_a, name_a, a) in enumerate(boxes):
        for kind_b, owner_b, name_b, b in boxes[i + 1 :]:
            if kind_a == kind_b == "tick" and owner_a[0] is owner_b[0]:
                continue  # one axes' tick labels (x and y meet at a corner)
            wide = min(a.x1, b.x1) - max(a.x0, b.x0)
            high = min(a.y1, b.y1) - max(a.y0, b.y0)
            if wide > tolerance_px and high > tolerance_px:
                found.append(f"{name_a} overlaps {name_b}")
    for ax in _all_axes(fig):
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).padded(-tolerance_px)
        for name, points in _data_points(ax):
            inside = (
                (points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)
            )
            if inside.any():
                title = ax.get_title() or ax.get_ylabel()
                found.append(f"legend of {title!r} covers {name}")
    return found
