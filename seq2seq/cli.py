"""Five thin Hydra entry points: prepare, train, evaluate, translate, align.

Each reads its config, finds its run directory and calls one library function.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from seq2seq.config import register_configs
from seq2seq.paths import CONFIG_DIR

register_configs()
_CONFIG_DIR = str(CONFIG_DIR)


def _run_dir() -> Path:
    return Path(HydraConfig.get().runtime.output_dir)


@hydra.main(config_path=_CONFIG_DIR, config_name="prepare", version_base="1.3")
def _prepare(cfg: DictConfig) -> None:
    from seq2seq.data.prepare import format_stats, prepare_data, resolve_cache_root

    start = time.perf_counter()
    data = prepare_data(cfg.data, cfg.tokenizer, resolve_cache_root(cfg.data.cache_dir))
    seconds = time.perf_counter() - start
    print(format_stats(data.stats))
    how = "loaded from the cache" if data.cached else "prepared and cached"
    print(f"{how} in {seconds:.2f} s: {data.cache_dir}")


@hydra.main(config_path=_CONFIG_DIR, config_name="train", version_base="1.3")
def _train(cfg: DictConfig) -> float | None:
    from seq2seq.pipeline import run_training

    return run_training(cfg, _run_dir())


@hydra.main(config_path=_CONFIG_DIR, config_name="evaluate", version_base="1.3")
def _evaluate(cfg: DictConfig) -> None:
    from seq2seq.evaluate import evaluate_checkpoint

    evaluate_checkpoint(cfg, _run_dir())


@hydra.main(config_path=_CONFIG_DIR, config_name="translate", version_base="1.3")
def _translate(cfg: DictConfig) -> None:
    from seq2seq.evaluate import translate_file

    translate_file(cfg)


@hydra.main(config_path=_CONFIG_DIR, config_name="align", version_base="1.3")
def _align(cfg: DictConfig) -> None:
    from seq2seq.align import run_align

    run_align(cfg, _run_dir())


def _entry(app):
    def main() -> None:
        try:
            app()
        except KeyboardInterrupt:
            sys.exit(130)

    return main


prepare = _entry(_prepare)
train = _entry(_train)
evaluate = _entry(_evaluate)
translate = _entry(_translate)
align = _entry(_align)
