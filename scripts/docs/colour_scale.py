"""Builds seq2seq/alignment/static/scale.json, the one colour scale of every attention
picture (PNG, TensorBoard, terminal, HTML viewer, seq2seq-serve's page).

    python scripts/docs/colour_scale.py            # write the table
    python scripts/docs/colour_scale.py --check    # exit 1: file differs, a rule fails
    python scripts/docs/colour_scale.py --figure docs/colour_scale/scale.png   # as seen

The path runs in CIELAB from white (L* 100, the page's and the figure's background, so a
weight of 0 is nothing) to a dark blue (L* 20), hue turning from 250° to 290° and chroma
rising along an arc that stays inside sRGB; it is resampled into 256 stops at equal
CIELAB distances, so equal steps in weight are equal steps to the eye (perceptually
uniform in ΔE*ab), and lightness falls at every stop, so a greyscale print and a reader
with any colour-vision deficiency (the lightness survives protan, deutan and tritan
simulation: ``check``) still read the order. One hue, no rainbow: there is nothing to
decode but dark = more.

Beside the colours the table holds the scales a weight may be read on (``linear``;
``power``, w^½; ``log``, six decades, 1e-6 and below blank), their colour-bar ticks,
the colours of the mark for a sparse attention's support (a small dot: grey on light
cells, white on dark ones), and the nearest xterm-256 colour of each stop (for
terminals without 24-bit colour), never lighter than the stop before.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[2] / "seq2seq/alignment/static/scale.json"
STOPS = 256
L_DARK = 20.0  # the darkest stop's lightness: a navy that still reads as blue
HUE = (250.0, 290.0)  # degrees in CIELAB's a*b* plane, light end to dark end
CHROMA = 44.0  # the arc's height; sin(pi t / 1.4) keeps it inside sRGB
DARK_BELOW = 55.0  # L* under which a cell's mark is drawn white
MARK_LIGHT, MARK_DARK = "#5c5c5c", "#ffffff"

_WHITE = np.array([0.95047, 1.0, 1.08883])  # D65
_RGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
# Machado, Oliveira & Fernandes (2009), severity 1.0, on linear RGB
CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
               [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
               [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
               [0.004733, 0.691367, 0.303900]],
}  # fmt: skip

# The scales a weight may be read on, with their colour-bar ticks (weight, label).
SCALES = {
    "linear": {
        "label": "linear scale",
        "ticks": [[0, "0"], [0.25, "0.25"], [0.5, "0.5"], [0.75, "0.75"], [1, "1"]],
    },
    "power": {
        "label": "w^½ scale",
        "gamma": 0.5,
        "ticks": [[0, "0"], [0.02, "0.02"], [0.1, "0.1"], [0.25, "0.25"], [0.5, "0.5"],
                  [1, "1"]],
    },
    "log": {
        "label": "log scale",
        "floor": 1e-6,
        "ticks": [[1e-6, "≤1e-6"], [1e-4, "1e-4"], [1e-2, "0.01"], [1, "1"]],
    },
}  # fmt: skip


def to_linear(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] to linear light."""
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def to_srgb(lin: np.ndarray) -> np.ndarray:
    """Linear light to sRGB in [0, 1] (values outside stay outside: gamut test)."""
    lin = np.asarray(lin, dtype=np.float64)
    curve = 1.055 * np.abs(lin) ** (1 / 2.4) * np.sign(lin) - 0.055
    return np.where(lin <= 0.0031308, 12.92 * lin, curve)


def lab(rgb: np.ndarray, cvd: str | None = None) -> np.ndarray:
    """CIELAB (D65) of sRGB colours ``(..., 3)`` in [0, 1], as seen with ``cvd``."""
    lin = to_linear(np.asarray(rgb, dtype=np.float64))
    if cvd is not None:
        lin = np.clip(lin @ np.asarray(CVD[cvd]).T, 0.0, 1.0)
    xyz = lin @ _RGB_TO_XYZ.T / _WHITE
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.stack(
        [
            116 * f[..., 1] - 16,
            500 * (f[..., 0] - f[..., 1]),
            200 * (f[..., 1] - f[..., 2]),
        ],
        axis=-1,
    )


def lab_to_rgb(lab_: np.ndarray) -> np.ndarray:
    """sRGB (unclipped) of CIELAB colours ``(..., 3)``."""
    fy = (lab_[..., 0] + 16) / 116
    f = np.stack([fy + lab_[..., 1] / 500, fy, fy - lab_[..., 2] / 200], axis=-1)
    xyz = np.where(f**3 > 0.008856, f**3, (f - 16 / 116) / 7.787) * _WHITE
    return to_srgb(xyz @ np.linalg.inv(_RGB_TO_XYZ).T)


def path(t: np.ndarray) -> np.ndarray:
    """The designed curve in CIELAB at ``t`` in [0, 1] (0 white, 1 the darkest)."""
    lightness = 100.0 - (100.0 - L_DARK) * t
    chroma = CHROMA * np.sin(np.pi * t / 1.4)
    hue = np.radians(HUE[0] + (HUE[1] - HUE[0]) * t)
    return np.stack([lightness, chroma * np.cos(hue), chroma * np.sin(hue)], axis=-1)


def stops() -> np.ndarray:
    """``(STOPS, 3)`` uint8: the curve resampled at equal CIELAB arc length."""
    fine = path(np.linspace(0.0, 1.0, 20001))
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(fine, axis=0), axis=1))]
    at = np.linspace(0.0, arc[-1], STOPS)
    points = np.stack([np.interp(at, arc, fine[:, k]) for k in range(3)], axis=-1)
    rgb = lab_to_rgb(points)
    if rgb.min() < -1e-6 or rgb.max() > 1 + 1e-6:
        raise SystemExit("the curve leaves sRGB: lower CHROMA")
    return np.round(np.clip(rgb, 0.0, 1.0) * 255).astype(np.uint8)


def xterm256(colors: np.ndarray) -> list[int]:
    """The nearest xterm-256 colour (6×6×6 cube and greys, in CIELAB) of each stop,
    never lighter than the previous stop's, so the terminal's order stays dark =
    more."""
    levels = np.array([0, 95, 135, 175, 215, 255])
    cube = np.array([[r, g, b] for r in levels for g in levels for b in levels])
    greys = np.array([[8 + 10 * k] * 3 for k in range(24)])
    palette = lab(np.concatenate([cube, greys]) / 255.0)
    codes = np.r_[16 + np.arange(216), 232 + np.arange(24)]
    out, ceiling = [], np.inf
    for point in lab(colors / 255.0):
        dist = np.linalg.norm(palette - point, axis=1)
        dist[palette[:, 0] > ceiling] = np.inf
        best = int(dist.argmin())
        ceiling = palette[best, 0]
        out.append(int(codes[best]))
    return out


def table() -> dict:
    """Everything ``scale.json`` holds."""
    colors = stops()
    lightness = lab(colors / 255.0)[:, 0]
    return {
        "about": (
            "seq2seq's attention colour scale; written by scripts/docs/colour_scale.py"
        ),
        "colors": ["#" + "".join(f"{int(x):02x}" for x in c) for c in colors],
        "xterm256": xterm256(colors),
        "scales": SCALES,
        "mark": {
            "light": MARK_LIGHT,
            "dark": MARK_DARK,
            "dark_from": int(np.argmax(lightness < DARK_BELOW)),
        },
    }


def problems(colors: np.ndarray) -> list[str]:
    """The rules the table must keep: 0 is white, lightness falls at every stop (also
    under each colour-vision deficiency and in greyscale), equal steps look equal."""
    out = []
    if tuple(colors[0]) != (255, 255, 255):
        out.append(f"the first stop is {tuple(colors[0])}, not white")
    for cvd in (None, *CVD):
        lightness = lab(colors / 255.0, cvd)[:, 0]
        if not (np.diff(lightness) < 0).all():
            out.append(f"lightness does not fall at every stop ({cvd or 'normal'})")
    steps = np.linalg.norm(np.diff(lab(colors[::32] / 255.0), axis=0), axis=1)
    if steps.max() > 1.05 * steps.min():  # eighths of the scale, 8-bit rounding
        out.append(f"unequal steps: ΔE {steps.min():.2f} to {steps.max():.2f}")
    return out


def figure(path: Path, colors: np.ndarray) -> None:
    """The scale as seen with normal vision, in greyscale and with each deficiency."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = {"as drawn": colors / 255.0}
    grey = to_srgb(to_linear(colors / 255.0) @ _RGB_TO_XYZ[1])
    rows["greyscale"] = np.repeat(grey[:, None], 3, axis=1)
    for cvd in CVD:
        lin = np.clip(to_linear(colors / 255.0) @ np.asarray(CVD[cvd]).T, 0, 1)
        rows[cvd] = to_srgb(lin)
    fig = Figure(figsize=(7, 2.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(rows), 1, sharex=True)
    for ax, (name, rgb) in zip(axes, rows.items(), strict=True):
        ax.imshow(np.clip(rgb, 0, 1)[None], aspect="auto", extent=(0, 1, 0, 1))
        ax.set_yticks([])
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
    axes[-1].set_xlabel("weight (linear scale)", fontsize=8)
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--figure", type=Path, help="also draw the scale as seen")
    args = parser.parse_args()
    data = table()
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    colors = np.array(
        [[int(c[k : k + 2], 16) for k in (1, 3, 5)] for c in data["colors"]]
    )
    bad = problems(colors)
    for line in bad:
        print(f"colour_scale: {line}", file=sys.stderr)
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        if not same:
            print(
                f"colour_scale: {OUT} is not the table this script makes",
                file=sys.stderr,
            )
        return 0 if same and not bad else 1
    if bad:
        return 1
    if args.figure:
        figure(args.figure, colors)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
