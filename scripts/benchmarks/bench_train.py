"""End-to-end training throughput on Multi30k: target tokens/s, validation time, memory.

Runs the real Trainer (data pipeline, model, loss, optimizer) for a number of steps
after a warm-up, then times one full validation (loss + greedy decoding + BLEU).

    python scripts/benchmarks/bench_train.py --steps 150 --threads 2
    python scripts/benchmarks/bench_train.py --attention luong_general \
        --no-input-feeding
    python scripts/benchmarks/bench_train.py --compare-compile --batch-tokens 1152
    python scripts/benchmarks/bench_train.py --warmup 5 --profile 5   # a step's time
    python scripts/benchmarks/bench_train.py --compare-compile \
        --compile-modes default,reduce-overhead
    python scripts/benchmarks/bench_train.py --experiment wmt14_en_de \
        --corpus /tmp/wmt_synth --no-validation --batch-tokens 16384 \
        data=local  # WMT's model, synthetic data

``--compare-compile`` times ``trainer.compile`` instead: the same batches train with
the eager and the compiled step loop (each of ``--compile-modes``), alternating in
random order in one process (so the machine's drift hits all alike), and it prints
each mode's paired speed-up over eager.
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from seq2seq.config import CONFIG_DIR, register_configs  # noqa: E402
from seq2seq.data.prepare import prepare_data, resolve_cache_root  # noqa: E402
from seq2seq.model.device import select_device  # noqa: E402
from seq2seq.training.runtime import (  # noqa: E402
    check_compile_toolchain,
    seed_everything,
)
from seq2seq.training.trainer import Trainer  # noqa: E402
from seq2seq.training.validation import validate  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=str(ROOT.parent / "shared/data/multi30k"))
    p.add_argument(
        "--experiment",
        default="multi30k_de_en",
        help="the experiment whose model and data settings train (with --corpus as "
        "data.local_dir; add data=local for a corpus other than Multi30k)",
    )
    p.add_argument(
        "--no-validation", action="store_true", help="time the training steps only"
    )
    p.add_argument("--steps", type=int, default=150, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--window", type=int, default=25, help="steps per throughput window")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--attention", default="bahdanau")
    p.add_argument("--no-input-feeding", action="store_true")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument(
        "--compare-compile",
        action="store_true",
        help="time the eager against the compiled step loop (trainer.compile)",
    )
    p.add_argument("--batches", type=int, default=8, help="--compare-compile batches")
    p.add_argument("--rounds", type=int, default=3, help="--compare-compile rounds")
    p.add_argument(
        "--compile-modes",
        default="default",
        help="--compare-compile: torch.compile modes to time against eager, "
        "comma-separated (default, reduce-overhead)",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="profile N steps after --warmup: the operators by self time",
    )
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    return p.parse_args()


def build_trainer(args) -> Trainer:
    register_configs()
    overrides = [
        f"experiment={args.experiment}",
        # the reference model of docs/performance.md: untied, one GRU transition a step
        "model.tie_embeddings=false",
        "model.encoder.transition_depth=1",
        "model.decoder.transition_depth=1",
        f"data.local_dir={args.corpus}",
        f"model/attention={args.attention}",
        f"model.decoder.input_feeding={not args.no_input_feeding}",
        f"data.batch_tokens={args.batch_tokens}",
        "decode=greedy",
        "trainer.progress=false",
        f"trainer.device={args.device}",
        *args.overrides,
    ]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    seed_everything(cfg.trainer.seed)
    data = prepare_data(cfg.data, cfg.tokenizer, resolve_cache_root(cfg.data.cache_dir))
    run_dir = Path("/tmp/seq2seq-bench-train")
    return Trainer(cfg, run_dir, data, select_device(args.device))


def timed_windows(trainer: Trainer, args) -> list[float]:
    """Tokens/s of consecutive windows of ``args.window`` steps, after a warm-up."""
    rates, tokens, steps = [], 0, 0
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else lambda: None
    batches = iter(())
    start = None
    while len(rates) * args.window < args.steps:
        group = next(batches, None)
        if group is None:
            trainer.sampler.set_epoch(trainer.progress.epoch)
            trainer.progress.epoch += 1
            batches = trainer._micro_batches()
            continue
        stats = trainer.train_step(group)
        steps += 1
        if steps == args.warmup:
            sync()
            start, tokens = time.perf_counter(), 0
        elif start is not None:
            tokens += stats["tokens"]
            if (steps - args.warmup) % args.window == 0:
                sync()
                now = time.perf_counter()
                rates.append(tokens / (now - start))
                start, tokens = now, 0
    return rates


def profile_steps(trainer: Trainer, args) -> None:
    """``torch.profiler`` over ``args.profile`` training steps after the warm-up: the
    operators by self time, to see where a step goes."""
    groups = itertools.islice(trainer._micro_batches(), args.warmup + args.profile)
    groups = list(groups)
    for group in groups[: args.warmup]:
        trainer.train_step(group)
    with torch.profiler.profile() as prof:
        for group in groups[args.warmup :]:
            trainer.train_step(group)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def compare_compile(trainer: Trainer, args) -> None:
    """Eager vs the step loop compiled in each of ``--compile-modes``: every batch
    trains once with each, in random order; prints tokens/s medians and each mode's
    median paired speed-up over eager."""
    check_compile_toolchain(trainer.device)
    model = trainer.model
    modes = [m.strip() for m in args.compile_modes.split(",") if m.strip()]
    bucket = int(trainer.cfg.trainer.compile_bucket)
    parts = model.compile_steps(modes[0], bucket)
    if not parts:
        raise SystemExit("this model steps nothing by hand: nothing to compile")
    print(f"compiled: {' and '.join(parts)}")
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else lambda: None
    groups = list(itertools.islice(trainer._micro_batches(), args.batches))

    def timed(mode: str, group) -> tuple[int, float]:
        model.eager_steps()
        if mode != "eager":
            model.compile_steps(mode, bucket)
        sync()
        start = time.perf_counter()
        stats = trainer.train_step(group)
        sync()
        return (stats or {"tokens": 0})["tokens"], time.perf_counter() - start

    first = {mode: timed(mode, groups[0])[1] for mode in modes}  # the compilations
    for group in groups[:3]:  # warm-up: caches, any second graph (strides, grad mode)
        for mode in ["eager", *modes]:
            timed(mode, group)
    times: dict[str, list[tuple[int, float]]] = {m: [] for m in ["eager", *modes]}
    rng = random.Random(0)
    for _ in range(args.rounds):
        for group in groups:
            for mode in rng.sample(list(times), len(times)):
                times[mode].append(timed(mode, group))
    rate = {k: statistics.median(n / t for n, t in v) for k, v in times.items()}
    head = (
        f"{trainer.device} ({args.threads} threads) {args.attention} "
        f"precision={trainer.cfg.trainer.precision} batch_tokens={args.batch_tokens}"
    )
    print(f"{head}: eager {rate['eager']:,.0f} tok/s")
    for mode in modes:
        ratios = [e[1] / c[1] for e, c in zip(times["eager"], times[mode], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"{head}: compile mode={mode} (bucket {bucket}): first compiled step "
            f"{first[mode]:.1f} s; {rate[mode]:,.0f} tok/s; paired speed-up "
            f"x{statistics.median(ratios):.3f} (IQR {q1:.3f}-{q3:.3f}, n={len(ratios)})"
        )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    trainer = build_trainer(args)
    if args.compare_compile:
        compare_compile(trainer, args)
        return
    if args.profile:
        profile_steps(trainer, args)
        return
    rates = timed_windows(trainer, args)
    valid = "-", "-"
    if not args.no_validation:
        t0 = time.perf_counter()
        metrics = validate(
            trainer.translator, trainer.data, trainer.cfg, trainer.tracker, 0
        )
        valid = f"{time.perf_counter() - t0:.1f}", f"{metrics['bleu']:.2f}"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_mb = (
        torch.cuda.max_memory_allocated() / 2**20
        if trainer.device.type == "cuda"
        else 0
    )
    print(
        f"| device | attention | input feeding | params | train tok/s (median of "
        f"{len(rates)}) | min–max | validation s | valid BLEU | "
        "peak RSS MB | peak GPU MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {trainer.device} ({args.threads} threads) | {args.attention} | "
        f"{not args.no_input_feeding} | {trainer.n_params:,} | "
        f"{statistics.median(rates):,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
        f"{valid[0]} | {valid[1]} | {rss_mb:,.0f} | {gpu_mb:,.0f} |"
    )


if __name__ == "__main__":
    main()
