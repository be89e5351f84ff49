"""Seeing attention: heatmap figures (PNG, TensorBoard) and the terminal view.

The HTML page is ``viewer.py``'s. Pure functions. Figures are built with matplotlib's
object API (``Figure`` and the Agg canvas), so nothing touches pyplot's global state;
the caller saves or logs them.
Weights are ``(T, S)``: one row per target token, one column per source token.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from seq2seq.alignment.maps import (
    CAVEAT,
    AttentionMap,
    as_matrix,
    as_numpy,
    zero_share,
)

_SHADES = " ░▒▓█"


def _font_size(n: int) -> float:
    """Label font size shrinking with the number of labels (11 pt down to 5 pt)."""
    return float(np.clip(12.0 - 0.12 * n, 5.0, 11.0))


_ZERO_COLOR = "white"  # exact zeros (sparse attention): outside viridis' range


def _draw(
    ax: Any, w: np.ndarray, src: Sequence[str], tgt: Sequence[str], y_labels=True
):
    """One heatmap; weights that are exactly 0 are drawn white, so the support of a
    sparse attention (``attention.normalizer``) stands out from small weights."""
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad=_ZERO_COLOR)
    image = ax.imshow(
        np.ma.masked_equal(w, 0.0), vmin=0.0, vmax=1.0, cmap=cmap, aspect="auto"
    )
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


def plot_alignment(
    weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
) -> Figure:
    """Heatmap of ``weights (T, S)``: source tokens on top, target tokens on the left.

    The figure grows with the sentence lengths, labels shrink, the colour scale is fixed
    to [0, 1] with a colorbar, and :data:`CAVEAT` is written underneath.
    """
    w = as_matrix(weights, len(src_tokens), len(tgt_tokens))
    width = float(np.clip(2.5 + 0.32 * len(src_tokens), 5.0, 30.0))
    height = float(np.clip(2.0 + 0.28 * len(tgt_tokens), 4.0, 30.0))
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = _draw(ax, w, src_tokens, tgt_tokens)
    fig.colorbar(image, ax=ax, fraction=0.05, label=_weight_label(w))
    if title:
        ax.set_title(title, parse_math=False)
    fig.supxlabel(CAVEAT, fontsize=7, color="0.35")
    return fig


def _weight_label(*matrices: np.ndarray) -> str:
    """The colorbar's label; it names the white cells when some weights are 0."""
    zeros = zero_share(matrices)
    if zeros == 0:
        return "attention weight"
    return f"attention weight (white: exactly 0, {100 * zeros:.0f}% of cells)"


def _caption(fig: Figure, image: Any, axes: Any, label: str, title: str | None):
    """A panel figure's shared colorbar, its title and the caveat underneath."""
    fig.colorbar(image, ax=axes, fraction=0.03, label=label)
    if title:
        fig.suptitle(title, parse_math=False)
    fig.supxlabel(CAVEAT, fontsize=7, color="0.35")
    return fig


def plot_heads(
    head_weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
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
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_axis_off()
            continue
        image = _draw(ax, panels[k], src_tokens, tgt_tokens, y_labels=k % cols == 0)
        ax.set_title(names[k], fontsize=9)
    return _caption(fig, image, axes, _weight_label(*panels[:-1]), title)


def plot_comparison(
    weights: Any,
    attribution: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    title: str | None = None,
    method: str = "gradient × input",
) -> Figure:
    """Attention ``(T, S)`` beside an attribution ``(T, S)`` (gradient × input, or a
    self-attention head's attention attribution: ``method``).

    Both panels share the [0, 1] colour scale (each attribution row sums to 1, like
    an attention row); where they differ, the weights and the model's sensitivity
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
    image = None
    for k, (ax, (name, w)) in enumerate(zip(axes, panels, strict=True)):
        image = _draw(ax, w, src_tokens, tgt_tokens, y_labels=k == 0)
        ax.set_title(name, fontsize=9)
    return _caption(fig, image, axes, "weight / share", title)


def alignment_figure(att: AttentionMap, title: str | None = None) -> Figure:
    """Heatmap(s) of one map: per head, or beside its attribution when it has one."""
    title = title or att.title or None
    if att.attribution is not None:
        return plot_comparison(
            att.weights,
            att.attribution,
            att.src_tokens,
            att.tgt_tokens,
            title=title,
            method=att.attribution_method,
        )
    if att.heads is not None:
        return plot_heads(att.heads, att.src_tokens, att.tgt_tokens, title=title)
    return plot_alignment(att.weights, att.src_tokens, att.tgt_tokens, title=title)


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


def alignment_terminal(
    weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    color: bool = True,
) -> str:
    """Text heatmap: numbered source columns, one row per target token.

    Cells are shade blocks (`` ░▒▓█``), or ANSI 256-colour greys when ``color``, and
    ``·`` where a weight is exactly 0; each row ends with the source token it attends
    to most.
    """
    w = as_matrix(weights, len(src_tokens), len(tgt_tokens))
    label_w = max((len(t) for t in tgt_tokens), default=1)
    lines = [" ".join(f"{k}:{tok}" for k, tok in enumerate(src_tokens))]
    lines.append(
        " " * (label_w + 1) + "".join(f"{k % 100:<3d}" for k in range(w.shape[1]))
    )
    for tok, row in zip(tgt_tokens, w, strict=True):
        cells = "".join(_cell(v, color) for v in row)
        best = src_tokens[int(np.argmax(row))] if row.size else ""
        lines.append(f"{tok:>{label_w}} {cells} {best}")
    scale = "".join(_cell(v, color) for v in (0.1, 0.3, 0.5, 0.7, 0.9))
    zeros = " · exactly 0 |" if (w == 0).any() else ""
    lines.append(f"scale 0 {scale} 1 |{zeros} {CAVEAT}")
    return "\n".join(lines)


def _cell(value: float, color: bool) -> str:
    if value == 0:  # exactly 0 (padding, or sparse attention's unused positions)
        return " · "
    value = float(np.clip(value, 0.0, 1.0))
    if color:
        return f"\x1b[38;5;{232 + round(value * 23)}m██\x1b[0m "
    return _SHADES[min(int(value * len(_SHADES)), len(_SHADES) - 1)] * 2 + " "
