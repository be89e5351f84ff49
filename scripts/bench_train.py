"""End-to-end training throughput on Multi30k: target tokens/s, validation time, memory.

Runs the real Trainer (data pipeline, model, loss, optimizer) for a number of steps
after a warm-up, then times one full validation (loss + greedy decoding + BLEU).

    python scripts/bench_train.py --steps 150 --threads 2
    python scripts/bench_train.py --attention luong_general --no-input-feeding
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from seq2seq.config import register_configs  # noqa: E402
from seq2seq.data.prepare import prepare_data, resolve_cache_root  # noqa: E402
from seq2seq.paths import CONFIG_DIR  # noqa: E402
from seq2seq.runtime import seed_everything, select_device  # noqa: E402
from seq2seq.train import Trainer  # noqa: E402
from seq2seq.validation import validate  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=str(ROOT.parent / "shared/data/multi30k"))
    p.add_argument("--steps", type=int, default=150, help="timed steps")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--window", type=int, default=25, help="steps per throughput window")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--attention", default="bahdanau")
    p.add_argument("--no-input-feeding", action="store_true")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    return p.parse_args()


def build_trainer(args) -> Trainer:
    register_configs()
    overrides = [
        "experiment=multi30k_de_en",
        "model.tie_embeddings=false",  # the reference model of docs/performance.md
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


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    trainer = build_trainer(args)
    rates = timed_windows(trainer, args)
    t0 = time.perf_counter()
    metrics = validate(
        trainer.model,
        trainer.data,
        trainer.cfg,
        trainer.device,
        trainer.amp_dtype,
        trainer.tracker,
        0,
    )
    valid_s = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_mb = (
        torch.cuda.max_memory_allocated() / 2**20
        if trainer.device.type == "cuda"
        else 0
    )
    print(
        f"| device | attention | input feeding | params | train tok/s (median of "
        f"{len(rates)}) | min–max | validation s (1,014 sent.) | valid BLEU | "
        "peak RSS MB | peak GPU MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {trainer.device} ({args.threads} threads) | {args.attention} | "
        f"{not args.no_input_feeding} | {trainer.n_params:,} | "
        f"{statistics.median(rates):,.0f} | {min(rates):,.0f}–{max(rates):,.0f} | "
        f"{valid_s:.1f} | {metrics['bleu']:.2f} | {rss_mb:,.0f} | {gpu_mb:,.0f} |"
    )


if __name__ == "__main__":
    main()
