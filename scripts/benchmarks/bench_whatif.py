"""Latency of the explorer's what-ifs on a checkpoint, as seq2seq-serve's page asks
them: median milliseconds per request over the sentences of a split, measured in
process on the engine (no HTTP), after a warm-up.

- ``plain``: ``/attention`` of a sentence (search, forced attention), the baseline;
- ``steps``: the same with ``top_k=5`` (each step's distribution);
- ``prefix``: ``/attention`` continuing the first half of the model's own
  translation (as pieces: what choosing an alternative sends);
- ``knockout``: ``/attention`` with the sentence's first word knocked out (the new
  translation, its attention and the change in the original's log-probability);
- ``occlusion``: ``/attention`` with occlusion, and the occlusion alone per number of
  source words (the target: a 20-word sentence within 1 s on 2 cores).

Targets (issue #65): a what-if ≤ 300 ms for the quickstart model, ≤ 1 s for a Multi30k
recipe model, on 2 CPU cores. Run it on quiet cores:

    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_whatif.py \\
        runs/de_en/checkpoints/best.pt --sentences 50 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from seq2seq.data.splits import encode_corpus_split  # noqa: E402
from seq2seq.decoding.knockout import Knockout  # noqa: E402
from seq2seq.decoding.maps import forced_split  # noqa: E402
from seq2seq.decoding.translator import Translator  # noqa: E402
from seq2seq.decoding.whatif import occlusion_maps  # noqa: E402
from seq2seq.serve.engine import Engine, Limits  # noqa: E402


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=None, help="default: ckpt's")
    parser.add_argument("--cache-dir", default=None, help="data.cache_dir override")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tr = Translator.from_checkpoint(args.checkpoint, device="cpu", beam_size=args.beam)
    data_cfg = tr.config.data
    if args.cache_dir:
        data_cfg.cache_dir = args.cache_dir
    split = encode_corpus_split(data_cfg, tr.tokenizer, args.split)
    texts = list(split.src_text[: args.sentences])
    engine = Engine(tr, Limits(max_input_pieces=10_000))
    engine.warm()
    own = [h.tokens for h in tr.hypotheses(tr.encode(texts))]
    times: dict[str, list[float]] = {}

    def run(name: str, text: str, prefix=None, ko=None, top_k=0, occ=False) -> None:
        payload = [(text, None, prefix, ko)]
        call = lambda: engine.attention(payload, False, False, None, 1, top_k, occ)  # noqa: E731
        times.setdefault(name, []).append(_ms(call))

    for text, tokens in zip(texts, own, strict=True):
        half = tokens[: max(len(tokens) // 2, 1)]
        run("plain", text)
        run("steps top_k=5", text, top_k=5)
        run("prefix (half of its own)", text, prefix=list(half))
        run("knockout (word 0)", text, ko=Knockout(words=(0,)))
        run("occlusion", text, occ=True)
    per_words: dict[int, list[float]] = {}
    shown = forced_split(tr.encode(texts), own)
    for k in range(len(texts)):
        one = shown.select([k])
        words = len(texts[k].split())
        ms = _ms(lambda one=one: occlusion_maps(tr, one))
        per_words.setdefault(words, []).append(ms)
    print(
        f"{args.checkpoint} on {args.split} ({len(texts)} sentences), "
        f"{args.threads} threads, beam {tr.beam_size}"
    )
    print("| request | median ms | p90 ms |")
    print("|---|---|---|")
    for name, ms in times.items():
        p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) > 1 else ms[0]
        print(f"| {name} | {statistics.median(ms):.1f} | {p90:.1f} |")
    print("\n| source words | occlusion alone, median ms | sentences |")
    print("|---|---|---|")
    for words in sorted(per_words):
        ms = per_words[words]
        print(f"| {words} | {statistics.median(ms):.1f} | {len(ms)} |")


if __name__ == "__main__":
    main()
