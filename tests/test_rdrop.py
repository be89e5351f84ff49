"""R-Drop (``trainer.rdrop``): two dropout passes, their symmetric KL in the
objective."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from seq2seq.model.loss import symmetric_kl
from tests.helpers import (
    assert_gradients_close,
    build_trainer,
    record_step_gradients,
    tiny_train_config,
)

NO_DROPOUT = [
    "model.emb_dropout=0.0",
    "model.encoder.dropout=0.0",
    "model.decoder.dropout=0.0",
]


def test_symmetric_kl_against_kl_div():
    torch.manual_seed(0)
    a, b = torch.randn(7, 11), torch.randn(7, 11)
    la, lb = F.log_softmax(a, -1), F.log_softmax(b, -1)
    kl_ab = F.kl_div(lb, la, log_target=True, reduction="sum")  # KL(P_a || P_b)
    kl_ba = F.kl_div(la, lb, log_target=True, reduction="sum")
    assert_close(symmetric_kl(a, b), 0.5 * (kl_ab + kl_ba))
    assert float(symmetric_kl(a, a)) == pytest.approx(0.0, abs=1e-7)


def _first_step(tmp_path, name, *overrides):
    cfg = tiny_train_config(tmp_path / "cache", "trainer.valid_every=null", *overrides)
    trainer = build_trainer(cfg, tmp_path / name)
    grads = record_step_gradients(trainer)
    batch = next(iter(trainer.loader))
    stats = trainer.train_step([batch])
    return trainer, {**stats, "grads": grads}


def test_identical_passes_give_zero_kl_and_the_plain_step(tmp_path):
    """Without dropout both passes are the same: KL 0, and the step (loss, the
    gradients the optimizer gets) is the step without R-Drop. Gradients, not the
    weights after the step: Adam's first update is about lr · sign(g), and the
    stacked batch sums in another order."""
    _, plain_stats = _first_step(tmp_path, "plain", *NO_DROPOUT)
    _, twice_stats = _first_step(tmp_path, "twice", *NO_DROPOUT, "trainer.rdrop=5")
    assert plain_stats["kl_sum"] is None
    assert float(twice_stats["kl_sum"]) == pytest.approx(0.0, abs=1e-4)
    assert_close(twice_stats["loss_sum"], plain_stats["loss_sum"])
    assert_gradients_close(twice_stats["grads"], plain_stats["grads"])


def test_dropout_passes_differ_and_the_kl_term_moves_the_weights(tmp_path):
    low, low_stats = _first_step(tmp_path, "low", "trainer.rdrop=0.001")
    high, high_stats = _first_step(tmp_path, "high", "trainer.rdrop=50")
    assert float(low_stats["kl_sum"]) > 0  # other dropout masks, other predictions
    assert_close(low_stats["kl_sum"], high_stats["kl_sum"])  # same masks, same seed
    moved = [
        not torch.allclose(p, q)
        for p, q in zip(low.model.parameters(), high.model.parameters(), strict=True)
    ]
    assert any(moved)


def test_negative_weight_is_refused(tmp_path):
    cfg = tiny_train_config(tmp_path / "cache", "trainer.rdrop=-1")
    with pytest.raises(ValueError, match=r"trainer\.rdrop=-1\.0: must be >= 0"):
        build_trainer(cfg, tmp_path / "run")
