"""Where a run stands, and what it keeps: the counters a checkpoint carries, what
``fit`` returns, which validation is the best, and the recent checkpoints kept for
averaging."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Progress:
    """Counters that a checkpoint carries so a resumed run continues exactly."""

    step: int = 0
    epoch: int = 0
    best_metric: float | None = None
    bad_validations: int = 0
    skipped_batches: int = 0
    elapsed_s: float = 0.0  # training wall-clock, summed over resumed runs
    history: list[dict] = field(default_factory=list)

    def validated_now(self) -> bool:
        """Whether the last validation was at this step."""
        return bool(self.history) and self.history[-1]["step"] == self.step


@dataclass
class TrainResult:
    run_dir: Path
    best_checkpoint: Path | None
    last_checkpoint: Path
    progress: Progress
    stop_reason: str


def is_better(metric: float, best: float | None, mode: str) -> bool:
    """``metric`` beats ``best`` (None: nothing yet) under ``mode`` (max, min)."""
    if best is None:
        return True
    return metric > best if mode == "max" else metric < best


def keep_recent(
    ckpt_dir: Path, last: Path, step: int, keep: int, save: Callable[[str], Path]
) -> None:
    """Keep the last ``keep`` validated checkpoints, for averaging.

    Each is a hard link to the ``last.pt`` just written, so nothing is serialised or
    written twice; ``last.pt`` is later replaced by rename, so the link keeps this
    step's file (``save(name)`` writes a copy where hard links are refused). Named
    by step (``step00001234.pt``) so that ``seq2seq-average`` and a shell glob take
    them in training order; older ones are deleted.
    """
    path = ckpt_dir / f"step{step:08d}.pt"
    path.unlink(missing_ok=True)
    try:
        os.link(last, path)
    except OSError:  # a file system without hard links
        save(path.name)
    for old in sorted(ckpt_dir.glob("step*.pt"))[:-keep]:
        old.unlink()
