"""``seq2seq-train``: prepare the corpus, train, score the best checkpoint on test."""

from __future__ import annotations

from omegaconf import DictConfig

from seq2seq.cli.app import command, run_dir


def _train(cfg: DictConfig) -> float | None:
    from seq2seq.training.pipeline import run_training

    return run_training(cfg, run_dir())


main = command("train", _train)
