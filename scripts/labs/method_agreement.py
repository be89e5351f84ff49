"""Attention and gradient × input against occlusion on a checkpoint's split: per
target word, how often each method's strongest source word is occlusion's (the word
whose knock-out costs the written word the most log-probability), and each method's
AER against gold links where the split has them (the phrasebook's test split).
Every pair is forced through its reference.

    python scripts/labs/method_agreement.py RUN/checkpoints/best.pt --split validation
    python scripts/labs/method_agreement.py QUICKSTART/best.pt --split test
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from seq2seq.alignment.agreement import method_agreement  # noqa: E402
from seq2seq.data.splits import encode_corpus_split  # noqa: E402
from seq2seq.decoding.translator import Translator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--limit", type=int, default=None, help="the first N pairs")
    parser.add_argument(
        "--no-gradient", action="store_true", help="skip gradient × input"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", default=None, help="data.cache_dir override")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.from_checkpoint(args.checkpoint, device="cpu")
    data_cfg = tr.config.data
    if args.cache_dir:
        data_cfg.cache_dir = args.cache_dir
    split = encode_corpus_split(data_cfg, tr.tokenizer, args.split)
    if args.limit is not None:
        split = split.select(list(range(min(args.limit, len(split)))))
    report = method_agreement(tr, split, gradient=not args.no_gradient)
    print(f"{args.checkpoint} on {args.split}: {report.summary()}")
    print(json.dumps({"agree": report.agree, "aer": report.aer}, indent=1))


if __name__ == "__main__":
    main()
