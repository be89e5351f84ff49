"""``seq2seq-serve``: a translation server with a live attention explorer.

Loads the checkpoint once (or an ensemble), warms it with one translation, and serves
the page at ``/`` and the JSON API (``seq2seq/serve/``) on ``host:port``, 127.0.0.1
unless told otherwise. Ctrl-C or SIGTERM lets the requests in flight finish, then
the command exits 0.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_translator
from seq2seq.cli.checks import check_decoding_overrides, checkpoint_paths
from seq2seq.config_checks import AT_LEAST_1, NON_NEGATIVE, POSITIVE, check_values


def check_serve(cfg: DictConfig) -> None:
    check_decoding_overrides(cfg)
    port = (lambda v: 0 <= v <= 65535, "must be in [0, 65535] (0: any free port)")
    rules = {
        "port": port,
        "max_wait_ms": NON_NEGATIVE,
        "timeout_s": POSITIVE,
        **dict.fromkeys(
            ("max_input_pieces", "max_texts", "batch_pieces", "max_queue"), AT_LEAST_1
        ),
        "max_body_bytes": AT_LEAST_1,
    }
    check_values(cfg, "", rules)


def _serve(cfg: DictConfig) -> int:
    from seq2seq.serve.app import Serving, create_app
    from seq2seq.serve.engine import Engine, Limits
    from seq2seq.serve.server import serve

    translator = load_translator(cfg)
    names = [Path(p).name for p in checkpoint_paths(cfg.checkpoint)]
    engine = Engine(translator, Limits.of(cfg), names)
    engine.warm()
    app = create_app(engine, Serving.of(cfg))
    return serve(app, cfg.host, cfg.port, cfg.timeout_s)


main = command("serve", _serve, check_serve)

if __name__ == "__main__":  # python -m seq2seq.cli.serve (tests, benchmarks)
    main()
