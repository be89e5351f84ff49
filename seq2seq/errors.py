"""The one error type a person can act on.

A ``UserError`` is a mistake of whoever runs a command, or of the files they point it
at: a value out of range, a path that does not exist, a checkpoint that is truncated,
foreign or unsafe, a corpus line that is not UTF-8. Its message says what was wrong
and how to fix it. The command boundary (``seq2seq/cli/app.py``) prints that message
in one or two lines and exits with status 2; every other exception is a bug and keeps
its traceback. Each module raises its own subclass (``CorpusError``,
``CheckpointError``, ``ConfigValueError``, ``InputError``), so Python callers can catch
exactly what they expect, and the subclasses that were ``ValueError`` or
``RuntimeError`` before still are.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; the message names it and the fix."""


class ConfigValueError(UserError, ValueError):
    """A setting out of its range (``decode.beam_size=0``) or settings that cannot
    work together (``trainer.guided_alignment`` without attention)."""


class InputError(UserError, ValueError):
    """An input a command cannot use: a missing or unreadable file, text that is not
    UTF-8, an empty text, an index outside the split."""


class CorpusError(UserError, ValueError):
    """A corpus that cannot be read as asked: names the file (and line) and what was
    expected."""


class CacheError(UserError, ValueError):
    """Prepared data whose files are damaged (ids outside the vocabulary): names
    the split, the pair and the file, and how to rebuild it."""


class SplitChoiceError(CorpusError):
    """The corpus has no split, or several, that could be ``split``: the command
    boundary adds the setting that names one."""

    def __init__(self, message: str, split: str) -> None:
        super().__init__(message)
        self.split = split


class HubError(CorpusError):
    """A hub dataset that could not be loaded: the command boundary adds how to read
    a local folder instead."""
