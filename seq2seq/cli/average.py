"""``seq2seq-average``: one checkpoint whose weights are the mean of several.

Averaging the last few epoch checkpoints of a run (``trainer.keep_last``) smooths the
noise of the final updates; whether it helps is for the validation split to say
(docs/results.md). The result is an inference checkpoint
(``model.checkpoint.write_average``). Errors go through the commands' one boundary
(``cli.app.user_errors``): a bad checkpoint or a full disk is one line and status 2.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from seq2seq.cli.app import user_errors, wants_traceback
from seq2seq.model.checkpoint import write_average


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="seq2seq-average",
        description="Average the weights of several checkpoints of one run into a "
        "new checkpoint for seq2seq-evaluate/translate/align "
        "(e.g. the files kept by trainer.keep_last).",
        epilog="example: seq2seq-average RUN/checkpoints/step*.pt -o "
        "RUN/checkpoints/avg.pt. A bad checkpoint or a full disk ends in one line "
        "and exit status 2; HYDRA_FULL_ERROR=1 shows its traceback.",
    )
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint files")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="where to write the average"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with user_errors(parser.prog, wants_traceback()):
        path = write_average(args.checkpoints, args.output)
    names = ", ".join(p.name for p in args.checkpoints)
    print(f"averaged {len(args.checkpoints)} checkpoints ({names}) into {path}")
