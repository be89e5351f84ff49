"""Gradient × input attribution and Spearman correlation on hand-checkable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from seq2seq.alignment.attribution import (
    grad_times_input,
    model_attribution,
    rank,
    spearman,
)


def test_linear_function_gives_weight_times_input():
    # f_t(x) = Σ_s Σ_d w[t, s, d] x[s, d]: the gradient is w, so a = |Σ_d w x|.
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    w = torch.tensor(
        [[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], [[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]]
    )
    raw = grad_times_input(lambda e: (w * e).sum(dim=(1, 2)), x, normalize=False)
    expected = torch.tensor([[1.0, 1.0, 2.0], [2.0, 2.0, 0.0]])
    torch.testing.assert_close(raw, expected)
    rows = grad_times_input(lambda e: (w * e).sum(dim=(1, 2)), x)
    torch.testing.assert_close(rows, expected / expected.sum(1, keepdim=True))


def test_matches_finite_differences_of_a_nonlinear_function():
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.float64)
    m = torch.randn(2, 3, dtype=torch.float64)

    def fn(e):  # (S, D) -> (T,): a log-softmax read, like a decoder's
        scores = e @ m.T  # (S, T)
        return torch.log_softmax(torch.tanh(scores).sum(0), dim=0)

    raw = grad_times_input(fn, x, normalize=False)
    eps = 1e-6
    fd = torch.zeros(2, 4, dtype=torch.float64)
    for s in range(4):
        for d in range(3):
            bump = torch.zeros_like(x)
            bump[s, d] = eps
            grad = (fn(x + bump) - fn(x - bump)) / (2 * eps)  # (T,)
            fd[:, s] += grad * x[s, d]
    torch.testing.assert_close(raw, fd.abs(), atol=1e-7, rtol=1e-6)


def test_rank_averages_ties_and_spearman_by_hand():
    np.testing.assert_allclose(rank([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # d = ranks differ by (0, 0, 1, -1) -> 1 - 6·2 / (4·15) = 0.8
    assert spearman([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(0.8)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="shapes differ"):
        spearman([1, 2], [1, 2, 3])


def test_model_attribution_has_attention_shape(tmp_path):
    from seq2seq.decoding.translator import Translator
    from seq2seq.model.seq2seq import build_model
    from tests.helpers import tiny_train_config

    cfg = tiny_train_config(tmp_path)
    torch.manual_seed(0)
    model = build_model(cfg.model, 50, 60)
    translator = Translator(model, tokenizer=None, device=torch.device("cpu"))
    att = model_attribution(translator, [5, 6, 7], [8, 9])
    assert att.shape == (3, 4)  # 2 pieces + EOS rows, 3 pieces + EOS columns
    torch.testing.assert_close(att.sum(1), torch.ones(3))
    assert (att >= 0).all()


def test_comparison_figure_shows_attention_beside_attribution():
    from seq2seq.alignment.render import close_figure, figure_to_png, plot_comparison

    w = np.full((2, 3), 1 / 3)
    fig = plot_comparison(w, w[:, ::-1], ["a", "b", "</s>"], ["x", "</s>"], title="t")
    titles = [ax.get_title() for ax in fig.axes]
    assert "attention" in titles and "attribution (gradient × input)" in titles
    assert len(figure_to_png(fig)) > 1000
    close_figure(fig)
    with pytest.raises(ValueError, match="do not match"):
        plot_comparison(w, w.T, ["a", "b", "</s>"], ["x", "</s>"])
