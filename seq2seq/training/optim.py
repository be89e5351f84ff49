"""Optimizers, learning-rate schedules and the scheduled-sampling schedule."""

from __future__ import annotations

import math

import torch
from torch.torch_version import TorchVersion

from seq2seq.config import Metric, OptimizerName, Sampling, Schedule


class WarmupThen(torch.optim.lr_scheduler.LambdaLR):
    """Linear warm-up over ``warmup_steps``, then constant or inverse-sqrt decay."""

    def __init__(self, optimizer, warmup_steps: int, decay: bool) -> None:
        def factor(step: int) -> float:
            step = step + 1
            if warmup_steps and step < warmup_steps:
                return step / warmup_steps
            if decay and warmup_steps:
                return math.sqrt(warmup_steps / step)
            return 1.0

        super().__init__(optimizer, factor)


class BudgetCosine:
    """Warm-up, then cosine decay to ``min_lr`` as the run's budget is spent.

    A run with a fixed budget (minutes, steps or epochs) ends best with the learning
    rate annealed to the floor *at* the budget; a plateau schedule instead waits for
    validations that a short run does not have. The caller passes the fraction of the
    budget used, so one schedule serves a wall-clock limit and a step limit alike.
    """

    def __init__(self, optimizer, warmup_steps: int, min_lr: float) -> None:
        self.optimizer = optimizer
        self.warmup_steps = warmup_steps
        self.min_lr = min_lr
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]

    def update(self, step: int, fraction: float) -> None:
        """Set the learning rate of step ``step`` at ``fraction`` of the budget."""
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(max(fraction, 0.0), 1.0)))
        warm = 1.0
        if self.warmup_steps and step < self.warmup_steps:
            warm = (step + 1) / self.warmup_steps
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            floor = min(self.min_lr, base)
            group["lr"] = warm * (floor + (base - floor) * cosine)

    def state_dict(self) -> dict:
        return {"base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict) -> None:
        self.base_lrs = list(state["base_lrs"])


def build_scheduler(cfg, optimizer, metric: Metric | str):
    """Return ``(step_scheduler, plateau, budget_scheduler)``; any may be None.

    The step scheduler advances every optimizer step (warm-up); the plateau scheduler
    advances at every validation with the early-stopping metric; the budget scheduler
    is told the fraction of the training budget used after every step.
    """
    name = Schedule(cfg.name)
    if name == Schedule.budget:
        return None, None, BudgetCosine(optimizer, cfg.warmup_steps, cfg.min_lr)
    step_sched = None
    if cfg.warmup_steps or name == Schedule.warmup:
        decay = name == Schedule.warmup
        step_sched = WarmupThen(optimizer, cfg.warmup_steps, decay=decay)
    plateau = None
    if name == Schedule.plateau:
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer,
            mode=Metric(metric).mode,
            factor=cfg.factor,
            patience=cfg.patience,
            min_lr=cfg.min_lr,
        )
    return step_sched, plateau, None


def teacher_forcing_ratio(
    schedule: Sampling | str, step: int, k: float, min_ratio: float
) -> float:
    """Probability of feeding the gold token at ``step`` (Bengio et al., 2015).

    linear: ``1 - (1 - min_ratio) * step / k``; exponential: ``exp(-step / k)``;
    inverse sigmoid: ``k / (k + exp(step / k))``. All floored at ``min_ratio``.
    """
    schedule = Sampling(schedule)
    if schedule == Sampling.none:
        return 1.0
    if schedule == Sampling.linear:
        ratio = 1.0 - (1.0 - min_ratio) * step / k
    elif schedule == Sampling.exponential:
        ratio = math.exp(-step / k)
    else:  # inverse sigmoid
        ratio = k / (k + math.exp(min(step / k, 700.0)))
    return max(min_ratio, min(1.0, ratio))


def fused_supported(device: torch.device) -> bool:
    """Whether torch has fused Adam(W) kernels for ``device``: CUDA, and CPU from torch
    2.4 on. One fused kernel updates all parameters: on one CPU thread, 6 ms instead
    of the per-tensor loop's 37 ms for the 8.7 M-parameter model."""
    if device.type == "cuda":
        return True
    return device.type == "cpu" and TorchVersion(torch.__version__) >= (2, 4)


def build_optimizer(cfg, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Adam or AdamW, fused when the parameters' device has the kernels (same update
    rule, up to float rounding)."""
    kinds = {
        OptimizerName.adam: torch.optim.Adam,
        OptimizerName.adamw: torch.optim.AdamW,
    }
    device = next(model.parameters()).device
    return kinds[OptimizerName(cfg.name)](
        model.parameters(),
        lr=cfg.lr,
        betas=tuple(cfg.betas),
        weight_decay=cfg.weight_decay,
        fused=fused_supported(device) or None,
    )
