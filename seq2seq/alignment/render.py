"""Seeing attention: heatmap figures (PNG, TensorBoard).

The terminal view is ``terminal.py``'s, the HTML page ``viewer.py``'s. Pure
functions. Figures are built with matplotlib's object API (``Figure`` and the Agg
canvas), so nothing touches pyplot's global state; the caller saves or logs them.
Weights are ``(T, S)``: one row per target token, one column per source token.
Every picture uses ``scale.py``'s colour scale (0 white, the background; 1 the darkest
blue), on the ``WeightScale`` asked for, and marks a sparse map's support with dots.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.collections import EllipseCollection
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure

from seq2seq.alignment import scale as colour
from seq2seq.alignment.maps import (
    CAVEAT,
    AttentionMap,
    as_matrix,
    as_numpy,
    zero_share,
)
from seq2seq.config import WeightScale

_DOT = 0.16  # the support's dot: its diameter in cells (2% of a cell's area)


def _font_size(n: int) -> float:
    """Label font size shrinking with the number of labels (11 pt down to 5 pt)."""
    return float(np.clip(12.0 - 0.12 * n, 5.0, 11.0))


def _draw(
    ax: Any,
    w: np.ndarray,
    src: Sequence[str],
    tgt: Sequence[str],
    y_labels=True,
    scale: WeightScale | str = "linear",
):
    """One heatmap: each cell the scale's colour of its weight (drawn as RGB, so the
    PNG holds the table's colours exactly, as the page does), and a dot in every
    cell above 0 when some are exactly 0 (a sparse attention's support)."""
    image = ax.imshow(
        colour.rgb(w, scale).astype(np.uint8), aspect="auto", interpolation="nearest"
    )
    cells = colour.support(w)
    if cells is not None and cells.any():
        rows, cols = np.nonzero(cells)
        dots = EllipseCollection(
            _DOT,
            _DOT,
            0.0,
            units="xy",
            offsets=np.column_stack([cols, rows]),
            offset_transform=ax.transData,
            facecolors=colour.mark_colors(w[rows, cols], scale),
            linewidths=0,
        )
        ax.add_collection(dots)
    ax.set_xticks(
        range(len(src)),
        labels=list(src),
        rotation=90,
        fontsize=_font_size(len(src)),
        parse_math=False,
    )
    ax.xaxis.tick_top()
    ax.set_yticks(
        range(len(tgt)),
        labels=list(tgt) if y_labels else [],
        fontsize=_font_size(len(tgt)),
        parse_math=False,
    )
    return image


def _colorbar(fig: Figure, axes: Any, fraction: float, label: str, scale) -> Any:
    """The colour bar of ``scale``: the table's stops, ticks at weights."""
    cmap = ListedColormap(colour.colors() / 255.0)
    bar = fig.colorbar(
        ScalarMappable(Normalize(0.0, 1.0), cmap), ax=axes, fraction=fraction
    )
    positions, labels = colour.ticks(scale)
    bar.set_ticks(positions, labels=labels)
    bar.set_label(label)
    return bar


def plot_alignment(
    weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
    scale: WeightScale | str = "linear",
) -> Figure:
    """Heatmap of ``weights (T, S)``: source tokens on top, target tokens on the left.

    The figure grows with the sentence lengths, labels shrink, the colour bar names
    the ``scale`` (0 to 1 in weight), and :data:`CAVEAT` is written underneath.
    """
    w = as_matrix(weights, len(src_tokens), len(tgt_tokens))
    width = float(np.clip(2.5 + 0.32 * len(src_tokens), 5.0, 30.0))
    height = float(np.clip(2.0 + 0.28 * len(tgt_tokens), 4.0, 30.0))
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _draw(ax, w, src_tokens, tgt_tokens, scale=scale)
    if title:
        ax.set_title(title, parse_math=False)
    return _caption(fig, ax, _weight_label(scale), None, scale, [w])


def _weight_label(scale: WeightScale | str) -> str:
    """The colour bar's label: what is drawn, on which scale."""
    return f"attention weight, {colour.label(scale)}"


def _legend(*matrices: np.ndarray) -> str:
    """The words under the picture: the caveat, after what the dot means when some
    weights are exactly 0 (``●`` in the dot's grey, the text's colour)."""
    zeros = zero_share(matrices)
    if zeros == 0:
        return CAVEAT
    share = f"{100 * zeros:.0f}% of cells"
    return f"● dot: weight above 0; blank: exactly 0 ({share})\n{CAVEAT}"


def _caption(fig: Figure, axes: Any, label: str, title: str | None, scale, panels):
    """A figure's colour bar, title, and the legend and caveat underneath."""
    _colorbar(fig, axes, 0.05 if isinstance(axes, Axes) else 0.03, label, scale)
    if title:
        fig.suptitle(title, parse_math=False)
    mark = colour.table()["mark"]["light"]
    fig.supxlabel(_legend(*panels), fontsize=7.5, color=mark, linespacing=1.6)
    return fig


def plot_heads(
    head_weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
    scale: WeightScale | str = "linear",
) -> Figure:
    """One panel per head of ``head_weights (heads, T, S)``, plus their mean."""
    hw = np.asarray(as_numpy(head_weights), dtype=np.float64)
    if hw.ndim != 3:
        raise ValueError(f"head weights must be (heads, T, S), got {tuple(hw.shape)}")
    panels = [as_matrix(h, len(src_tokens), len(tgt_tokens)) for h in hw]
    panels.append(hw.mean(axis=0))
    names = [f"head {k + 1}" for k in range(len(hw))] + ["mean"]
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    cell_w = float(np.clip(1.5 + 0.25 * len(src_tokens), 3.0, 12.0))
    cell_h = float(np.clip(1.5 + 0.22 * len(tgt_tokens), 2.5, 12.0))
    fig = Figure(
        figsize=(cols * cell_w + 1.0, rows * cell_h + 0.5), layout="constrained"
    )
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_axis_off()
            continue
        y_labels = k % cols == 0
        _draw(ax, panels[k], src_tokens, tgt_tokens, y_labels, scale)
        ax.set_title(names[k], fontsize=9)
    label = _weight_label(scale)
    return _caption(fig, axes, label, title, scale, panels[:-1])


def plot_comparison(
    weights: Any,
    attribution: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
    method: str = "gradient × input",
    scale: WeightScale | str = "linear",
) -> Figure:
    """Attention ``(T, S)`` beside an attribution ``(T, S)`` (gradient × input, or a
    self-attention head's attention attribution: ``method``).

    Both panels share the colour scale (each attribution row sums to 1, like an
    attention row); where they differ, the weights and the model's sensitivity
    disagree.
    """
    panels = [
        ("attention", as_matrix(weights, len(src_tokens), len(tgt_tokens))),
        (
            f"attribution ({method})",
            as_matrix(attribution, len(src_tokens), len(tgt_tokens)),
        ),
    ]
    cell_w = float(np.clip(1.5 + 0.3 * len(src_tokens), 3.5, 14.0))
    height = float(np.clip(2.0 + 0.28 * len(tgt_tokens), 4.0, 16.0))
    fig = Figure(figsize=(2 * cell_w + 1.0, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, squeeze=False)[0]
    for k, (ax, (name, w)) in enumerate(zip(axes, panels, strict=True)):
        _draw(ax, w, src_tokens, tgt_tokens, k == 0, scale)
        ax.set_title(name, fontsize=9)
    label = f"weight / share, {colour.label(scale)}"
    return _caption(fig, axes, label, title, scale, [w for _, w in panels])


def alignment_figure(
    att: AttentionMap, title: str | None = None, scale: WeightScale | str = "linear"
) -> Figure:
    """Heatmap(s) of one map: per head, or beside its attribution when it has one."""
    title = title or att.title or None
    src, tgt = att.src_tokens, att.tgt_tokens
    if att.attribution is not None:
        method = att.attribution_method
        return plot_comparison(
            att.weights, att.attribution, src, tgt, title, method, scale
        )
    if att.heads is not None:
        return plot_heads(att.heads, src, tgt, title=title, scale=scale)
    return plot_alignment(att.weights, src, tgt, title=title, scale=scale)


def figure_to_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render ``fig`` to PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def figure_to_array(fig: Figure) -> np.ndarray:
    """Render ``fig`` to an ``(H, W, 3)`` uint8 RGB array (TensorBoard's HWC image)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def close_figure(fig: Figure) -> None:
    """Release ``fig``; also drops it from pyplot when a caller made it there."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)
    fig.clear()
