import io
import re

import numpy as np
import pytest
import torch
from PIL import Image

from seq2seq.alignment import scale
from seq2seq.alignment.links import to_pharaoh
from seq2seq.alignment.maps import CAVEAT as ATTENTION_CAVEAT
from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.render import (
    figure_to_array,
    figure_to_png,
    plot_alignment,
    plot_heads,
)
from seq2seq.alignment.terminal import alignment_terminal
from seq2seq.alignment.viewer import alignment_html
from seq2seq.alignment.words import merge_subwords
from tests.helpers import outside_urls, page_records

SRC = ["▁Ein", "▁Mann", "▁fährt", "▁Fahr", "rad", ".", "</s>"]
TGT = ["▁A", "▁man", "▁rides", "▁a", "▁bi", "ke", ".", "</s>"]


def weights(t: int = len(TGT), s: int = len(SRC), seed: int = 0) -> np.ndarray:
    w = np.random.default_rng(seed).random((t, s))
    return w / w.sum(axis=1, keepdims=True)


def labels(texts) -> list[str]:
    return [t.get_text() for t in texts]


def test_plot_alignment_labels_colorbar_png():
    fig = plot_alignment(torch.tensor(weights()), SRC, TGT, title="$5 costs")
    ax, cbar = fig.axes  # heatmap and colorbar
    assert labels(ax.get_xticklabels()) == SRC
    assert labels(ax.get_yticklabels()) == TGT
    assert [t.get_text() for t in cbar.get_yticklabels()][::4] == ["0", "1"]
    assert cbar.get_ylabel() == "attention weight, linear scale"
    png = figure_to_png(fig)
    assert png.startswith(b"\x89PNG")
    with Image.open(io.BytesIO(png)) as img:
        width, height = img.size
    assert 300 < width < 4000 and 300 < height < 4000
    array = figure_to_array(fig)
    assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3


def test_figure_grows_and_font_shrinks_with_length():
    small = plot_alignment(weights(3, 3), SRC[:3], TGT[:3])
    long_src = [f"w{k}" for k in range(60)]
    big = plot_alignment(weights(40, 60), long_src, [f"t{k}" for k in range(40)])
    assert big.get_figwidth() > small.get_figwidth()
    assert big.get_figheight() > small.get_figheight()
    size = big.axes[0].get_xticklabels()[0].get_fontsize()
    assert size < small.axes[0].get_xticklabels()[0].get_fontsize()


def test_plot_alignment_rejects_wrong_shape():
    with pytest.raises(ValueError, match="do not match"):
        plot_alignment(weights(2, 3), SRC, TGT)


def test_plot_heads_one_panel_per_head_plus_mean():
    heads = np.stack([weights(seed=k) for k in range(3)])
    fig = plot_heads(heads, SRC, TGT)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["head 1", "head 2", "head 3", "mean"]
    mean_ax = fig.axes[3]
    drawn = mean_ax.get_images()[0].get_array()  # the scale's colours of the mean
    np.testing.assert_array_equal(drawn, scale.rgb(heads.mean(0)))
    assert labels(mean_ax.get_xticklabels()) == SRC
    assert len(figure_to_png(fig)) > 1000


def test_merge_subwords_sums_columns_and_averages_rows():
    w = weights()
    merged, src_words, tgt_words = merge_subwords(w, SRC, TGT)
    assert src_words == ["Ein", "Mann", "fährt", "Fahrrad.", "</s>"]
    assert tgt_words == ["A", "man", "rides", "a", "bike.", "</s>"]
    assert merged.shape == (6, 5)
    np.testing.assert_allclose(merged.sum(axis=1), 1.0)
    np.testing.assert_allclose(merged[0, 3], w[0, 3] + w[0, 4] + w[0, 5])
    bike = (w[4] + w[5] + w[6]) / 3
    np.testing.assert_allclose(merged[4], [*bike[:3], bike[3:6].sum(), bike[6]])
    np.testing.assert_allclose(merged[5], [*w[7, :3], w[7, 3:6].sum(), w[7, 6]])


def test_pharaoh_argmax_and_threshold():
    w = np.array(
        [
            [0.7, 0.2, 0.1],  # target 0 -> source 0
            [0.1, 0.3, 0.6],  # target 1 -> source 2
            [0.0, 0.55, 0.45],  # target 2 -> source 1
            [0.0, 0.0, 0.0],  # padding row: no link
        ]
    )
    assert to_pharaoh(w) == "0-0 1-2 2-1"
    assert to_pharaoh(w, threshold=0.4) == "0-0 1-2 2-1 2-2"
    assert to_pharaoh(w, threshold=0.99) == ""


def test_terminal_contains_tokens_and_caveat():
    w = weights()
    plain = alignment_terminal(w, SRC, TGT, color=False)
    for token in SRC + TGT:
        assert token in plain
    assert "\x1b[" not in plain and "█" in plain and ATTENTION_CAVEAT in plain
    colored = alignment_terminal(w, SRC, TGT, truecolor=False)
    assert "\x1b[48;5;" in colored
    assert len(plain.splitlines()) == len(TGT) + 3


def test_html_is_self_contained_with_tokens_and_hover_values():
    w = weights()
    heads = np.stack([weights(seed=1), weights(seed=2)])
    page = alignment_html(
        [
            AttentionMap(SRC, TGT, w, title="<one>"),
            AttentionMap(
                SRC[:2], TGT[:2], weights(2, 2), heads=heads[:, :2, :2], gold="0-0 1?1"
            ),
        ]
    )
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    assert outside_urls(page) == []
    assert 'AttentionView.page("linear")' in page and ATTENTION_CAVEAT in page
    assert "<one>" not in page  # the data cannot end its script element early
    one, two = page_records(page)  # what attention.js draws (the browser test)
    assert one["title"] == "<one>" and "heads" not in one
    assert one["src_tokens"] == SRC and one["tgt_tokens"] == TGT
    np.testing.assert_allclose(one["weights"], w, atol=1e-6)
    np.testing.assert_allclose(two["heads"], heads[:, :2, :2], atol=1e-6)
    assert two["gold_cells"] == [[0, 0, "sure"], [1, 1, "possible"]]
    assert one["gold_cells"] == [] and "self_attention" not in two
