"""``seq2seq-translate``: standard input or ``input=FILE`` in, one line out per line in.

Empty lines stay empty; lines longer than ``max_input_pieces`` pieces are truncated
with a warning. Input is read as bytes and decoded strictly: a line that is not UTF-8
stops the command with an error naming the line (nothing is guessed or replaced).
When standard input is a terminal, each line is translated as soon as it is typed
and the translation flushed (interactive mode); piped input and files are translated
in one batched pass, which is much faster per line. ``prefixes=FILE`` gives each
input line a target prefix (the file's line of the same number; a blank line: none):
its translation starts with it and continues it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_translator
from seq2seq.cli.checks import check_decoding_overrides
from seq2seq.config_checks import AT_LEAST_1, check_values, require_file
from seq2seq.disk import raise_if_refused
from seq2seq.errors import InputError

log = logging.getLogger(__name__)

UTF8_FIX = "convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"
ELSEWHERE = "give another output=PATH"


def check_translate(cfg: DictConfig) -> None:
    check_decoding_overrides(cfg)
    check_values(cfg, "", {"max_input_pieces": AT_LEAST_1})
    if cfg.input is not None:
        require_file("input", cfg.input, "leave input unset to read standard input")
    if cfg.prefixes is not None:
        require_file("prefixes", cfg.prefixes, "give one prefix per input line")


def decode_line(raw: bytes, where: str, number: int) -> str:
    """One line without its line end; ``InputError`` naming the line if not UTF-8."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise InputError(
            f"{where}, line {number}: not valid UTF-8 ({err.reason} at byte "
            f"{err.start + 1} of the line); {UTF8_FIX}"
        ) from err


def read_input(path: str | None) -> list[str]:
    """The lines of ``path`` (standard input when None), decoded strictly."""
    where = "standard input" if path is None else str(path)
    try:
        data = sys.stdin.buffer.read() if path is None else Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"input={path}: cannot read it ({err.strerror})") from err
    raws = data.split(b"\n")
    if raws and raws[-1] == b"":
        raws.pop()
    return [decode_line(raw, where, k) for k, raw in enumerate(raws, start=1)]


def translate_lines(
    translator,
    lines: list[str],
    max_pieces: int,
    first_line: int = 1,
    prefixes: list[str] | None = None,
) -> list[str]:
    """Translate each line; empty lines stay empty, over-long ones are truncated
    (the warning counts lines from ``first_line``); ``prefixes``: one per line,
    each translation starts with its line's (blank: none)."""
    keep = [i for i, line in enumerate(lines) if line.strip()]
    split = translator.encode([lines[i].strip() for i in keep])
    for row, ids in enumerate(split.src_ids):
        if len(ids) > max_pieces:
            log.warning(
                "line %d has %d pieces: translating only the first %d "
                "(translate.max_input_pieces)",
                keep[row] + first_line,
                len(ids),
                max_pieces,
            )
            split.src_ids[row] = ids[:max_pieces]
    out = [""] * len(lines)
    if keep:
        ids = None
        if prefixes is not None:
            names = [f"line {i + first_line}" for i in keep]
            ids = translator.prefix_ids(split, [prefixes[i] for i in keep], names)
        hyps = [hs[0] for hs in translator.search(split, ids)]
        texts = translator.detokenize(hyps)
        for i, text in zip(keep, texts, strict=True):
            out[i] = text
    return out


def translate_interactively(translator, max_pieces: int, out: TextIO) -> list[str]:
    """A person at a terminal: translate each line as it arrives, flush at once. A
    line that is not UTF-8 is reported and skipped, so the session goes on."""
    sys.stderr.write("type a sentence and press Enter; Ctrl-D ends\n")
    done = []
    for number, raw in enumerate(iter(sys.stdin.buffer.readline, b""), start=1):
        try:
            line = decode_line(raw, "standard input", number)
        except InputError as err:
            log.warning("%s; line skipped", err)
            continue
        (text,) = translate_lines(translator, [line], max_pieces, first_line=number)
        out.write(text + "\n")
        out.flush()
        done.append(text)
    return done


def translate_file(cfg: DictConfig) -> list[str]:
    """Translate ``cfg.input`` (or standard input) into ``cfg.output`` (or stdout)."""
    from seq2seq.data.splits import write_lines

    translator = load_translator(cfg)
    prefixes = None if cfg.prefixes is None else read_input(cfg.prefixes)
    if cfg.input is None and sys.stdin.isatty():
        if prefixes is not None:
            raise InputError(
                "prefixes=FILE pairs its lines with the input's: give input=FILE or "
                "pipe the input in"
            )
        if not cfg.output:
            return translate_interactively(translator, cfg.max_input_pieces, sys.stdout)
        # line by line as typed (not atomic: each line is the user's to keep)
        try:
            Path(cfg.output).parent.mkdir(parents=True, exist_ok=True)
            with open(cfg.output, "w", encoding="utf-8") as out:
                return translate_interactively(translator, cfg.max_input_pieces, out)
        except OSError as err:
            raise_if_refused(err, cfg.output, "translations", ELSEWHERE)
            raise
    lines = read_input(cfg.input)
    if prefixes is not None and len(prefixes) != len(lines):
        raise InputError(
            f"prefixes={cfg.prefixes} has {len(prefixes)} lines for {len(lines)} "
            "input lines: give one prefix per input line (a blank line for none)"
        )
    out = translate_lines(translator, lines, cfg.max_input_pieces, 1, prefixes)
    if cfg.output:
        write_lines(Path(cfg.output), out, "translations", ELSEWHERE)
    else:
        sys.stdout.write("".join(line + "\n" for line in out))
        sys.stdout.flush()
    return out


main = command("translate", translate_file, check_translate)
