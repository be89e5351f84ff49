"""Sparse attention (``attention.normalizer``): sparsemax and 1.5-entmax against hand
examples, masking, softmax unchanged as the default, the views of exact zeros
(gradients: ``test_attention.test_gradcheck_float64``)."""

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from seq2seq.alignment.maps import CAVEAT, AttentionMap, zero_share
from seq2seq.alignment.render import alignment_figure
from seq2seq.alignment.terminal import alignment_terminal
from seq2seq.alignment.viewer import alignment_html
from seq2seq.config import ModelConfig, Normalizer
from seq2seq.decoding.translator import Translator
from seq2seq.model.attention import (
    ATTENTIONS,
    build_attention,
    masked_normalize,
    masked_softmax,
)
from seq2seq.model.seq2seq import build_model
from tests.helpers import build_trainer, page_records, tiny_train_config

REAL = [name for name in ATTENTIONS if name != "none"]
SPARSE = [Normalizer.sparsemax, Normalizer.entmax15]
HQ = HM = 6

# Scores (1.0, 0.8, -1.0) and one padded position.
SCORES = torch.tensor([[1.0, 0.8, -1.0, 5.0]])
MASK = torch.tensor([[True, True, True, False]])


def _inputs(b=3, s=5, t=4, dtype=torch.float32, scale=3.0):
    """Queries and memories large enough that sparse weights have exact zeros."""
    torch.manual_seed(1)
    query = scale * torch.randn(b, t, HQ, dtype=dtype)
    memory = scale * torch.randn(b, s, HM, dtype=dtype)
    lengths = torch.tensor([s, 2, 1][:b])
    mask = torch.arange(s)[None] < lengths[:, None]
    return query, memory * mask[..., None], mask


def _make(name, normalizer, dtype=torch.float32):
    torch.manual_seed(0)
    return build_attention(name, HQ, HM, dim=4, heads=2, normalizer=normalizer).to(
        dtype
    )


def test_sparsemax_by_hand():
    # Sorted (1.0, 0.8, -1.0): 1 + 2 * 0.8 > 1.8 but 1 + 3 * (-1) < 0.8, so the
    # support is the first two and tau = (1.0 + 0.8 - 1) / 2 = 0.4.
    weights = masked_normalize(SCORES, MASK, Normalizer.sparsemax)
    assert_close(weights, torch.tensor([[0.6, 0.4, 0.0, 0.0]]))
    assert weights[0, 2] == 0 and weights[0, 3] == 0  # exactly, not nearly


def test_entmax15_by_hand():
    # p_i = (z_i / 2 - tau)_+ ** 2 with support {0, 1}: (0.5 - tau)^2 + (0.4 - tau)^2
    # = 1, i.e. 2 tau^2 - 1.8 tau - 0.59 = 0; -1.0 / 2 < tau, so p_2 = 0.
    tau = (1.8 - math.sqrt(1.8**2 + 8 * 0.59)) / 4
    expected = torch.tensor([[(0.5 - tau) ** 2, (0.4 - tau) ** 2, 0.0, 0.0]])
    weights = masked_normalize(SCORES, MASK, Normalizer.entmax15)
    assert_close(weights, expected)
    assert weights[0, 2] == 0 and weights[0, 3] == 0


def test_softmax_default_is_the_masked_softmax_bit_for_bit():
    scores = torch.randn(3, 4, 5)
    mask = torch.arange(5)[None] < torch.tensor([5, 2, 1])[:, None]
    assert torch.equal(masked_normalize(scores, mask), masked_softmax(scores, mask))
    assert ModelConfig().attention.normalizer == Normalizer.softmax
    for name in REAL:
        torch.manual_seed(0)
        default = build_attention(name, HQ, HM, dim=4, heads=2)
        assert default.normalizer == Normalizer.softmax
        query, memory, mask = _inputs()
        keys = default.prepare(memory, mask)
        weights = default.attend(query, keys).weights
        scores = default.score(query, keys) if name != "multihead" else None
        if scores is not None:
            assert torch.equal(weights, masked_softmax(scores, mask))


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("normalizer", SPARSE)
def test_rows_sum_to_one_padding_is_zero_and_some_weights_are_exactly_zero(
    name, normalizer
):
    attn = _make(name, normalizer)
    with torch.no_grad():  # peaked scores, as after training
        for param in attn.parameters():
            param.mul_(5)
    query, memory, mask = _inputs()
    out = attn.attend(query, attn.prepare(memory, mask))
    weights = out.weights
    m = mask[:, None, :].expand_as(weights)
    assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert torch.equal(weights[~m], torch.zeros_like(weights[~m]))
    assert (weights >= 0).all()
    assert (weights[m] == 0).any()  # the point: exact zeros among real positions
    if out.head_weights is not None:  # each head is sparse and sums to one
        assert_close(out.head_weights.sum(-1), torch.ones(out.head_weights.shape[:-1]))


@pytest.mark.parametrize("normalizer", SPARSE)
def test_half_precision_scores_are_normalized_in_float32(normalizer):
    weights = masked_normalize(SCORES.to(torch.bfloat16), MASK, normalizer)
    assert weights.dtype == torch.float32


def test_zero_share_counts_exact_zeros_only():
    weights = [torch.tensor([[0.6, 0.4, 0.0]]), torch.tensor([[1e-30, 1.0]])]
    assert zero_share(weights) == pytest.approx(1 / 5)
    assert zero_share([]) == 0.0


def test_model_config_reaches_every_attention():
    cfg = ModelConfig()
    cfg.attention.normalizer = Normalizer.entmax15
    model = build_model(cfg, 50, 50)
    assert model.decoder.attention.normalizer == Normalizer.entmax15


def test_a_sparse_model_trains_and_its_checkpoint_decodes_sparsely(tmp_path):
    cfg = tiny_train_config(
        tmp_path / "cache",
        "model.attention.normalizer=sparsemax",
        "trainer.max_steps=4",
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    trainer.fit()
    translator = Translator.from_checkpoint(
        tmp_path / "run" / "checkpoints" / "last.pt"
    )
    assert translator.model.decoder.attention.normalizer == Normalizer.sparsemax
    forced = translator.forced_attention(trainer.data.splits["validation"].head(4))
    for item in forced:
        assert_close(
            torch.as_tensor(item.weights).sum(-1), torch.ones(len(item.weights))
        )
    assert 0 <= zero_share([item.weights for item in forced]) <= 1


SPARSE_MAP = AttentionMap(
    src_tokens=["a", "b", "</s>"],
    tgt_tokens=["x", "</s>"],
    weights=np.array([[0.6, 0.4, 0.0], [0.0, 0.0, 1.0]]),
)


def test_heatmap_leaves_exact_zeros_blank_and_dots_the_support():
    fig = alignment_figure(SPARSE_MAP)
    ax = fig.axes[0]
    rgb = ax.images[0].get_array()
    white = [255, 255, 255]
    assert [[c.tolist() == white for c in row] for row in rgb] == [
        [False, False, True],
        [True, True, False],
    ]
    (dots,) = ax.collections  # one dot per weight above 0: (column, row)
    assert dots.get_offsets().tolist() == [[0, 0], [1, 0], [2, 1]]
    assert "blank: exactly 0 (50% of cells)" in fig.get_supxlabel()
    dense = alignment_figure(AttentionMap(["a", "</s>"], ["x"], np.array([[0.3, 0.7]])))
    assert not dense.axes[0].collections
    assert dense.get_supxlabel() == CAVEAT


def test_terminal_and_viewer_mark_exact_zeros():
    text = alignment_terminal(SPARSE_MAP.weights, ["a", "b", "</s>"], ["x", "</s>"])
    rows = text.splitlines()
    assert rows[2].count("·") == 2 and rows[3].count("·") == 1  # the support
    assert "· above 0, blank exactly 0" in rows[-1]
    # the page keeps the exact zeros, so attention.js dots the same support
    (record,) = page_records(alignment_html([SPARSE_MAP]))
    assert record["weights"] == [[0.6, 0.4, 0.0], [0.0, 0.0, 1.0]]
