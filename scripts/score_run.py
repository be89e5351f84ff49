"""Choose a run's checkpoint and length penalty on validation, then score test once.

This is how the Multi30k recipes are reported (docs/results.md, "The Multi30k recipes"):
average the last N epoch checkpoints (those ``trainer.keep_last=N`` keeps), decode the
validation split with beam search at each length penalty α for ``best.pt`` and for the
average, keep the highest BLEU, and only then translate the test split with that choice:
cased BLEU, lowercased BLEU, BLEU on the papers' scale (multi-bleu.perl), chrF, and
greedy BLEU. The test set takes no part in any choice.

    python scripts/score_run.py outputs/train/<run>
    python scripts/score_run.py outputs/train/<run> --validation-only   # a seed, a row
    python scripts/score_run.py outputs/train/<run> --last 0 --alphas 1.0   # best.pt
    python scripts/score_run.py RUN1 --ensemble RUN2,RUN3,RUN4 --validation-only

``--ensemble`` decodes the runs together (``checkpoint=[...]``: their ``best.pt``s,
then their averages of the last N), as one model with the mean of their
probabilities; its scores, named ``best.pt×4 α1.0``, are kept in the first run's
``scores.json`` beside its own, and reused only for the same runs' same files.

Each score is saved to ``<run>/scores.json`` as soon as it is known, so an interrupted
call goes on where it stopped, and a second call only prints; each decode's hypotheses
are under ``<run>/scores/``. The beam size is the checkpoint's (``decode.beam_size``,
5 in the recipes) unless ``--beam`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from seq2seq.cli.evaluate import evaluate_checkpoint
from seq2seq.config import EvaluateConfig
from seq2seq.model.checkpoint import load_checkpoint, write_average

Scores = dict[str, Any]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a seq2seq-train run directory")
    p.add_argument(
        "--last", type=int, default=5, help="average the last N step*.pt (0: none)"
    )
    p.add_argument("--alphas", type=float, nargs="+", default=[0.6, 1.0, 1.4])
    p.add_argument(
        "--beam", type=int, default=None, help="beam size (the checkpoint's)"
    )
    p.add_argument("--split", default="validation", help="the split that chooses")
    p.add_argument("--test-split", default="test", help="the split scored once")
    p.add_argument(
        "--validation-only", action="store_true", help="choose, score no test"
    )
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--ensemble",
        default="",
        help="other run directories, comma-separated, decoded together with RUN",
    )
    return p.parse_args(argv)


def step_checkpoints(ckpt_dir: Path) -> list[Path]:
    """The epoch checkpoints a run kept, oldest first (their names sort by step)."""
    return sorted(ckpt_dir.glob("step*.pt"))


def average_last(ckpt_dir: Path, n: int) -> Path:
    """``avg{n}.pt``: the mean of the last ``n`` kept checkpoints, written once."""
    kept = step_checkpoints(ckpt_dir)
    if len(kept) < n:
        raise SystemExit(
            f"{ckpt_dir}: {len(kept)} step*.pt checkpoints, --last {n} needs {n}: "
            f"train with trainer.keep_last={n}, or pass --last {len(kept)} "
            "(--last 0: best.pt alone)"
        )
    out = ckpt_dir / f"avg{n}.pt"
    newest = max(p.stat().st_mtime for p in kept[-n:])
    if not out.is_file() or out.stat().st_mtime < newest:
        write_average(kept[-n:], out)
    return out


def choose(validation: dict[str, Scores]) -> str:
    """The key with the highest BLEU; a tie goes to the one listed first."""
    return max(
        validation,
        key=lambda key: (validation[key]["bleu"], -list(validation).index(key)),
    )


class Scorer:
    """Decodes with ``seq2seq-evaluate``'s code in this process and keeps each score in
    ``<run>/scores.json`` as soon as it is known. A score is reused only for the same
    decoding options and while its checkpoint file is the one it was computed from
    (same modification time)."""

    def __init__(self, run: Path, beam: int | None, device: str) -> None:
        self.path, self.out = run / "scores.json", run / "scores"
        self.beam, self.device = beam, device
        self.data: dict[str, Any] = (
            json.loads(self.path.read_text()) if self.path.is_file() else {}
        )

    def score(
        self, key: str, checkpoint: Path | list[Path], split: str, **options: Any
    ) -> Scores:
        options = {"beam_size": self.beam, **options}
        if isinstance(checkpoint, Path):
            made = {"options": options, "checkpoint_mtime": checkpoint.stat().st_mtime}
        else:  # an ensemble: the same members' same files
            made = {
                "options": options,
                "checkpoints": [str(c) for c in checkpoint],
                "checkpoint_mtime": [c.stat().st_mtime for c in checkpoint],
            }
        entries = self.data.setdefault(split, {})
        if any(entries.get(key, {}).get(k) != v for k, v in made.items()):
            entries[key] = {**self.decode(key, checkpoint, split, options), **made}
            self.path.write_text(json.dumps(self.data, indent=1) + "\n")
        return entries[key]

    def decode(
        self, key: str, checkpoint: Path | list[Path], split: str, options: dict
    ) -> Scores:
        paths = (
            str(checkpoint)
            if isinstance(checkpoint, Path)
            else list(map(str, checkpoint))
        )
        cfg = OmegaConf.structured(
            EvaluateConfig(checkpoint=paths, split=split, device=self.device, **options)
        )
        name = key.replace(" α", "_lp").replace(" ", "_").replace("×", "_x")
        out_dir = self.out / split / name
        scores = evaluate_checkpoint(cfg, out_dir).as_dict()
        return {k: v for k, v in scores.items() if v is not None}


def run_checkpoints(run: Path, last: int) -> list[Path]:
    """A run's ``best.pt`` and, with ``last``, the average of its last ``last``."""
    ckpt_dir = run / "checkpoints"
    best = ckpt_dir / "best.pt"
    if not best.is_file():
        raise SystemExit(
            f"{run}: no checkpoints/best.pt; give a seq2seq-train run directory"
        )
    return [best] + ([average_last(ckpt_dir, last)] if last else [])


def candidates(
    run: Path, last: int, alphas: list[float], members: list[Path] | None = None
) -> dict[str, tuple[Path | list[Path], float]]:
    """Each (checkpoint, α) to try, named like ``best.pt α1.0``; with ``members``
    (other runs) each checkpoint is the ensemble of the runs' same kind, named like
    ``best.pt×4 α1.0``."""
    own = run_checkpoints(run, last)
    if not members:
        return {f"{c.name} α{a}": (c, a) for c in own for a in alphas}
    others = [run_checkpoints(m, last) for m in members]
    n = 1 + len(members)
    return {
        f"{c.name}×{n} α{a}": ([c, *(o[i] for o in others)], a)
        for i, c in enumerate(own)
        for a in alphas
    }


def checkpoint_name(checkpoint: Path | list[Path]) -> str:
    """``best.pt``, or ``best.pt×4`` for an ensemble."""
    if isinstance(checkpoint, Path):
        return checkpoint.name
    return f"{checkpoint[0].name}×{len(checkpoint)}"


def beam_size(args: argparse.Namespace) -> int:
    """``--beam``, or the beam size ``best.pt`` decodes with (``decode.beam_size``)."""
    if args.beam is not None:
        return args.beam
    best = args.run / "checkpoints" / "best.pt"
    return (
        load_checkpoint(best)["config"]["decode"]["beam_size"] if best.is_file() else 0
    )


def report(validation: dict[str, Scores], choice: str, test: dict[str, Scores]) -> str:
    lines = ["| checkpoint, α | validation BLEU | chrF |", "|---|---|---|"]
    for key, s in validation.items():
        mark = "**" if key == choice else ""
        lines.append(f"| {key} | {mark}{s['bleu']:.2f}{mark} | {s['chrf']:.2f} |")
    lines.append(f"\nchosen on validation: {choice}")
    if test:
        beam, greedy = test["beam"], test["greedy"]
        lines.append(
            f"test, scored once: BLEU {beam['bleu']:.2f}, lowercased "
            f"{beam['lc_bleu']:.2f}, papers' scale {beam['paper_bleu']:.2f}, "
            f"chrF {beam['chrf']:.2f}, greedy BLEU {greedy['bleu']:.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    scorer = Scorer(args.run, args.beam, args.device)
    alphas = args.alphas
    if len(alphas) > 1 and beam_size(args) == 1:
        print(f"greedy decoding has no length penalty: α {alphas[0]} alone")
        alphas = alphas[:1]
    members = [Path(m) for m in args.ensemble.split(",") if m]
    tried = candidates(args.run, args.last, alphas, members)
    validation = {
        key: scorer.score(key, ckpt, args.split, length_penalty=alpha)
        for key, (ckpt, alpha) in tried.items()
    }
    choice = choose(validation)
    test = {}
    if not args.validation_only:
        ckpt, alpha = tried[choice]
        test = {
            "beam": scorer.score(
                choice,
                ckpt,
                args.test_split,
                length_penalty=alpha,
                lowercase=True,
                paper_bleu=True,
            ),
            "greedy": scorer.score(
                f"{checkpoint_name(ckpt)} greedy", ckpt, args.test_split, beam_size=1
            ),
        }
    print(report(validation, choice, test))
    return {"validation": validation, "choice": choice, "test": test}


if __name__ == "__main__":
    main()
