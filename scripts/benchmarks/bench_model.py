"""Model benchmark: training throughput, peak memory and decoding speed per variant.

For every attention × decoder style × input feeding, on a Multi30k-like batch (64
sentences, source ~14 and target ~15 pieces, vocabulary 8000) with the reference model
(emb 256, encoder 2×256 bi-GRU, decoder 512):

- train tok/s: target tokens per second of forward + backward (label-smoothed
  cross-entropy), the median of ``--iters`` timed iterations after warm-up;
- peak MiB: peak RSS of a fresh process that ran only that variant (CPU), or
  ``torch.cuda.max_memory_allocated`` (CUDA, bf16 autocast);
- greedy / beam5 sent/s: sentences per second of batched search (maximum length
  1.5·|src| + 10; an untrained model rarely ends early, so this is near the worst case).

Each variant runs in its own spawned process so the memory peaks do not mix.

    python scripts/benchmarks/bench_model.py --threads 2   # CPU (+ CUDA when present)
    python scripts/benchmarks/bench_model.py --quick --device cpu  # 3 variants, 2 iters
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import torch
from torch.nn import functional as F

from seq2seq.config import DecodeConfig, ModelConfig
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.search import beam_search, greedy_search
from seq2seq.model.attention import ATTENTIONS
from seq2seq.model.seq2seq import build_model

VOCAB = 8000
BATCH = 64


def variants(quick: bool) -> list[tuple[str, str, bool]]:
    """(attention, style, input feeding); feeding only exists for the Luong style."""
    if quick:
        return [
            ("bahdanau", "bahdanau", False),
            ("luong_general", "luong", True),
            ("luong_general", "luong", False),
        ]
    out = []
    for attention in ATTENTIONS:
        out.append((attention, "bahdanau", False))
        out += [(attention, "luong", True), (attention, "luong", False)]
    return out


def make_batch(device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random padded batch with Multi30k-like lengths (pieces + EOS)."""
    g = torch.Generator().manual_seed(seed)
    src_len = torch.randint(9, 20, (BATCH,), generator=g) + 1  # mean ~14 pieces + EOS
    tgt_len = torch.randint(10, 21, (BATCH,), generator=g) + 1  # mean ~15 pieces + EOS
    s, t = int(src_len.max()), int(tgt_len.max())
    src_mask = torch.arange(s)[None] < src_len[:, None]
    src = torch.randint(4, VOCAB, (BATCH, s), generator=g).masked_fill(
        ~src_mask, PAD_ID
    )
    src[torch.arange(BATCH), src_len - 1] = EOS_ID
    tgt_mask = torch.arange(t)[None] < tgt_len[:, None]
    body = torch.randint(4, VOCAB, (BATCH, t), generator=g)
    tgt_out = body.masked_fill(~tgt_mask, PAD_ID)
    tgt_out[torch.arange(BATCH), tgt_len - 1] = EOS_ID
    tgt_in = torch.cat([torch.full((BATCH, 1), BOS_ID), body[:, :-1]], dim=1)
    tgt_in = tgt_in.masked_fill(~tgt_mask, PAD_ID)
    batch = {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out}
    batch = {k: v.to(device) for k, v in batch.items()}
    batch["src_lengths"] = src_len  # stays on CPU
    return batch


def timed(fn: Callable[[], object], iters: int, warmup: int, device) -> float:
    """Median seconds of ``fn`` over ``iters`` runs after ``warmup`` runs."""
    times = []
    for i in range(warmup + iters):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_variant(spec: tuple) -> dict:
    """Benchmark one variant in this (fresh) process."""
    (attention, style, feeding), device_name, threads, iters = spec
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    cfg = ModelConfig()
    cfg.attention.type, cfg.decoder.style, cfg.decoder.input_feeding = (
        attention,
        style,
        feeding,
    )
    torch.manual_seed(0)
    model = build_model(cfg, VOCAB, VOCAB).to(device)
    b = make_batch(device)
    n_tokens = int((b["tgt_out"] != PAD_ID).sum())
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def train_step() -> None:
        with amp:
            out = model(b["src"], b["src_lengths"], b["src_mask"], b["tgt_in"])
            loss = F.cross_entropy(
                out.logits.flatten(0, 1).float(),
                b["tgt_out"].flatten(),
                ignore_index=PAD_ID,
                label_smoothing=0.1,
            )
        model.zero_grad(set_to_none=True)
        loss.backward()

    model.train()
    train_s = timed(train_step, iters, 2, device)
    args = (b["src"], b["src_lengths"], b["src_mask"])
    dec_iters = max(1, iters // 2)
    with amp:
        greedy_s = timed(lambda: greedy_search(model, *args), dec_iters, 1, device)
        beam_s = timed(
            lambda: beam_search(model, *args, DecodeConfig(beam_size=5)),
            dec_iters,
            1,
            device,
        )
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB → MiB
    return {
        "device": device_name,
        "attention": attention,
        "style": style,
        "feed": "on" if feeding else ("off" if style == "luong" else "-"),
        "train tok/s": n_tokens / train_s,
        "peak MiB": peak,
        "greedy sent/s": BATCH / greedy_s,
        "beam5 sent/s": BATCH / beam_s,
    }


COLUMNS = {  # name: width
    "device": 6,
    "attention": 13,
    "style": 8,
    "feed": 4,
    "train tok/s": 11,
    "peak MiB": 8,
    "greedy sent/s": 13,
    "beam5 sent/s": 12,
}


def print_header() -> None:
    print(" | ".join(c.ljust(w) for c, w in COLUMNS.items()))
    print("-+-".join("-" * w for w in COLUMNS.values()), flush=True)


def print_row(row: dict) -> None:
    cells = [f"{v:.0f}" if isinstance(v, float) else str(v) for v in row.values()]
    print(" | ".join(x.rjust(w) for x, w in zip(cells, COLUMNS.values(), strict=True)))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--iters", type=int, default=5, help="timed iterations")
    parser.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="auto: CPU, and CUDA as well when present",
    )
    parser.add_argument("--quick", action="store_true", help="3 variants, 2 iterations")
    args = parser.parse_args()
    devices = ["cpu"] if args.device != "cuda" else []
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        devices.append("cuda")
    iters = 2 if args.quick else args.iters
    specs = [(v, d, args.threads, iters) for d in devices for v in variants(args.quick)]
    print(
        f"batch {BATCH} sentences, vocab {VOCAB}, emb 256, enc 2x256 bi-GRU, dec 512; "
        f"threads {args.threads}, median of {iters} (decoding: {max(1, iters // 2)})"
    )
    ctx = multiprocessing.get_context("spawn")
    print_header()
    for spec in specs:  # one fresh process per variant: clean memory peaks
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            print_row(pool.submit(run_variant, spec).result())


if __name__ == "__main__":
    main()
