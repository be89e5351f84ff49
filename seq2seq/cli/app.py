"""What every command shares: the packaged configs, the run directory, the entry, the
translator a decoding command loads, and the one boundary where errors meet people.

Each command module (``prepare``, ``train``, ``evaluate``, ``translate``, ``align``,
``average``) reads its config, builds objects and calls the library; ``main`` of each
is a console script. Nothing in the library imports a command.

The boundary (``user_errors``): a mistake of the user (a ``UserError``: a value, a
path, a file, a checkpoint, a corpus; Hydra's composition errors: a typo, a value
outside a choice; a folder that cannot be written) prints ``seq2seq-<command>: error:
<what was wrong and how to fix it>`` to stderr and exits with status 2, without a
traceback. ``HYDRA_FULL_ERROR=1`` shows the traceback instead. Anything else is a bug
and keeps its traceback (exit status 1). Ctrl-C (SIGINT) and SIGTERM stop a command
with one line, ``seq2seq-<command>: interrupted: nothing written`` (or the files it
completed), and exit status 130 or 143; outputs are written whole or not at all
(``seq2seq.disk``), so the files it names are complete and there are no others.
(``seq2seq-train`` catches both signals itself while it trains: it finishes the
step and saves ``last.pt``.)
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import (
    CompactHydraException,
    ConfigCompositionException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from seq2seq.cli.checks import check_reverse
from seq2seq.config import CONFIG_DIR, DecodeOptions, register_configs
from seq2seq.config_checks import check_composed, did_you_mean
from seq2seq.disk import REFUSALS, refused_error, written
from seq2seq.errors import HubError, SplitChoiceError, UserError

if TYPE_CHECKING:
    from seq2seq.decoding.translator import Translator

register_configs()

FULL_ERROR = "HYDRA_FULL_ERROR"  # Hydra's own switch, so one switch serves both
# OSErrors that are the machine's state, not a bug: the message names the path.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES}


def command(
    config_name: str,
    body: Callable[[DictConfig], object],
    check: Callable[[DictConfig], None],
) -> Callable:
    """The console script of a command: Hydra composes ``config_name``.yaml (with the
    command line's overrides), ``check_composed`` and the command's own ``check``
    check its values, and ``body`` runs on it, all inside ``user_errors``."""

    prog = f"seq2seq-{config_name}"
    traceback = False  # the user's HYDRA_FULL_ERROR, read before _hydra_raises

    @functools.wraps(body)  # Hydra names the job (and its log) after body's module
    def task(cfg: DictConfig) -> object:
        # Inside the job too: Hydra would report the error as a failed job first.
        with user_errors(prog, traceback):
            check_composed(cfg)
            check(cfg)
            return body(cfg)

    app = hydra.main(
        config_path=str(CONFIG_DIR), config_name=config_name, version_base="1.3"
    )(task)

    def main() -> None:
        nonlocal traceback
        traceback = wants_traceback()
        with (
            user_errors(prog, traceback),
            _hydra_raises(),  # composition errors
            _interrupted_by(signal.SIGTERM),
        ):
            app()

    return main


def wants_traceback() -> bool:
    """``HYDRA_FULL_ERROR=1``: show user errors with their traceback, as bugs."""
    return os.environ.get(FULL_ERROR) == "1"


@contextmanager
def user_errors(prog: str, traceback: bool = False) -> Iterator[None]:
    """Turn a user's mistake into one message on stderr and exit status 2 (with
    ``traceback``: let it through, traceback and all)."""
    try:
        yield
    except KeyboardInterrupt as err:  # Ctrl-C, or an ``Interrupted`` signal
        signum = getattr(err, "signum", signal.SIGINT)
        sys.stderr.write(f"{prog}: interrupted: {_what_was_written()}\n")
        sys.exit(128 + signum)
    except Exception as err:
        if traceback or not is_user_error(err):
            raise
        sys.stderr.write(f"{prog}: error: {describe(err)}\n")
        sys.exit(2)


class Interrupted(KeyboardInterrupt):
    """A signal that stops a command as Ctrl-C does (SIGTERM: ``kill``, a job
    scheduler's stop), so the same clean-up runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


@contextmanager
def _interrupted_by(signum: int) -> Iterator[None]:
    """Raise ``Interrupted`` on ``signum`` while the command runs (the default
    would end the process at once, without a word)."""
    previous = signal.signal(signum, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signum, previous)


def _what_was_written() -> str:
    """``nothing written``, or the files this command completed."""
    files = written()
    if not files:
        return "nothing written"
    if len(files) <= 3:
        return "wrote " + ", ".join(map(str, files))
    return f"wrote {len(files)} files, the last {files[-1]}"


@contextmanager
def _hydra_raises() -> Iterator[None]:
    """Hydra prints its own report of any error (a traceback for errors in the task)
    and exits 1, unless ``HYDRA_FULL_ERROR=1``; set it while the app runs so every
    error reaches ``user_errors``, which decides how to show it."""
    before = os.environ.get(FULL_ERROR)
    os.environ[FULL_ERROR] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(FULL_ERROR, None)
        else:
            os.environ[FULL_ERROR] = before


def is_user_error(err: BaseException) -> bool:
    """Ours (``UserError``), Hydra's composition and override errors, and a file
    system that refuses a write (full, read-only, no permission)."""
    if isinstance(err, (UserError, CompactHydraException)):
        return True
    return isinstance(err, OSError) and err.errno in _ENVIRONMENT_ERRNOS


def _lines(text: object) -> list[str]:
    return [line.strip() for line in str(text).splitlines() if line.strip()]


def describe(err: BaseException) -> str:
    """One line for a user error; Hydra's multi-line reports condensed to theirs."""
    if isinstance(err, MissingConfigException):
        head = _lines(err)[0]
        options = f"; the options: {', '.join(err.options)}" if err.options else ""
        return head + options
    if isinstance(err, OverrideParseException):
        skip = ("Error parsing override", "See http")
        detail = [x for x in _lines(err.message) if not x.startswith(skip)]
        why = f": {detail[0]}" if detail else ""
        return (
            f"cannot parse the override {err.override!r}{why}; write each override "
            "as key=value (see --help)"
        )
    if isinstance(err, ConfigCompositionException):
        return _composition(err)
    if isinstance(err, OSError) and err.errno in REFUSALS:
        if isinstance(err, UserError):  # seq2seq.disk named the write already
            return str(err)
        if err.filename:  # else there is no path to name, nor to measure
            return str(refused_error(err.errno, err.filename, "", _ELSEWHERE))
    if isinstance(err, OSError) and not isinstance(err, UserError):  # EACCES, unnamed
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or err}{where}; {_ELSEWHERE}"
    lines = _lines(err) or [type(err).__name__]
    return "; ".join(lines[:2]) + _setting_hint(err)


_ELSEWHERE = "write elsewhere (hydra.run.dir=DIR, output=PATH)"


def _setting_hint(err: BaseException) -> str:
    """The setting that fixes a library error, which the library does not name: the
    library speaks of splits and datasets, the commands of ``data.*`` keys."""
    if isinstance(err, SplitChoiceError):
        return f" (name the {err.split} split with data.splits.{err.split}=NAME)"
    if isinstance(err, HubError):
        return (
            "; data.local_dir=DIR reads a folder of train/validation/test .jsonl "
            "files instead (e.g. ../shared/data/multi30k)"
        )
    return ""


def _composition(err: ConfigCompositionException) -> str:
    """``Error merging override decode.stop=bset: Invalid value 'bset', expected one
    of [bound, best]``; an unknown key gets the nearest setting's name."""
    head = _lines(err)[0].rstrip(".")
    cause = err.__cause__
    if cause is None:
        return head
    unknown = isinstance(cause, (ConfigAttributeError, ConfigKeyError))
    schema = getattr(cause, "object_type", None)
    full_key = getattr(cause, "full_key", None)
    if unknown and full_key and schema and dataclasses.is_dataclass(schema):
        prefix, _, key = full_key.rpartition(".")
        prefix = f"{prefix}." if prefix else ""
        fields = [f.name for f in dataclasses.fields(schema)]
        where = f"{full_key}: no such setting in {schema.__name__}"
        return f"{where}; {did_you_mean(key, fields, prefix)}"
    detail = _lines(cause)
    return f"{head}: {detail[0]}" if detail else head


def run_dir() -> Path:
    """This run's output directory (``hydra.run.dir``)."""
    return Path(HydraConfig.get().runtime.output_dir)


def load_translator(cfg: DictConfig) -> Translator:
    """The checkpoint's ``Translator`` with the command's ``DecodeOptions`` (device,
    precision, batch budget, decoding overrides)."""
    from seq2seq.decoding.translator import Translator

    return Translator.from_checkpoint(cfg.checkpoint, DecodeOptions.of(cfg))


def load_reverse(cfg: DictConfig, forward: Translator) -> Translator | None:
    """``cfg.reverse_checkpoint``'s ``Translator`` (the same device, precision and
    batch budget as the forward one), checked to be the same corpus the other way
    (``cli.checks.check_reverse``); None when the command was given none."""
    from seq2seq.decoding.translator import Translator

    if cfg.reverse_checkpoint is None:
        return None
    reverse = Translator.from_checkpoint(
        cfg.reverse_checkpoint,
        device=cfg.device,
        precision=cfg.precision,
        batch_tokens=cfg.batch_tokens,
    )
    check_reverse(
        forward.config.data,
        reverse.config.data,
        cfg.checkpoint,
        cfg.reverse_checkpoint,
    )
    return reverse
