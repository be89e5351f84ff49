"""``seq2seq-average``: one checkpoint whose weights are the mean of several.

Averaging the last few epoch checkpoints of a run (``trainer.keep_last``) smooths the
noise of the final updates; whether it helps is for the validation split to say
(README "Results"). The result is an inference checkpoint: the newest input's config,
tokenizer and step with the averaged weights, and no optimizer or sampler state,
because no training run ever reached those weights and resuming from them would lie.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from seq2seq.checkpoint import (
    CheckpointError,
    average_checkpoints,
    load_checkpoint,
    save_checkpoint,
)

# What evaluate, translate and align read; the training state is left behind.
_INFERENCE_KEYS = ("config", "tokenizer", "step", "epoch", "best_metric")


def write_average(
    paths: Sequence[str | os.PathLike], output: str | os.PathLike
) -> Path:
    """Average the ``model`` weights of ``paths`` into a new checkpoint at ``output``.

    Raises:
        CheckpointError: a path is not a checkpoint, the checkpoints come from
            different models or tokenizers, or ``output`` is one of the inputs.
    """
    paths = [Path(p) for p in paths]
    output = Path(output)
    if not paths:
        raise CheckpointError("seq2seq-average needs at least one checkpoint")
    if output.resolve() in {p.resolve() for p in paths}:
        raise CheckpointError(
            f"{output} is one of the inputs: write the average elsewhere"
        )
    weights = average_checkpoints(paths)
    newest = load_checkpoint(paths[-1])
    state = {key: newest[key] for key in _INFERENCE_KEYS if key in newest}
    state["model"] = weights
    state["averaged_from"] = [str(p) for p in paths]
    return save_checkpoint(output, state)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="seq2seq-average",
        description="Average the weights of several checkpoints of one run into a "
        "new checkpoint for seq2seq-evaluate/translate/align "
        "(e.g. the files kept by trainer.keep_last).",
    )
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint files")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, help="where to write the average"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        path = write_average(args.checkpoints, args.output)
    except CheckpointError as err:
        parser.exit(2, f"seq2seq-average: error: {err}\n")
    names = ", ".join(p.name for p in args.checkpoints)
    print(f"averaged {len(args.checkpoints)} checkpoints ({names}) into {path}")
