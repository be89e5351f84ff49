"""Exponential moving average of the weights (``trainer.ema_decay``).

The average is what validation decodes and what checkpoints carry as ``model``: it
smooths the noise of the last steps without a second training run, the way
checkpoint averaging does after one. The trained weights keep training untouched.
"""

from __future__ import annotations

import copy

import torch


def ema_decay_at(decay: float, updates: int) -> float:
    """The decay of the ``updates + 1``-th update: ``min(decay, (1 + n) / (10 + n))``.

    The warm-up (OpenNMT-py's ``average_decay``, TensorFlow's ``num_updates``) keeps
    the first steps' random weights from dominating the average of a short run."""
    return min(decay, (1 + updates) / (10 + updates))


class WeightAverage:
    """A frozen copy of a model whose weights follow ``a ← d·a + (1 − d)·w`` after
    every optimizer step (``d``: ``ema_decay_at``); buffers are copied as they are."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"trainer.ema_decay={decay}: must be in (0, 1)")
        self.decay, self.updates = decay, 0
        self.module = copy.deepcopy(model).requires_grad_(False)

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        averaged = list(self.module.parameters())
        current = list(model.parameters())
        weight = 1.0 - ema_decay_at(self.decay, self.updates)
        torch._foreach_lerp_(averaged, current, weight)
        for mine, theirs in zip(self.module.buffers(), model.buffers(), strict=True):
            mine.copy_(theirs)
        self.updates += 1

    def load(self, weights: dict, updates: int) -> None:
        self.module.load_state_dict(weights)
        self.updates = updates
