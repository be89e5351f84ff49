"""Seeing attention in a terminal: a text heatmap in the pictures' colour scale.

Weights are ``(T, S)``: one row per target token, one column per source token.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from seq2seq.alignment import scale as colour
from seq2seq.alignment.maps import CAVEAT, as_matrix
from seq2seq.config import WeightScale

_SHADES = " ░▒▓█"


def alignment_terminal(
    weights: Any,
    src_tokens: Sequence[str],
    tgt_tokens: Sequence[str],
    color: bool = True,
    scale: WeightScale | str = "linear",
    truecolor: bool | None = None,
) -> str:
    """Text heatmap: numbered source columns, one row per target token.

    With ``color`` each cell is painted in the scale's colour (24-bit when
    ``truecolor``, which defaults to ``$COLORTERM`` saying so, else the nearest of
    xterm's 256): a white panel with blue ink, read the same on a light or a dark
    terminal. Without, cells are shade blocks (`` ░▒▓█``). Either way a weight of 0 is
    blank and, when some weights are exactly 0, ``·`` marks the cells above 0 (the
    support); each row ends with the source token it attends to most.
    """
    w = as_matrix(weights, len(src_tokens), len(tgt_tokens))
    if truecolor is None:
        truecolor = os.environ.get("COLORTERM", "") in ("truecolor", "24bit")
    paint = _Painter(color, truecolor, scale, marks=colour.support(w) is not None)
    label_w = max((len(t) for t in tgt_tokens), default=1)
    lines = [" ".join(f"{k}:{tok}" for k, tok in enumerate(src_tokens))]
    lines.append(
        " " * (label_w + 1) + "".join(f"{k % 100:<3d}" for k in range(w.shape[1]))
    )
    for tok, row in zip(tgt_tokens, w, strict=True):
        best = src_tokens[int(np.argmax(row))] if row.size else ""
        lines.append(f"{tok:>{label_w}} {paint.row(row)} {best}")
    ticks = colour.table()["scales"][WeightScale(scale).value]["ticks"]
    bar = _Painter(color, truecolor, scale, marks=False)
    zeros = " · above 0, blank exactly 0 |" if paint.marks else ""
    lines.append(
        f"weight {ticks[0][1]} {bar.row(np.array([w for w, _ in ticks]))} "
        f"{ticks[-1][1]} ({colour.label(scale)}) |{zeros} {CAVEAT}"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class _Painter:
    """Cells of the terminal view, three characters each; ``marks``: dot the cells
    above 0."""

    color: bool
    truecolor: bool
    scale: WeightScale | str
    marks: bool

    def row(self, values: np.ndarray) -> str:
        stops = colour.index(values, self.scale)
        dots = (values > 0) if self.marks else np.zeros(len(values), dtype=bool)
        if not self.color:
            return "".join(self._shade(k, d) for k, d in zip(stops, dots, strict=True))
        cells = "".join(self._paint(k, d) for k, d in zip(stops, dots, strict=True))
        return cells + "\x1b[0m"

    def _shade(self, stop: int, dot: bool) -> str:
        n = len(colour.table()["colors"])
        shade = _SHADES[min(stop * len(_SHADES) // n, len(_SHADES) - 1)]
        return " · " if dot and shade == " " else shade * 2 + " "

    def _paint(self, stop: int, dot: bool) -> str:
        if self.truecolor:
            r, g, b = colour.colors()[stop]
            background = f"48;2;{r};{g};{b}"
        else:
            background = f"48;5;{colour.table()['xterm256'][stop]}"
        if not dot:
            return f"\x1b[{background}m   "
        mark = colour.table()["mark"]
        ink = "97" if stop >= mark["dark_from"] else "90"  # white / grey dot
        return f"\x1b[{background};{ink}m · "
