"""Learning-rate schedules: the budget cosine's shape, and its exact resume."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from seq2seq.optim import BudgetCosine, build_scheduler
from tests.test_train import _events, _losses, _trainer, sigterm_after_step


def _optimizer(lr: float = 0.01) -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _lr(opt: torch.optim.Optimizer) -> float:
    return opt.param_groups[0]["lr"]


def test_budget_cosine_warms_up_then_anneals_to_the_floor_at_the_budget():
    opt = _optimizer(0.01)
    sched = BudgetCosine(opt, warmup_steps=4, min_lr=0.001)
    sched.update(0, 0.0)
    assert _lr(opt) == pytest.approx(0.0025)  # step 1 of 4
    sched.update(3, 0.0)
    assert _lr(opt) == pytest.approx(0.01)
    sched.update(10, 0.5)
    assert _lr(opt) == pytest.approx(0.001 + 0.009 * 0.5)
    sched.update(10, 0.25)
    assert _lr(opt) == pytest.approx(0.001 + 0.009 * 0.5 * (1 + math.cos(math.pi / 4)))
    sched.update(10, 1.7)  # past the budget (a last validation): stays at the floor
    assert _lr(opt) == pytest.approx(0.001)


def test_budget_cosine_keeps_its_base_rate_across_a_checkpoint():
    opt = _optimizer(0.01)
    sched = BudgetCosine(opt, warmup_steps=0, min_lr=0.0)
    sched.update(5, 0.9)
    restored_opt = _optimizer(_lr(opt))  # a resumed optimizer holds the decayed rate
    restored = BudgetCosine(restored_opt, warmup_steps=0, min_lr=0.0)
    restored.load_state_dict(sched.state_dict())
    restored.update(6, 0.5)
    assert _lr(restored_opt) == pytest.approx(0.005)


def test_unknown_schedule_is_named_in_the_error():
    cfg = OmegaConf.create({"name": "cosine", "warmup_steps": 0})
    with pytest.raises(ValueError, match=r"budget.*got 'cosine'"):
        build_scheduler(cfg, _optimizer(), "bleu")


BUDGET = [
    "scheduler=budget",
    "scheduler.warmup_steps=3",
    "scheduler.min_lr=0.0",
    "optim.lr=0.01",
    "trainer.log_every=1",
    "trainer.valid_every=null",
    "trainer.max_epochs=5",
    "trainer.max_steps=14",
    "data.batch_tokens=1500",
]


def test_budget_run_ends_at_the_floor_and_resumes_exactly(tmp_path, monkeypatch):
    full = _trainer(tmp_path, "full", *BUDGET)
    full.fit()
    lrs = {e.step: e.value for e in _events(tmp_path / "full").Scalars("train/lr")}
    cosine = 0.5 * (1 + math.cos(math.pi / 14))
    assert lrs[1] == pytest.approx(0.01 * 2 / 3 * cosine)  # warm-up step 2 of 3
    assert lrs[14] == pytest.approx(0.0, abs=1e-9)
    assert all(lrs[s] >= lrs[s + 1] for s in range(3, 14))

    interrupted = _trainer(tmp_path, "first", *BUDGET)
    sigterm_after_step(interrupted, monkeypatch, 5)
    assert interrupted.fit().stop_reason == "signal"
    resumed = _trainer(tmp_path, "resumed", *BUDGET)
    resumed.resume(tmp_path / "first" / "checkpoints" / "last.pt")
    resumed.fit()
    full_losses = _losses(tmp_path / "full")
    for step, loss in _losses(tmp_path / "resumed").items():
        assert loss == full_losses[step], f"step {step}"
    for name, weight in full.model.state_dict().items():
        torch.testing.assert_close(
            resumed.model.state_dict()[name], weight, rtol=0, atol=0
        )
