"""Optimizers and learning-rate schedules: the fused Adam update, the budget cosine's
shape, and its exact resume."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from seq2seq.training.optim import BudgetCosine, build_optimizer, build_scheduler
from tests.test_train import _events, _losses, _trainer, sigterm_after_step


def _optimizer(lr: float = 0.01) -> torch.optim.Optimizer:
    return torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _lr(opt: torch.optim.Optimizer) -> float:
    return opt.param_groups[0]["lr"]


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_optimizer_updates_like_the_per_tensor_loop(name):
    cfg = OmegaConf.create(
        {"name": name, "lr": 0.01, "betas": [0.9, 0.98], "weight_decay": 0.01}
    )
    torch.manual_seed(0)
    fused_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    loop_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    loop_model.load_state_dict(fused_model.state_dict())
    start = fused_model[0].weight.detach().clone()
    fused = build_optimizer(cfg, fused_model)
    assert fused.defaults["fused"], "torch has fused CPU kernels from 2.4 on"
    kind = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    loop = kind(
        loop_model.parameters(),
        lr=0.01,
        betas=(0.9, 0.98),
        weight_decay=0.01,
        foreach=False,
    )
    for _ in range(5):
        x = torch.randn(32, 8)
        for model, opt in ((fused_model, fused), (loop_model, loop)):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    for a, b in zip(fused_model.parameters(), loop_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.equal(fused_model[0].weight, start), "the weights must move"


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
    with pytest.raises(
        ValueError, match=r"'cosine' is not a valid Schedule: choose one of .*budget"
    ):
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
