"""``seq2seq-prepare``: load a corpus, train/cache SentencePiece, print statistics."""

from __future__ import annotations

import time

from omegaconf import DictConfig

from seq2seq.cli.app import command
from seq2seq.config_checks import check_data, check_tokenizer


def check_prepare(cfg: DictConfig) -> None:
    """The corpus and tokenizer settings, all that preparing reads."""
    check_data(cfg.data)
    check_tokenizer(cfg.tokenizer)


def _prepare(cfg: DictConfig) -> None:
    from seq2seq.data.prepare import format_stats, prepare_data, resolve_cache_root

    start = time.perf_counter()
    data = prepare_data(cfg.data, cfg.tokenizer, resolve_cache_root(cfg.data.cache_dir))
    seconds = time.perf_counter() - start
    print(format_stats(data.stats))
    how = "loaded from the cache" if data.cached else "prepared and cached"
    print(f"{how} in {seconds:.2f} s: {data.cache_dir}")


main = command("prepare", _prepare, check_prepare)
