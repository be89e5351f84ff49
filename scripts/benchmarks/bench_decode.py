"""Decoding speed of trained checkpoints: search variants, batch budgets, stop rules.

Every variant decodes the same split with the same model in one process, the variants
alternating within each of ``--rounds`` rounds (random order per round), so the
machine's drift hits them alike. Each row gives sentences/s (median over rounds,
``Translator.hypotheses``: batching, encoder and search, not the start-up), BLEU and
mean output length in words (cased sacreBLEU on the detokenized output), so that like
is compared with like.

- ``--batch-tokens 1024,2048,4096``: the budget sweep (``batch_tokens=`` of evaluate,
  translate and validation);
- ``--beam 1,5`` and ``--stop bound,best``: greedy and beam search, and beam search's
  two stop rules;
- ``--max-len 1.5:10,1.2:5``: maximum output lengths ``a·|src| + b``
  (decode.max_len_a, max_len_b; default: the checkpoint's), which bound how long the
  exact stop rule searches;
- ``--vocab fp32,int8,bf16``: the vocabulary projection's precision
  (decode.vocab_precision); each row after the first value is compared with the first's;
- ``--precision fp32,bf16``: the whole search's autocast (``precision=`` of evaluate
  and translate); each row after the first value is compared with the first's;
- ``--baseline REF``: the search of git revision ``REF`` (``decoding/search.py`` as it
  was there, loaded beside today's) as an extra variant of each row;
- ``--device cuda``: decode on a GPU (the outputs come back to the host at the end of
  each batch, so the timing includes every wait on the device);
- ``--profile``: after the timed rounds, one pass of each variant under
  ``torch.profiler``, printing its operators' shares of the self time (the
  matmuls' share bounds what any change outside them can gain).

A compared row gives the share of sentences whose output differs and the median ratio
of the paired round times, "speed-up": baseline / today, or first vocab / this vocab
(> 1: today's search, or this precision, is faster).

    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_decode.py \\
        runs/de_en/checkpoints/best.pt --beam 1,5 --baseline HEAD~1 --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from revision import module_at  # noqa: E402

from seq2seq.data.splits import encode_corpus_split  # noqa: E402
from seq2seq.decoding import translator as translator_module  # noqa: E402
from seq2seq.decoding.scores import score  # noqa: E402
from seq2seq.decoding.translator import Translator  # noqa: E402

# the module ``--baseline`` loads at its revision
SEARCH = "seq2seq/decoding/search.py"


def _numbers(text: str, kind=int) -> list:
    return [kind(x) for x in text.split(",") if x]


@contextmanager
def search_of(module):
    """Decode with ``module.translate_batch`` (None: today's)."""
    today = translator_module.translate_batch
    if module is not None:
        translator_module.translate_batch = module.translate_batch
    try:
        yield
    finally:
        translator_module.translate_batch = today


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--beam", default="1,5", help="beam sizes (1: greedy)")
    parser.add_argument("--stop", default="bound", help="beam stop rules")
    parser.add_argument("--batch-tokens", default="", help="budgets; default: ckpt")
    parser.add_argument("--max-len", default="", help="a:b,... maximum lengths")
    parser.add_argument("--vocab", default="fp32", help="fp32,int8,bf16,auto")
    parser.add_argument("--profile", action="store_true", help="operator shares")
    parser.add_argument("--baseline", default=None, help="git revision of search.py")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    parser.add_argument("--precision", default="fp32", help="fp32,bf16,auto")
    parser.add_argument("--cache-dir", default=None, help="data.cache_dir override")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    base = Translator.from_checkpoint(args.checkpoint, device=args.device)
    data_cfg = base.config.data
    if args.cache_dir:
        data_cfg.cache_dir = args.cache_dir
    split = encode_corpus_split(data_cfg, base.tokenizer, args.split)
    budgets = _numbers(args.batch_tokens) or [base.batch_tokens]
    limits = [tuple(x.split(":")) for x in args.max_len.split(",") if x] or [None]
    old = module_at(args.baseline, SEARCH) if args.baseline else None
    vocabs = args.vocab.split(",")
    precisions = args.precision.split(",")
    variants = []  # (name, translator, search module)
    compare = {}  # name → (the other variant's name, whether the other is the change)
    for beam in _numbers(args.beam):
        for stop in args.stop.split(",") if beam > 1 else ["bound"]:
            grid = itertools.product(budgets, limits, vocabs, precisions)
            for budget, limit, vocab, precision in grid:
                tr = Translator.from_checkpoint(
                    args.checkpoint,
                    device=args.device,
                    precision=precision,
                    batch_tokens=budget,
                    beam_size=beam,
                    stop=stop,
                )
                name = f"beam {beam}" + (f" stop={stop}" if beam > 1 else "")
                name += f" batch_tokens={budget}"
                if limit is not None:
                    a, b = float(limit[0]), int(limit[1])
                    tr = tr.with_decoding(max_len_a=a, max_len_b=b)
                    name += f" max_len={a:g}·|src|+{b}"
                tr = tr.with_decoding(vocab_precision=vocab)
                first = f"{name} vocab={vocabs[0]}"
                name += f" vocab={vocab}"
                if len(precisions) > 1:
                    first += f" precision={precisions[0]}"
                    name += f" precision={precision}"
                variants.append((name, tr, None))
                if vocab != vocabs[0] or precision != precisions[0]:
                    compare[name] = (first, False)
                if old is not None:
                    variants.append((name + f" [{args.baseline}]", tr, old))
                    compare[name + f" [{args.baseline}]"] = (name, True)
    for _, tr, module in variants:  # warm-up: allocator, oneDNN caches
        with search_of(module):
            tr.hypotheses(split.head(64))

    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    outputs: dict[str, list[list[int]]] = {}
    rng = random.Random(0)
    for _ in range(args.rounds):
        order = list(variants)
        rng.shuffle(order)
        for name, tr, module in order:
            with search_of(module):
                start = time.perf_counter()
                hyps = tr.hypotheses(split)
                times[name].append(time.perf_counter() - start)
            outputs[name] = [h.tokens for h in hyps]
    print(
        f"{args.checkpoint} on {args.split} ({len(split)} sentences), "
        f"{args.threads} threads, {args.precision}, {args.rounds} rounds"
    )
    print("| variant | sent/s | BLEU | words | differs | speed-up |")
    print("|---|---|---|---|---|---|")
    for name, tr, _ in variants:
        texts = [tr.tokenizer.decode_tgt(ids) for ids in outputs[name]]
        bleu = score(texts, split.tgt_text).bleu
        words = statistics.mean(len(t.split()) for t in texts)
        rate = len(split) / statistics.median(times[name])
        differs = ratio = ""
        if name in compare:
            other, other_is_change = compare[name]
            pairs = zip(outputs[name], outputs[other], strict=True)
            same = sum(a == b for a, b in pairs)
            differs = f"{1 - same / len(split):.1%} vs {other}"
            pairs = zip(times[name], times[other], strict=True)
            ratios = (t / o if other_is_change else o / t for t, o in pairs)
            ratio = f"{statistics.median(ratios):.3f}"
        cells = [name, f"{rate:.1f}", f"{bleu:.2f}", f"{words:.2f}", differs, ratio]
        print("| " + " | ".join(cells) + " |")
    if args.profile:
        for name, tr, module in variants:
            with search_of(module):
                print(f"\n{name}: " + profile_shares(partial(tr.hypotheses, split)))


MATMULS = ("aten::addmm", "aten::mm", "aten::bmm", "quantized::linear_dynamic")


def profile_shares(run, top: int = 12) -> str:
    """``run()`` under ``torch.profiler``: the matmuls' share of the self time, then
    the ``top`` operators' shares."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    ops = [(e.key, e.self_cpu_time_total) for e in prof.key_averages()]
    total = sum(t for _, t in ops) or 1.0
    matmuls = sum(t for k, t in ops if k in MATMULS) / total
    ops.sort(key=lambda op: -op[1])
    shares = ", ".join(f"{k} {t / total:.1%}" for k, t in ops[:top])
    return f"matmuls {matmuls:.1%} of {total / 1e6:.2f} s self time; {shares}"


if __name__ == "__main__":
    main()
