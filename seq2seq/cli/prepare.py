"""``seq2seq-prepare``: load a corpus, train/cache SentencePiece, print statistics."""

from __future__ import annotations

import time

from omegaconf import DictConfig

from seq2seq.cli.app import command


def _prepare(cfg: DictConfig) -> None:
    from seq2seq.data.prepare import format_stats, prepare_data, resolve_cache_root

    start = time.perf_counter()
    data = prepare_data(cfg.data, cfg.tokenizer, resolve_cache_root(cfg.data.cache_dir))
    seconds = time.perf_counter() - start
    print(format_stats(data.stats))
    how = "loaded from the cache" if data.cached else "prepared and cached"
    print(f"{how} in {seconds:.2f} s: {data.cache_dir}")


main = command("prepare", _prepare)
