"""What every command shares: the packaged configs, the run directory, the entry, and
the translator a decoding command loads.

Each command module (``prepare``, ``train``, ``evaluate``, ``translate``, ``align``,
``average``) reads its config, builds objects and calls the library; ``main`` of each
is a console script. Nothing in the library imports a command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from seq2seq.config import CONFIG_DIR, register_configs

if TYPE_CHECKING:
    from seq2seq.decoding.translator import Translator

register_configs()


def command(config_name: str, body: Callable[[DictConfig], object]) -> Callable:
    """The console script of a command: Hydra composes ``config_name``.yaml (with
    the command line's overrides) and ``body`` runs on it; Ctrl-C exits with 130."""
    app = hydra.main(
        config_path=str(CONFIG_DIR), config_name=config_name, version_base="1.3"
    )(body)

    def main() -> None:
        try:
            app()
        except KeyboardInterrupt:
            sys.exit(130)

    return main


def run_dir() -> Path:
    """This run's output directory (``hydra.run.dir``)."""
    return Path(HydraConfig.get().runtime.output_dir)


def load_translator(cfg: DictConfig) -> Translator:
    """The checkpoint's ``Translator`` with the command's device, precision, batch
    budget and decoding overrides (those the command has)."""
    from seq2seq.decoding.translator import Translator

    return Translator.from_checkpoint(
        cfg.checkpoint,
        device=cfg.device,
        precision=cfg.precision,
        batch_tokens=cfg.batch_tokens,
        beam_size=cfg.beam_size,
        length_penalty=cfg.get("length_penalty"),
        stop=cfg.get("stop"),
        coverage_penalty=cfg.get("coverage_penalty"),
    )
