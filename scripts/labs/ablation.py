"""Ablations on Multi30k: one recipe, one budget, one row per design or lever.

Two grids:
- ``attention`` (the default): every attention × decoder style, input feeding on and
  off, and no attention at all (de→en);
- ``levers``: the regularization levers of the recipe, one at a time (subword sampling,
  R-Drop, stronger dropout with word dropout, a moving average of the weights), for
  any pair.

Each row is one ``seq2seq-train`` command (printed, so any row can be rerun alone)
followed by ``seq2seq-evaluate`` on the validation split, greedy and beam 5 (with the
recipe's length penalty). Test sets are not used: the table compares designs, it does
not pick a model. Results go to ``<out>/ablation.md`` (a Markdown table, mean ± sd over
seeds) and ``<out>/runs.jsonl``; finished runs are reused, so an interrupted ablation
continues where it stopped.

    python scripts/labs/ablation.py --minutes 4 --seeds 42 --out outputs/ablation
    python scripts/labs/ablation.py --minutes 7 --rows 0 1 4 7 8 10 12   # a subset
    python scripts/labs/ablation.py --grid levers --experiment multi30k_en_de --epochs 6
    python scripts/labs/ablation.py --dry-run          # print the commands only
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

ATTENTIONS = ("bahdanau", "luong_dot", "luong_general", "luong_concat")
STYLES = (  # (label, overrides): the decoder style and Luong input feeding
    ("Bahdanau", ["model.decoder.style=bahdanau"]),
    ("Luong + feeding", ["model.decoder.style=luong", "model.decoder.input_feeding=1"]),
    ("Luong", ["model.decoder.style=luong", "model.decoder.input_feeding=0"]),
)
SCORE = re.compile(r"^BLEU ([\d.]+) chrF ([\d.]+)", re.MULTILINE)
PARAMS = re.compile(r"model: ([\d,]+) parameters")
STEPS = re.compile(r"training stopped \(\w+\) at step (\d+)")


LEVERS = (  # (label, overrides): one lever each, against the recipe as it is
    ("recipe", []),
    (
        "dropout 0.3, word dropout 0.1",
        [
            "model.emb_dropout=0.3",
            "model.encoder.dropout=0.3",
            "model.decoder.dropout=0.3",
            "model.word_dropout=0.1",
        ],
    ),
    ("subword sampling α 0.2", ["tokenizer.sampling_alpha=0.2"]),
    ("R-Drop α 5", ["trainer.rdrop=5"]),  # two passes a step: twice the time
    ("weight average (EMA) 0.999", ["trainer.ema_decay=0.999"]),
)


def grid(name: str = "attention") -> list[tuple[str, str, list[str]]]:
    """(first column, second column, overrides) for every row of a grid's table."""
    if name == "levers":
        return [(label, " ".join(o) or "—", o) for label, o in LEVERS]
    rows = [
        (att, label, [f"model/attention={att}", *style])
        for att in ATTENTIONS
        for label, style in STYLES
    ]
    rows.append(("none", "Luong", ["model/attention=none", *STYLES[2][1]]))
    return rows


COLUMNS = {"attention": ("attention", "decoder"), "levers": ("lever", "overrides")}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", choices=sorted(COLUMNS), default="attention")
    p.add_argument("--experiment", default="multi30k_de_en_cpu30")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, help="training budget per run (4)")
    budget.add_argument(
        "--epochs",
        type=int,
        help="train each run for this many epochs instead of a wall-clock budget "
        "(levers that cost time per step are compared at equal data, not equal time)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[42])
    p.add_argument("--corpus", default=str(ROOT.parent / "shared/data/multi30k"))
    p.add_argument("--out", default="outputs/ablation")
    p.add_argument(
        "--rows",
        type=int,
        nargs="+",
        help="run only these rows of the grid (0-based, in --dry-run's order)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    p.add_argument(
        "extra", nargs="*", help="overrides for every run, before each row's own"
    )
    args = p.parse_args()
    if args.minutes is None and args.epochs is None:
        args.minutes = 4.0
    return args


def budget(args) -> list[str]:
    """The overrides that end a run: a wall clock (the learning rate anneals within
    it) or an epoch count (the cosine reaches its floor at the last epoch)."""
    if args.epochs is not None:
        return [f"trainer.max_epochs={args.epochs}", "trainer.max_minutes=null"]
    return [f"trainer.max_minutes={args.minutes}"]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "_", text.lower()).strip("_")


def run(cmd: list[str], log: Path) -> str:
    """Run a console script, keep its output in ``log``, fail loudly with its tail."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{tail}")
    return proc.stdout + proc.stderr


def evaluate(checkpoint: Path, beam: int, run_dir: Path) -> tuple[float, float]:
    out = run(
        [
            str(BIN / "seq2seq-evaluate"),
            f"checkpoint={checkpoint}",
            "split=validation",
            f"beam_size={beam}",
            f"hydra.run.dir={run_dir / f'eval_beam{beam}'}",
        ],
        run_dir / f"eval_beam{beam}.log",
    )
    bleu, chrf = SCORE.search(out).groups()
    return float(bleu), float(chrf)


def one_run(args, attention: str, label: str, overrides: list[str], seed: int) -> dict:
    if args.grid == "levers":
        name = f"{slug(attention)}-s{seed}"
    else:
        name = (
            f"{attention}-{label.replace(' + ', '-').replace(' ', '_').lower()}-s{seed}"
        )
    run_dir = Path(args.out).resolve() / name
    result_file = run_dir / "result.json"
    if result_file.exists():
        result = json.loads(result_file.read_text())
        log = (run_dir / "train.log").read_text(encoding="utf-8")
        result.setdefault("steps", int(STEPS.search(log).group(1)))
        return result
    train = [
        str(BIN / "seq2seq-train"),
        f"experiment={args.experiment}",
        f"data.local_dir={args.corpus}",
        *args.extra,  # the base of every row: each row's own lever comes after it
        *overrides,
        *budget(args),
        f"trainer.seed={seed}",
        "evaluate_test=false",
        "trainer.progress=false",
        f"hydra.run.dir={run_dir}",
    ]
    print("$ seq2seq-train", " ".join(a for a in train[1:] if "hydra.run" not in a))
    if args.dry_run:
        return {}
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    log = run(train, run_dir / "train.log")
    wall = time.monotonic() - start
    best = run_dir / "checkpoints" / "best.pt"
    greedy, beam = evaluate(best, 1, run_dir), evaluate(best, 5, run_dir)
    result = {
        "attention": attention,
        "decoder": label,
        "seed": seed,
        "params": int(PARAMS.search(log).group(1).replace(",", "")),
        "steps": int(STEPS.search(log).group(1)),
        "train_wall_s": round(wall, 1),
        "greedy_bleu": greedy[0],
        "greedy_chrf": greedy[1],
        "beam5_bleu": beam[0],
        "beam5_chrf": beam[1],
        "command": "seq2seq-train " + " ".join(train[1:-1]),
    }
    result_file.write_text(json.dumps(result), encoding="utf-8")
    return result


def mean_sd(values: list[float], spec: str = ".1f") -> str:
    if len(values) == 1:
        return f"{values[0]:{spec}}"
    return f"{statistics.mean(values):{spec}} ± {statistics.stdev(values):{spec}}"


def table(results: list[dict], args) -> str:
    budget = f"{args.epochs} epochs" if args.epochs else f"{args.minutes:g} minutes"
    first, second = COLUMNS[args.grid]
    lines = [
        f"Multi30k validation BLEU (cased sacreBLEU), {budget} of training each, "
        f"seeds {', '.join(map(str, args.seeds))}, `{args.experiment}`.",
        "",
        f"| {first} | {second} | parameters | steps | training minutes | greedy BLEU "
        "| beam-5 BLEU | beam-5 chrF |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, label, _ in grid(args.grid):
        rows = [r for r in results if r["attention"] == key and r["decoder"] == label]
        if not rows:
            continue
        lines.append(
            f"| {key} | {label} | {rows[0]['params'] / 1e6:.2f} M "
            f"| {mean_sd([r['steps'] for r in rows], '.0f')} "
            f"| {mean_sd([r['train_wall_s'] / 60 for r in rows], '.0f')} | "
            f"{mean_sd([r['greedy_bleu'] for r in rows], '.2f')} | "
            f"{mean_sd([r['beam5_bleu'] for r in rows], '.2f')} | "
            f"{mean_sd([r['beam5_chrf'] for r in rows], '.2f')} |"
        )
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    results = []
    rows = [
        row for i, row in enumerate(grid(args.grid)) if not args.rows or i in args.rows
    ]
    for seed in args.seeds:
        for attention, label, overrides in rows:
            result = one_run(args, attention, label, overrides, seed)
            if result:
                results.append(result)
                print(
                    f"  greedy {result['greedy_bleu']:.2f} beam5 "
                    f"{result['beam5_bleu']:.2f} ({result['train_wall_s']:.0f} s)",
                    flush=True,
                )
    if args.dry_run:
        return
    out = Path(args.out)
    with open(out / "runs.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in results)
    text = table(results, args)
    (out / "ablation.md").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
