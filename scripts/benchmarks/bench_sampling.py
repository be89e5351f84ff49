"""What subword sampling costs a training epoch: building the samplers once, then
cutting the training split afresh and planning its batches, epoch by epoch.

It prints, for each alpha, the build time, each epoch's sampling + planning time,
the number of batches, and the pieces against the cached encoding (more pieces are
more tokens to train on: the larger cost of a low alpha).

    python scripts/benchmarks/bench_sampling.py --data ../shared/data/multi30k \
        --alpha 0.1 0.2 0.5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from seq2seq.config import Corpus, DataConfig, TokenizerConfig
from seq2seq.data.batching import make_loader
from seq2seq.data.prepare import prepare_data
from seq2seq.data.sampling import SubwordSampling, make_sampled_loader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of Multi30k jsonl files")
    parser.add_argument("--src", default="de")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.1, 0.2, 0.5])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--cache", default="data/cache")
    args = parser.parse_args()
    data_cfg = DataConfig(
        name=Corpus.multi30k, local_dir=args.data, src_lang=args.src, tgt_lang=args.tgt
    )
    data = prepare_data(
        data_cfg, TokenizerConfig(vocab_size=args.vocab_size), Path(args.cache)
    )
    train = data.splits["train"]
    cached = make_loader(train, args.batch_tokens, True, 42, sort_by="target")
    print(f"{len(train)} pairs, cached pieces: {len(cached.batch_sampler)} batches")
    pieces = sum(map(len, train.src_ids)) + sum(map(len, train.tgt_ids))
    for alpha in args.alpha:
        start = time.perf_counter()
        loader = make_sampled_loader(
            train, data.tokenizer, SubwordSampling(alpha), args.batch_tokens, seed=42
        )
        print(f"alpha {alpha}: samplers built in {time.perf_counter() - start:.2f} s")
        sampler = loader.batch_sampler
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            start = time.perf_counter()
            batches = len(sampler)
            took = time.perf_counter() - start
            split = loader.dataset.current
            ratio = (
                sum(map(len, split.src_ids)) + sum(map(len, split.tgt_ids))
            ) / pieces
            print(
                f"  epoch {epoch + 1}: sampled and planned in {took:.2f} s, "
                f"{batches} batches, {ratio:.2f}x the cached pieces"
            )


if __name__ == "__main__":
    main()
