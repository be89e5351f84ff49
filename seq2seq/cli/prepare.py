"""``seq2seq-prepare``: load a corpus, train/cache SentencePiece, print statistics.

``verify=true`` hashes every file of a cache it finds, whatever its modification
time (a cache that was copied, or is suspect), and rebuilds it when one differs.
"""

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
    root = resolve_cache_root(cfg.data.cache_dir)
    data = prepare_data(cfg.data, cfg.tokenizer, root, verify=cfg.verify)
    seconds = time.perf_counter() - start
    print(format_stats(data.stats))
    how = "loaded from the cache" if data.cached else "prepared and cached"
    if data.cached and cfg.verify:
        how = "verified (every file's SHA-256 as the manifest records) and loaded"
    print(f"{how} in {seconds:.2f} s: {data.cache_dir}")


main = command("prepare", _prepare, check_prepare)
