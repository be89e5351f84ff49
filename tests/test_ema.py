"""The moving average of the weights (``trainer.ema_decay``): its recurrence, and
that it is what validation decodes and checkpoints carry."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from seq2seq.model.checkpoint import load_checkpoint
from seq2seq.training.ema import WeightAverage, ema_decay_at
from tests.helpers import build_trainer, tiny_train_config


def test_warm_up_then_the_decay():
    assert ema_decay_at(0.999, 0) == pytest.approx(0.1)
    assert ema_decay_at(0.999, 90) == pytest.approx(0.91)
    assert ema_decay_at(0.999, 10**6) == 0.999
    with pytest.raises(ValueError, match="must be in"):
        WeightAverage(torch.nn.Linear(2, 2), 1.0)


def test_the_average_follows_its_recurrence_and_leaves_the_model_alone():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    ema = WeightAverage(model, decay=0.5)
    expected = model.weight.detach().clone()
    for n in range(5):
        with torch.no_grad():
            model.weight.copy_(torch.randn(2, 3))
        trained = model.weight.detach().clone()
        ema.update(model)
        d = min(0.5, (1 + n) / (10 + n))
        expected = d * expected + (1 - d) * trained
        assert_close(ema.module.weight, expected)
        assert_close(model.weight, trained, rtol=0, atol=0)
    assert ema.updates == 5 and not ema.module.weight.requires_grad


def _fit(tmp_path, name, *overrides):
    cfg = tiny_train_config(
        tmp_path / "cache", "trainer.max_steps=6", "trainer.valid_every=3", *overrides
    )
    trainer = build_trainer(cfg, tmp_path / name)
    trainer.fit()
    return trainer


def test_validation_and_checkpoints_use_the_average_and_training_the_weights(
    tmp_path,
):
    plain = _fit(tmp_path, "plain")
    averaged = _fit(tmp_path, "ema", "trainer.ema_decay=0.9")
    assert averaged.translator.model is averaged.ema.module
    last = load_checkpoint(tmp_path / "ema" / "checkpoints" / "last.pt")
    assert last["ema_updates"] == 6
    for name, weight in averaged.model.state_dict().items():
        # training follows the same path with or without the average
        assert_close(weight, plain.model.state_dict()[name], rtol=0, atol=0)
        assert_close(last["trained_model"][name], weight, rtol=0, atol=0)
        assert_close(last["model"][name], averaged.ema.module.state_dict()[name])
    model, trained = last["model"], last["trained_model"]
    assert all(not torch.equal(model[k], trained[k]) for k in model)
    assert "trained_model" not in load_checkpoint(
        tmp_path / "plain" / "checkpoints" / "last.pt"
    )
