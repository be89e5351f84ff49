"""When training stops, and how far through its budget it is: the limits of
``trainer.max_epochs``, ``max_steps`` and ``max_minutes``, and a signal.

Under DDP the ranks agree on both (a sum over ranks), or one rank would wait forever
in an all-reduce, or set another learning rate than the others.
"""

from __future__ import annotations

import time

import torch
from omegaconf import DictConfig

from seq2seq.data.batching import TokenBucketSampler
from seq2seq.training.distributed import DistInfo, all_reduce_sum
from seq2seq.training.progress import Progress
from seq2seq.training.runtime import StopRequested


def budget_used(
    progress: Progress,
    sampler: TokenBucketSampler,
    train_cfg: DictConfig,
    device: torch.device,
    world_size: int,
) -> float:
    """Fraction of the run's budget spent: the largest over the limits set."""
    epochs = progress.epoch + sampler.position / max(len(sampler), 1)
    used = [epochs / train_cfg.max_epochs]
    if train_cfg.max_steps:
        used.append(progress.step / train_cfg.max_steps)
    if train_cfg.max_minutes:
        # Ranks must set the same learning rate: average their clocks.
        elapsed = all_reduce_sum(progress.elapsed_s, device)
        used.append(elapsed / world_size / 60 / train_cfg.max_minutes)
    return max(used)


def limit_reached(
    progress: Progress,
    train_cfg: DictConfig,
    start: float,
    stop: StopRequested,
    dist: DistInfo,
    device: torch.device,
) -> str:
    """Why training stops now (``signal``, ``max_steps``, ``max_minutes``, ``another
    rank stopped``), or ``""`` to go on; ``start`` is the ``time.monotonic()`` the
    run's training time counts from."""
    reason = ""
    minutes = (time.monotonic() - start) / 60
    if stop.requested:
        reason = "signal"
    elif train_cfg.max_steps and progress.step >= train_cfg.max_steps:
        reason = "max_steps"
    elif train_cfg.max_minutes and minutes >= train_cfg.max_minutes:
        reason = "max_minutes"
    # Ranks stop together, or the others would wait forever in an all-reduce.
    stopping = dist.enabled and all_reduce_sum(bool(reason), device)
    return reason or ("another rank stopped" if stopping else "")
