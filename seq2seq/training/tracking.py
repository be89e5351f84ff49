"""Experiment tracking: a TensorBoard writer and a progress bar, both switchable off.

The bar is tqdm's on a terminal; written to a file (``nohup seq2seq-train ... >
log 2>&1``) its carriage-return redraws would fill the log, so there it writes one
plain line at each logging step and one at the end of the epoch (as fairseq does).

Only rank 0 logs: other ranks build ``Tracker(log_dir, enabled=False)`` and
``progress_bar(total, enabled=False)``, whose methods do nothing, so the training loop
never branches on the rank. Tags are namespaced (``train/loss``, ``valid/bleu``,
``alignment/<i>``).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

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
    """A tqdm bar with a compact ``set_postfix`` on a terminal, plain lines on any
    other ``stream`` (standard error by default), and a no-op when disabled."""

    def __init__(
        self,
        total: int | None,
        enabled: bool = True,
        desc: str = "",
        stream: TextIO | None = None,
    ) -> None:
        self.enabled = enabled
        self.total, self.desc, self.n, self.postfix = total, desc, 0, ""
        self._written = -1  # the count of the last plain line
        self.stream = stream or sys.stderr
        self.plain = enabled and not _is_terminal(self.stream)
        self.bar = None
        if enabled and not self.plain:
            self.bar = tqdm(
                total=total,
                desc=desc,
                dynamic_ncols=True,
                unit="step",
                file=self.stream,
            )

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.bar is not None:
            self.bar.update(n)

    def set_postfix(
        self,
        loss: float | None = None,
        lr: float | None = None,
        tok_s: float | None = None,
        **extra: Any,
    ) -> None:
        """Show ``loss=3.142, lr=1.0e-03, tok/s=12.3k`` (plus any ``extra`` items);
        off a terminal, as a line of its own.

        Numbers are formatted here; strings are shown as given.
        """
        if not self.enabled:
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
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())
        if self.bar is not None:
            self.bar.set_postfix(items, refresh=False)
        elif self.plain:
            self._line()

    def _line(self) -> None:
        """``epoch 1: 120/400 steps | loss=3.142, ...`` and a newline, no ``\r``."""
        of = f"/{self.total}" if self.total is not None else ""
        text = f"{self.desc}: {self.n}{of} steps"
        self.stream.write(f"{text} | {self.postfix}\n" if self.postfix else text + "\n")
        self.stream.flush()
        self._written = self.n

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.plain and self._written != self.n:  # the epoch's end, if not shown
            self._line()
        self.plain = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _human(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def progress_bar(
    total: int | None,
    enabled: bool = True,
    desc: str = "",
    stream: TextIO | None = None,
) -> ProgressBar:
    """A progress bar for ``total`` steps (``None``: unknown), or a silent stand-in."""
    return ProgressBar(total, enabled=enabled, desc=desc, stream=stream)


def log_train_window(
    tracker: Tracker, bar: ProgressBar, window: dict, lr: float, step: int
) -> None:
    """A logging step's scalars (``ThroughputMeter.flush``'s ``window``) to
    TensorBoard and the bar."""
    loss = window["loss"]
    extra = ("alignment_loss", "rdrop_kl")
    tracker.scalars(
        {
            "train/loss": loss,
            "train/ppl": math.exp(min(loss, 50.0)),
            "train/lr": lr,
            "train/grad_norm": window["grad_norm"],
            "train/tokens_per_sec": window["tokens_per_sec"],
            **{f"train/{name}": window[name] for name in extra if name in window},
        },
        step,
    )
    bar.set_postfix(
        loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{window['tokens_per_sec']:.0f}"
    )


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
        grad_norm = torch.stack(self.grad_norms).float().mean()
        sums = {"loss": self.loss_sum}
        if self.align_sum is not None:  # per target token, like the loss
            sums["alignment_loss"] = self.align_sum
        if self.kl_sum is not None:
            sums["rdrop_kl"] = self.kl_sum
        # one copy to the host (float64 holds each float32 value exactly)
        values = [torch.as_tensor(v, device=grad_norm.device) for v in sums.values()]
        grad, *totals = torch.stack([x.double() for x in (grad_norm, *values)]).tolist()
        per_token = dict(
            zip(sums, (t / max(self.tokens, 1) for t in totals), strict=True)
        )
        out = {
            "loss": per_token.pop("loss"),
            "grad_norm": grad,
            "tokens_per_sec": self.tokens / elapsed,
            **per_token,
        }
        self._reset()
        return out
