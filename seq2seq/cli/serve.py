"""``seq2seq-serve``: a translation server with a live attention explorer.

Loads the checkpoint once (or an ensemble), and with ``reverse_checkpoint`` a model
trained the other way on the same corpus (checked as ``seq2seq-align`` checks it),
warms it with one translation, and serves
the page at ``/`` and the JSON API (``seq2seq/serve/``) on ``host:port``, 127.0.0.1
unless told otherwise; another host needs an API key (``api_key`` or
``SEQ2SEQ_API_KEY``) or ``allow_anonymous=true``. Ctrl-C or SIGTERM lets the
requests in flight finish, then the command exits 0.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_reverse, load_translator
from seq2seq.cli.checks import (
    check_decoding_overrides,
    check_reverse_file,
    checkpoint_paths,
)
from seq2seq.config_checks import AT_LEAST_1, NON_NEGATIVE, POSITIVE, check_values


def check_serve(cfg: DictConfig) -> None:
    check_decoding_overrides(cfg)
    check_reverse_file(cfg)
    port = (lambda v: 0 <= v <= 65535, "must be in [0, 65535] (0: any free port)")
    rules = {
        "port": port,
        "max_wait_ms": NON_NEGATIVE,
        "timeout_s": POSITIVE,
        **dict.fromkeys(
            ("max_input_pieces", "max_texts", "batch_pieces", "max_queue"), AT_LEAST_1
        ),
        "max_body_bytes": AT_LEAST_1,
        "cache_size": NON_NEGATIVE,
    }
    check_values(cfg, "", rules)
    from seq2seq.serve.auth import check_exposure, key_of

    check_exposure(cfg.host, key_of(cfg.api_key, os.environ), cfg.allow_anonymous)


def _serve(cfg: DictConfig) -> int:
    from seq2seq.serve.app import Serving, create_app
    from seq2seq.serve.auth import access_of
    from seq2seq.serve.batcher import model_thread
    from seq2seq.serve.server import serve

    thread = model_thread()  # loads, warms and runs the model: one OpenMP team
    try:
        engine = thread.submit(_engine, cfg).result()
    except BaseException:
        thread.shutdown()
        raise
    # The model's objects live as long as the process: a full garbage collection
    # walking them all (about 0.2 s with the quickstart's) would stall the requests.
    gc.collect()
    gc.freeze()
    access = access_of(cfg, os.environ)
    app = create_app(engine, Serving.of(cfg), access, thread)
    return serve(app, cfg.host, cfg.port, cfg.timeout_s, access.api_key is not None)


def _engine(cfg: DictConfig):
    """The model (and the reverse one) loaded and warmed with one translation."""
    from seq2seq.serve.engine import Engine, Limits

    translator = load_translator(cfg)
    names = [Path(p).name for p in checkpoint_paths(cfg.checkpoint)]
    engine = Engine(translator, Limits.of(cfg), names, _both_ways(cfg, translator))
    engine.warm()
    return engine


def _both_ways(cfg: DictConfig, translator):
    """The reverse model and the two-way readout (``serve.twoway.BothWays``), or
    None without ``reverse_checkpoint``."""
    from seq2seq.alignment.twoway import readout_for
    from seq2seq.serve.twoway import BothWays

    reverse = load_reverse(cfg, translator)
    if reverse is None:
        return None
    readout = readout_for(cfg.two_way, translator.config.data)
    names = [Path(p).name for p in checkpoint_paths(cfg.reverse_checkpoint)]
    return BothWays(reverse, readout, cfg.symmetrize, names)


main = command("serve", _serve, check_serve)

if __name__ == "__main__":  # python -m seq2seq.cli.serve (tests, benchmarks)
    main()
