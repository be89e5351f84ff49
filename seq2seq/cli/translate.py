"""``seq2seq-translate``: standard input or ``input=FILE`` in, one line out per line in.

Empty lines stay empty; lines longer than ``max_input_pieces`` pieces are truncated
with a warning.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_translator

log = logging.getLogger(__name__)


def read_input(path: str | None) -> list[str]:
    if path is None:
        return [line.rstrip("\n") for line in sys.stdin]
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid UTF-8 ({err})") from err


def translate_lines(translator, lines: list[str], max_pieces: int) -> list[str]:
    """Translate each line; empty lines stay empty, over-long ones are truncated."""
    keep = [i for i, line in enumerate(lines) if line.strip()]
    split = translator.encode([lines[i].strip() for i in keep])
    for row, ids in enumerate(split.src_ids):
        if len(ids) > max_pieces:
            log.warning(
                "line %d has %d pieces: translating only the first %d "
                "(translate.max_input_pieces)",
                keep[row] + 1,
                len(ids),
                max_pieces,
            )
            split.src_ids[row] = ids[:max_pieces]
    out = [""] * len(lines)
    if keep:
        texts = translator.detokenize(translator.hypotheses(split))
        for i, text in zip(keep, texts, strict=True):
            out[i] = text
    return out


def translate_file(cfg: DictConfig) -> list[str]:
    """Translate ``cfg.input`` (or standard input) into ``cfg.output`` (or stdout)."""
    from seq2seq.data.splits import write_lines

    translator = load_translator(cfg)
    out = translate_lines(translator, read_input(cfg.input), cfg.max_input_pieces)
    if cfg.output:
        write_lines(Path(cfg.output), out)
    else:
        sys.stdout.write("".join(line + "\n" for line in out))
        sys.stdout.flush()
    return out


main = command("translate", translate_file)
