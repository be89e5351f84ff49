"""The fused output layer + loss at several chunk sizes: time against memory.

``linear_token_loss`` makes ``chunk`` rows of logits at a time
(``trainer.loss_chunk_mb``, capped on CPU by ``CPU_CHUNK_BYTES`` in ``model/loss.py``).
Smaller chunks hold less memory but make thinner matmuls and add each chunk's
``(V, F)`` weight gradient into its accumulator once more. This times forward +
backward of one batch's output layer and loss at each size, the sizes alternating in
random order within every round, and prints each size's median seconds and its ratio
to the largest size.

    python scripts/benchmarks/bench_loss_chunks.py --rows 4096 --features 256 \
        --vocab 32000 --chunks-mb 8,16,32
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from seq2seq.model.loss import linear_token_loss


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096, help="target tokens of a batch")
    p.add_argument("--features", type=int, default=256, help="the output layer's input")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--chunks-mb", default="8,16,32", help="float32 logits per chunk")
    p.add_argument("--rounds", type=int, default=7, help="the first is warm-up")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoothing", type=float, default=0.1)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.rows, args.features, generator=gen).requires_grad_()
    weight = 0.05 * torch.randn(args.vocab, args.features, generator=gen)
    weight.requires_grad_()
    bias = torch.zeros(args.vocab, requires_grad=True)
    targets = torch.randint(1, args.vocab, (args.rows,), generator=gen)
    sizes = [int(mb) for mb in args.chunks_mb.split(",")]
    seconds: dict[int, list[float]] = {mb: [] for mb in sizes}
    order = random.Random(0)
    for _ in range(args.rounds):
        for mb in order.sample(sizes, len(sizes)):
            rows = max(1, mb * 2**20 // (4 * args.vocab))
            start = time.perf_counter()
            linear_token_loss(x, weight, bias, targets, args.smoothing, rows).backward()
            seconds[mb].append(time.perf_counter() - start)
            x.grad = weight.grad = bias.grad = None
    base = statistics.median(seconds[max(sizes)][1:])
    print(
        f"{args.rows} rows x {args.features} features -> {args.vocab} pieces, "
        f"{args.threads} threads, median of {args.rounds - 1} rounds"
    )
    print("| chunk MB | rows | seconds | × largest |")
    print("|---|---|---|---|")
    for mb in sizes:
        median = statistics.median(seconds[mb][1:])
        rows = max(1, mb * 2**20 // (4 * args.vocab))
        print(f"| {mb} | {rows} | {median:.3f} | {median / base:.3f} |")


if __name__ == "__main__":
    main()
