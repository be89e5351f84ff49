"""Scaling: training tok/s and peak memory against token budget and sentence length.

The reference model (emb 256, bi-GRU 2×256, GRU decoder 512, additive attention,
vocabulary 8000) trains forward + backward on random batches of equal-length
sentences (source = target length). Two sweeps:

- token budget (sentences × length) at length 16: the work per token is constant, so
  tok/s should rise (bigger matmuls) and then flatten, and memory grow linearly;
- sentence length at a fixed budget of 4,096 tokens: the attention ``(B, T, S)``
  holds budget × length scores, so its share grows with the length while the rest of
  the per-token work stays the same: tok/s should fall slowly, memory grow gently.

Each point runs in a fresh process, so its peak RSS is its own (the first row's figure
is mostly PyTorch itself).

    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_scaling.py --threads 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model import VOCAB, timed

from seq2seq.config import ModelConfig
from seq2seq.data.tokenizer import BOS_ID, EOS_ID
from seq2seq.model.seq2seq import build_model


def uniform_batch(sentences: int, length: int) -> dict[str, torch.Tensor]:
    """``sentences`` pairs of ``length`` pieces (EOS included) on both sides."""
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, VOCAB, (sentences, length), generator=g)
    src[:, -1] = EOS_ID
    body = torch.randint(4, VOCAB, (sentences, length), generator=g)
    tgt_out = body.clone()
    tgt_out[:, -1] = EOS_ID
    tgt_in = torch.cat([torch.full((sentences, 1), BOS_ID), body[:, :-1]], dim=1)
    return {
        "src": src,
        "src_lengths": torch.full((sentences,), length),
        "src_mask": torch.ones(sentences, length, dtype=torch.bool),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
    }


def measure(spec: tuple[int, int, int, int]) -> dict:
    """tok/s and peak RSS of training steps on one shape, in this fresh process."""
    sentences, length, threads, iters = spec
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(ModelConfig(), VOCAB, VOCAB).train()
    b = uniform_batch(sentences, length)

    def train_step() -> None:
        out = model(b["src"], b["src_lengths"], b["src_mask"], b["tgt_in"])
        loss = F.cross_entropy(
            out.logits.flatten(0, 1), b["tgt_out"].flatten(), label_smoothing=0.1
        )
        model.zero_grad(set_to_none=True)
        loss.backward()

    seconds = timed(train_step, iters, 1, torch.device("cpu"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "sentences": sentences,
        "length": length,
        "tokens": sentences * length,
        "tok_s": sentences * length / seconds,
        "peak_mb": peak,
        "attention_mb": sentences * length * length * 4 / 2**20,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=3)
    args = p.parse_args()
    budget_sweep = [(tokens // 16, 16) for tokens in (512, 1024, 2048, 4096, 8192)]
    length_sweep = [(4096 // length, length) for length in (8, 16, 32, 64, 128)]
    ctx = multiprocessing.get_context("spawn")
    print(
        "reference model, additive attention, fp32 CPU, "
        f"{args.threads} threads, median of {args.iters} steps\n"
    )
    print(
        "| sweep | sentences × length | tokens | train tok/s | peak RSS MB "
        "| one (B, T, S) fp32 MB |"
    )
    print("|---|---|---|---|---|---|")
    for sweep, shapes in (("budget", budget_sweep), ("length", length_sweep)):
        for sentences, length in shapes:
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                row = pool.submit(
                    measure, (sentences, length, args.threads, args.iters)
                ).result()
            print(
                f"| {sweep} | {row['sentences']} × {row['length']} | {row['tokens']:,} "
                f"| {row['tok_s']:,.0f} | {row['peak_mb']:,.0f} "
                f"| {row['attention_mb']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
