"""Experiment tracking: a TensorBoard writer and a progress bar, both switchable off.

Only rank 0 logs: other ranks build ``Tracker(log_dir, enabled=False)`` and
``progress_bar(total, enabled=False)``, whose methods do nothing, so the training loop
never branches on the rank. Tags are namespaced (``train/loss``, ``valid/bleu``,
``alignment/<i>``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

log = logging.getLogger(__name__)


class Tracker:
    """A thin wrapper over ``torch.utils.tensorboard.SummaryWriter``.

    Args:
        log_dir: the run's TensorBoard folder (created when enabled).
        enabled: False turns every method into a no-op and creates nothing on disk.
    """

    def __init__(self, log_dir: str | Path, enabled: bool = True) -> None:
        self.log_dir = Path(log_dir)
        self.enabled = enabled
        self._writer = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter

            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._writer = SummaryWriter(log_dir=str(self.log_dir))
            log.info("TensorBoard logs in %s", self.log_dir)

    def scalars(self, values: Mapping[str, Any], step: int) -> None:
        """Log ``{tag: number}`` at ``step`` (0-d tensors are fine; they sync here)."""
        if self._writer is None:
            return
        for tag, value in values.items():
            if value is not None:
                self._writer.add_scalar(tag, float(value), step)

    def figure(self, tag: str, fig: Any, step: int) -> None:
        """Log a matplotlib figure as an image, then close it (also when disabled)."""
        from seq2seq.alignment.render import close_figure, figure_to_array

        try:
            if self._writer is not None:
                image = figure_to_array(fig)
                self._writer.add_image(tag, image, step, dataformats="HWC")
        finally:
            close_figure(fig)

    def text(self, tag: str, text: str, step: int) -> None:
        """Log markdown text (sample translations, reports)."""
        if self._writer is not None:
            self._writer.add_text(tag, text, step)

    def config(self, resolved_yaml: str) -> None:
        """Log the resolved config as a code block under ``config/resolved``."""
        if self._writer is not None:
            block = "\n".join("    " + line for line in resolved_yaml.splitlines())
            self._writer.add_text("config/resolved", block, 0)

    def hparams(
        self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, float]
    ) -> None:
        """Log hyper-parameters and final metrics for TensorBoard's HParams tab.

        Nested dicts are flattened with dots (``optim.lr``); values other than numbers,
        strings and booleans are stored as strings. Written into this run (not a
        sub-run), so the dashboard links them to the run's curves.
        """
        if self._writer is None:
            return
        flat = {k: _hparam_value(v) for k, v in _flatten(hparam_dict).items()}
        metrics = {k: float(v) for k, v in metric_dict.items()}
        self._writer.add_hparams(flat, metrics, run_name=".")

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _hparam_value(value: Any) -> bool | int | float | str:
    """Plain values as they are; anything else (a config Enum, None) as its string."""
    if type(value) in (bool, int, float, str):
        return value
    return str(value)


class ProgressBar:
    """A tqdm bar with a compact ``set_postfix``; a no-op when disabled."""

    def __init__(self, total: int | None, enabled: bool = True, desc: str = "") -> None:
        self.enabled = enabled
        self.bar = (
            tqdm(total=total, desc=desc, dynamic_ncols=True, unit="step")
            if enabled
            else None
        )

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def set_postfix(
        self,
        loss: float | None = None,
        lr: float | None = None,
        tok_s: float | None = None,
        **extra: Any,
    ) -> None:
        """Show ``loss=3.142, lr=1.0e-03, tok/s=12.3k`` (plus any ``extra`` items).

        Numbers are formatted here; strings are shown as given.
        """
        if self.bar is None:
            return
        items: dict[str, str] = {}
        for name, value, fmt in (
            ("loss", loss, "{:.3f}".format),
            ("lr", lr, "{:.1e}".format),
            ("tok/s", tok_s, _human),
        ):
            if value is not None:
                items[name] = value if isinstance(value, str) else fmt(float(value))
        items.update({k: str(v) for k, v in extra.items()})
        self.bar.set_postfix(items, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _human(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def progress_bar(
    total: int | None, enabled: bool = True, desc: str = ""
) -> ProgressBar:
    """A progress bar for ``total`` steps (``None``: unknown), or a silent stand-in."""
    return ProgressBar(total, enabled=enabled, desc=desc)


class ThroughputMeter:
    """Accumulates loss and tokens between logging steps; syncs only when flushed."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.loss_sum = 0.0
        self.tokens = 0
        self.grad_norms: list[torch.Tensor] = []
        self.align_sum: torch.Tensor | None = None  # guided alignment's loss, if on
        self.kl_sum: torch.Tensor | None = None  # R-Drop's symmetric KL, if on
        self.start = time.perf_counter()

    def add(self, stats: dict) -> None:
        self.loss_sum = self.loss_sum + stats["loss_sum"]
        self.tokens += stats["tokens"]
        self.grad_norms.append(stats["grad_norm"])
        for name in ("align_sum", "kl_sum"):
            if stats.get(name) is not None:
                previous = getattr(self, name)
                setattr(
                    self, name, stats[name] + (0.0 if previous is None else previous)
                )

    def flush(self) -> dict:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        out = {
            "loss": float(self.loss_sum) / max(self.tokens, 1),
            "grad_norm": float(torch.stack(self.grad_norms).float().mean()),
            "tokens_per_sec": self.tokens / elapsed,
        }
        if self.align_sum is not None:  # per target token, like the loss
            out["alignment_loss"] = float(self.align_sum) / max(self.tokens, 1)
        if self.kl_sum is not None:
            out["rdrop_kl"] = float(self.kl_sum) / max(self.tokens, 1)
        self._reset()
        return out
