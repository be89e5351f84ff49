"""The one colour scale of every attention picture: PNG and TensorBoard heatmaps, the
terminal view, the HTML viewer and seq2seq-serve's page.

Its table, ``static/scale.json`` (made by ``scripts/docs/colour_scale.py``), is read
here and, as ``scale.js``, by ``static/attention.js``, so Python and the browser draw a
weight in the same colour. Why this scale:

- **0 is the background.** The scale starts at white, the figure's and the page's
  background, so a weight of 0 (or 1e-5) reads as nothing and only weight draws ink.
  viridis, the scale before, starts dark purple: a saturated head's 1e-5 cells stood
  out darker than its white exact zeros, links that were not there.
- **Dark is more, evenly.** It runs from white to a dark blue (CIELAB L* 100 to 20)
  through 256 stops at equal CIELAB distances (ΔE*ab), so equal steps in weight are
  equal steps to the eye, and lightness falls at every stop: a greyscale print keeps
  the order, and so do readers with protan, deutan or tritan vision (the script checks
  all three simulations). One hue, so there is nothing to decode but dark = more.

A weight is placed on the scale linearly, or on a power (w^½) or log (six decades)
scale that brings up the small weights of a saturated map (``WeightScale``). A sparse
attention's support, the weights above 0, gets a small dot where a map has exact zeros
(``support``): the dot marks *that* a weight is not 0 without darkening its cell, so a
tiny weight still reads as tiny, and an exact 0 stays blank.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import numpy as np

from seq2seq.config import WeightScale

FILE = "scale.json"


@functools.cache
def table() -> dict[str, Any]:
    """The scale's table (``static/scale.json``): colours, scales, marks."""
    text = (
        resources.files("seq2seq.alignment").joinpath("static", FILE).read_text("utf-8")
    )
    return json.loads(text)


@functools.cache
def colors() -> np.ndarray:
    """The stops as ``(256, 3)`` uint8 sRGB, weight 0 first (white)."""
    hexes = table()["colors"]
    return np.array([[int(h[k : k + 2], 16) for k in (1, 3, 5)] for h in hexes])


def position(weights: Any, scale: WeightScale | str = "linear") -> np.ndarray:
    """Where each weight sits on the colour scale, in [0, 1] (0: white).

    ``linear``: the weight; ``power``: w^gamma; ``log``: its decades above the floor
    (a weight at or below it, and 0, are 0). ``attention.js``'s ``position`` is the
    same formula.
    """
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0)
    kind = WeightScale(scale)
    spec = table()["scales"][kind.value]
    if kind == WeightScale.power:
        return w ** spec["gamma"]
    if kind == WeightScale.log:
        floor = spec["floor"]
        with np.errstate(divide="ignore"):
            decades = np.log10(np.maximum(w, floor) / floor)
        return np.clip(decades / -np.log10(floor), 0.0, 1.0)
    return w


def index(weights: Any, scale: WeightScale | str = "linear") -> np.ndarray:
    """The stop of each weight: ``floor(position · 256)``, 1 the last stop (as
    matplotlib's colour maps and ``attention.js`` index)."""
    n = len(table()["colors"])
    return np.minimum((position(weights, scale) * n).astype(np.int64), n - 1)


def rgb(weights: Any, scale: WeightScale | str = "linear") -> np.ndarray:
    """The colours of ``weights (...)`` as ``(..., 3)`` uint8 sRGB."""
    return colors()[index(weights, scale)]


def support(weights: Any) -> np.ndarray | None:
    """The cells to mark with a dot: the weights above 0, when the map has an exact
    0 (sparse attention, or a saturated float32 softmax); None when it has none."""
    w = np.asarray(weights, dtype=np.float64)
    return w > 0 if (w == 0).any() else None


def mark_colors(weights: Any, scale: WeightScale | str = "linear") -> np.ndarray:
    """The dot's colour per cell, ``(..., 3)`` in [0, 1]: grey on light cells, white
    on dark ones, so it shows on every cell and darkens none much."""
    mark = table()["mark"]
    light, dark = (_unit(mark[k]) for k in ("light", "dark"))
    on_dark = index(weights, scale) >= mark["dark_from"]
    return np.where(on_dark[..., None], dark, light)


def _unit(hex_color: str) -> np.ndarray:
    return np.array([int(hex_color[k : k + 2], 16) / 255 for k in (1, 3, 5)])


def label(scale: WeightScale | str = "linear") -> str:
    """The colour bar's words for the scale: ``linear scale``, ``log scale ...``."""
    return table()["scales"][WeightScale(scale).value]["label"]


def ticks(scale: WeightScale | str = "linear") -> tuple[np.ndarray, list[str]]:
    """The colour bar's ticks: positions on the scale and the weights they show."""
    pairs = table()["scales"][WeightScale(scale).value]["ticks"]
    return position([w for w, _ in pairs], scale), [text for _, text in pairs]


def script() -> str:
    """``scale.js``: the table for ``attention.js`` (``window.AttentionScale``)."""
    return (
        "/* seq2seq's attention colour scale (alignment/static/scale.json). */\n"
        f"window.AttentionScale = {json.dumps(table(), ensure_ascii=False)};\n"
    )
