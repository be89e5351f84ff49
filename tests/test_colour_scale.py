"""The one colour scale (alignment/scale.py, static/scale.json): 0 is the background,
1 the darkest, the rules the table keeps, and the PNG's pixels (the page's are read by
tests/test_viewer_browser.py and tests/test_serve_browser.py)."""

from __future__ import annotations

import importlib.util
import io
import json

import numpy as np
import pytest
from PIL import Image

from seq2seq.alignment import scale
from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.render import figure_to_png, plot_alignment
from seq2seq.alignment.terminal import alignment_terminal
from seq2seq.alignment.viewer import alignment_html, asset
from tests.conftest import REPO_ROOT
from tests.helpers import page_records

spec = importlib.util.spec_from_file_location(
    "colour_scale", REPO_ROOT / "scripts" / "docs" / "colour_scale.py"
)
maker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(maker)

WHITE = np.array([255, 255, 255])
SRC = ["▁a", "▁b", "▁c", "</s>"]
TGT = ["▁x", "▁y", "</s>"]
# a saturated map: 1e-5 beside 1, no exact zero
SATURATED = np.array(
    [[1e-5, 1 - 2e-5, 1e-5, 0.0 + 1e-9], [0.25, 0.25, 0.25, 0.25], [0.5, 0.3, 0.1, 0.1]]
)


def luminance(rgb) -> np.ndarray:
    """Relative luminance (0 black, 1 white) of sRGB colours in 0..255."""
    return maker.to_linear(np.asarray(rgb, dtype=np.float64) / 255) @ np.array(
        [0.2126, 0.7152, 0.0722]
    )


def png_cells(fig, rows: int, cols: int, at: tuple[float, float] = (0.3, 0.3)):
    """The PNG's colour at one point of each cell (offset ``at`` from its centre, in
    cells: clear of the support's dot), ``(rows, cols, 3)``; and the image."""
    png = figure_to_png(fig)
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    ax = fig.axes[0]
    out = np.zeros((rows, cols, 3), dtype=int)
    for r in range(rows):
        for c in range(cols):
            x, y = ax.transData.transform((c + at[0], r + at[1]))
            out[r, c] = image[image.shape[0] - round(y), round(x)]
    return out, image


def cell_mean(fig, image: np.ndarray, row: int, col: int) -> np.ndarray:
    """The mean colour over a cell's inside (its dot included)."""
    ax = fig.axes[0]
    (x0, y0), (x1, y1) = ax.transData.transform(
        [(col - 0.42, row - 0.42), (col + 0.42, row + 0.42)]
    )
    h = image.shape[0]
    top, bottom = sorted((h - int(y0), h - int(y1)))
    left, right = sorted((int(x0), int(x1)))
    return image[top:bottom, left:right].reshape(-1, 3).mean(axis=0)


def test_the_table_is_the_scripts_and_keeps_its_rules():
    assert scale.table() == maker.table()  # python scripts/docs/colour_scale.py made it
    colors = scale.colors()
    assert maker.problems(colors) == []
    assert colors[0].tolist() == [255, 255, 255]  # 0: the background
    assert luminance(colors[-1]) == luminance(colors).min()  # 1: the darkest
    # the rules can fail: viridis starts dark, a reversed table gets lighter
    import matplotlib

    viridis = matplotlib.colormaps["viridis"](np.linspace(0, 1, 256))[:, :3]
    assert maker.problems(np.round(viridis * 255).astype(int))
    assert any("lightness" in p for p in maker.problems(colors[::-1]))
    # the terminal's 256 colours never get lighter along the scale
    levels = [0, 95, 135, 175, 215, 255]
    xterm = [
        [levels[(k - 16) // 36], levels[(k - 16) // 6 % 6], levels[(k - 16) % 6]]
        if k < 232
        else [8 + 10 * (k - 232)] * 3
        for k in scale.table()["xterm256"]
    ]
    assert (np.diff(maker.lab(np.array(xterm) / 255)[:, 0]) <= 0).all()


def test_positions_on_each_scale():
    w = np.array([0.0, 1e-6, 1e-5, 1e-3, 0.25, 1.0])
    np.testing.assert_allclose(scale.position(w, "linear"), w)
    np.testing.assert_allclose(scale.position(w, "power"), np.sqrt(w))
    log = scale.position(w, "log")
    np.testing.assert_allclose(log[[0, 1, 3, 5]], [0, 0, 0.5, 1], atol=1e-12)
    assert scale.index(1e-5).item() == 0 and scale.index(1.0).item() == 255
    assert scale.index(1e-5, "log").item() > 0  # the log scale shows it
    with pytest.raises(ValueError, match="choose one of linear, power, log"):
        scale.position(w, "gamma")


def test_png_draws_1e5_as_the_background_and_1_as_the_darkest():
    fig = plot_alignment(SATURATED, SRC, TGT)
    cells, _ = png_cells(fig, *SATURATED.shape)
    assert cells[0, 0].tolist() == WHITE.tolist()  # 1e-5
    assert cells[0, 1].tolist() == scale.colors()[-1].tolist()  # ≈ 1: the darkest
    # every cell is the table's colour of its weight: the page draws the same
    np.testing.assert_array_equal(cells, scale.rgb(SATURATED))
    assert "linear scale" in fig.axes[1].get_ylabel()
    assert fig.axes[1].get_yticklabels()[-1].get_text() == "1"


def test_png_marks_the_support_without_darkening_small_weights():
    w = np.array([[1e-5, 1 - 1e-5, 0.0], [0.0, 0.0, 1.0]])
    fig = plot_alignment(w, SRC[:3], TGT[1:])
    cells, image = png_cells(fig, *w.shape)
    centre, _ = png_cells(fig, *w.shape, at=(0.0, 0.0))
    assert (cells[0, 0] == WHITE).all() and (centre[0, 2] == WHITE).all()  # 1e-5, 0
    assert luminance(centre[0, 0]) < 0.5  # the dot: 1e-5 is in the support
    # the cell as the eye averages it stays within a few percent of the background
    # in lightness (CIELAB L*; a weight of 0.02 is 98.5)
    assert maker.lab(cell_mean(fig, image, 0, 0) / 255)[0] > 97.5
    assert luminance(cell_mean(fig, image, 0, 2)) == 1.0  # exactly 0: blank
    assert "dot: weight above 0; blank: exactly 0 (50% of cells)" in (
        fig.get_supxlabel()
    )


def test_log_scale_brings_up_small_weights_and_says_so():
    fig = plot_alignment(SATURATED, SRC, TGT, scale="log")
    cells, _ = png_cells(fig, *SATURATED.shape)
    assert luminance(cells[0, 0]) < 0.9  # 1e-5, a sixth of the way up
    assert cells[0, 1].tolist() == scale.colors()[-1].tolist()
    assert "log scale" in fig.axes[1].get_ylabel()
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels == ["≤1e-6", "1e-4", "0.01", "1"]


def test_terminal_paints_the_tables_colours():
    text = alignment_terminal(SATURATED, SRC, TGT, truecolor=True)
    row = text.splitlines()[2]
    r, g, b = scale.colors()[-1]
    assert row.index("48;2;255;255;255m") < row.index(f"48;2;{r};{g};{b}m")
    assert "(linear scale)" in text.splitlines()[-1]
    plain = alignment_terminal(SATURATED, SRC, TGT, color=False)
    assert "·" not in plain  # no exact zero: no support to mark
    xterm = alignment_terminal(SATURATED, SRC, TGT, truecolor=False)
    assert f"48;5;{scale.table()['xterm256'][0]}m" in xterm


def test_scale_js_carries_the_same_table():
    text = asset("scale.js")
    prefix = "window.AttentionScale = "
    body = text[text.index(prefix) + len(prefix) :].rstrip().rstrip(";")
    assert json.loads(body) == scale.table()


def test_the_page_keeps_every_weight_above_0_above_0():
    w = np.array([[4e-7, 1 - 4e-7, 0.0]])  # 6 significant digits, not 6 decimals
    (record,) = page_records(alignment_html([AttentionMap(SRC[:3], TGT[:1], w)]))
    assert record["weights"] == [[4e-7, 1.0, 0.0]]  # the PNG's support, dotted
