"""Redraws the heatmaps under docs/ in the colour scale of every picture
(seq2seq/alignment/scale.py) from the pictures drawn before it, whose checkpoints are
gone:

    python scripts/docs/recolour_docs.py

The earlier pictures (docs/colour_scale/before/) drew a weight w in viridis' colour
number floor(256 w) and an exact 0 white. Each cell's colour is read back at its
centre and matched to viridis' 256 colours (every match is exact up to PNG rounding,
else the script stops), which gives w to within its 1/256 bin: the middle of the bin,
or, for bin 0, 1e-3 standing for a weight above 0 and below 1/256. The linear scale
draws w in colour number floor(256 w) too, so each redrawn cell has the colour the
checkpoint's own weights would give it now; only the log and power scales would need
the weights themselves. A picture of several heads is checked against its own mean
panel, and every row must sum to 1 within its bins.

With a checkpoint, the command beside each picture in the docs draws it instead.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from seq2seq.alignment.render import (  # noqa: E402
    close_figure,
    figure_to_png,
    plot_alignment,
    plot_comparison,
    plot_heads,
)

BEFORE = ROOT / "docs" / "colour_scale" / "before"
VIRIDIS = np.round(matplotlib.colormaps["viridis"](np.arange(256))[:, :3] * 255)
SMALL = 1e-3  # a weight above 0 in viridis' first bin


def pieces(text: str) -> list[str]:
    """SentencePiece pieces written with spaces; ``_`` stands for ``▁``."""
    return [p.replace("_", "▁") for p in text.split()]


@dataclass
class Picture:
    """One earlier picture: where its panels are (pixels: left, top, right, bottom),
    its tokens, and how it is drawn (``alignment``, ``heads`` (the last panel their
    mean) or ``comparison``)."""

    name: str  # the path under docs/
    kind: str
    boxes: list[tuple[float, float, float, float]]
    src: list[str]
    tgt: list[str]
    title: str


def grid(columns: list, rows: list, n: int) -> list:
    """The first ``n`` panel boxes of a grid, row by row."""
    return [(x0, y0, x1, y1) for y0, y1 in rows for x0, x1 in columns][:n]


ENDE = pieces("_A _brown _dog _is _running _after _the _black _dog . </s>")
QS6 = pieces("_she _has _not _lost _a _black _tennis _ball _. </s>")
PICTURES = [
    Picture(
        "self_attention/ende_valid6_all_heads.png",
        "heads",
        grid([(86, 456), (470, 841), (855, 1225)], [(131, 412), (521, 803)], 5),
        ENDE,
        ENDE,
        "validation 6 · self-attention layer=0 all heads",
    ),
    Picture(
        "self_attention/ende_valid6_head0_attribution.png",
        "comparison",
        [(86, 131, 506, 477), (522, 131, 942, 477)],
        ENDE,
        ENDE,
        "validation 6 · self-attention layer=0 head=0",
    ),
    Picture(
        "alignment_de_en_valid157.png",
        "alignment",
        [(86.5, 108.5, 650.5, 616.5)],
        pieces(
            "_Ein _Mann _rasiert _sich , _während _er _a m _Strand _vor _dem _Meer "
            "_sitzt . </s>"
        ),
        pieces(
            "_A _man _shav ing _while _standing _on _the _beach _in _front _of _the "
            "_ocean . </s>"
        ),
        "validation 157",
    ),
    Picture(
        "self_attention/valid6_layer0_all_heads.png",
        "heads",
        grid(
            [(73.5, 424.5), (438.5, 789.5), (803.5, 1154.5)],
            [(118.5, 389.5), (486.5, 758.5)],
            5,
        ),
        QS6,
        QS6,
        "validation 6 · self-attention layer=0 all heads",
    ),
    Picture(
        "self_attention/valid3_layer0_head1.png",
        "alignment",
        [(98.5, 119.5, 419.5, 392.5)],
        pieces("_Oscar _was _in _this _yellow _cupboard _. </s>"),
        pieces("_Oscar _was _in _this _yellow _cupboard _. </s>"),
        "validation 3 · self-attention layer=0 head=1",
    ),
    Picture(
        "self_attention/valid8_layer0_head3.png",
        "alignment",
        [(97.5, 118.5, 506.5, 476.5)],
        pieces("_the _man _ate _the _sandwich _in _the _living _room _. </s>"),
        pieces("_the _man _ate _the _sandwich _in _the _living _room _. </s>"),
        "validation 8 · self-attention layer=0 head=3",
    ),
]


def weights(image: np.ndarray, box, rows: int, cols: int) -> np.ndarray:
    """The weights ``(rows, cols)`` of one viridis panel of ``image``."""
    left, top, right, bottom = box
    out = np.zeros((rows, cols))
    for r in range(rows):
        for c in range(cols):
            x = left + (c + 0.5) * (right - left) / cols
            y = top + (r + 0.5) * (bottom - top) / rows
            pixel = image[round(y), round(x)]
            if (pixel == 255).all():
                continue  # exactly 0
            distance = np.linalg.norm(VIRIDIS - pixel, axis=1)
            k = int(distance.argmin())
            if distance[k] > 3:
                raise SystemExit(
                    f"cell ({r}, {c}) at ({x:.0f}, {y:.0f}) is not viridis"
                )
            out[r, c] = SMALL if k == 0 else (k + 0.5) / 256
    return out


def redraw(picture: Picture) -> Path:
    """Read ``picture``'s earlier version, check it, draw it again under docs/."""
    before = BEFORE / Path(picture.name).name
    image = np.asarray(Image.open(before).convert("RGB")).astype(float)
    shape = (len(picture.tgt), len(picture.src))
    panels = [weights(image, box, *shape) for box in picture.boxes]
    if picture.kind != "comparison":
        sums = np.stack(panels).sum(-1)
        assert np.abs(sums - 1).max() <= shape[1] / 512 + SMALL, sums
    if picture.kind == "heads":
        heads = np.stack(panels[:-1])
        gap = np.abs(heads.mean(0) - panels[-1]).max()
        assert gap <= 2 / 256, f"the mean panel is {gap:.4f} off the heads' mean"
        fig = plot_heads(heads, picture.src, picture.tgt, title=picture.title)
    elif picture.kind == "comparison":
        fig = plot_comparison(
            *panels, picture.src, picture.tgt, picture.title, "attention attribution"
        )
    else:
        fig = plot_alignment(panels[0], picture.src, picture.tgt, title=picture.title)
    target = ROOT / "docs" / picture.name
    target.write_bytes(figure_to_png(fig))
    close_figure(fig)
    return target


def main() -> int:
    for picture in PICTURES:
        print(f"wrote {redraw(picture).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
