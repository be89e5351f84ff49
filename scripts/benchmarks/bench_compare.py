"""seq2seq next to JoeyNMT and OpenNMT-py: training tok/s, memory, decoding speed.

One run, the same data, model and thread count for every system, run one after the
other (``--rounds`` alternates them): the reference model (emb 256, bi-GRU 1 layer ×
2×256, GRU decoder 512, bridge, dropout 0.2, vocabulary from the shared joint unigram
8k SentencePiece model, Adam 1e-3, clip 5, ~64 sentences per batch) with additive
attention (``--attention luong`` for Luong general with input feeding). seq2seq runs
once per ``--precision``: ``fp32`` like the peers, and ``bf16`` (``trainer.precision=
bf16``: CPU autocast, bf16 matmuls, fp32 weights, optimizer and loss) as a second row.

- seq2seq trains on the harness's pieces ``$PEERS_ROOT/data/{train,valid}.sp.{de,en}``
  (ids = 4 specials + the SentencePiece ids), batched by our length-bucketed token
  sampler; without the harness it trains its own joint unigram 8k model on
  ``--corpus`` (equivalent). Tok/s: target pieces + EOS per second, the median of
  windows of ``--window`` steps after ``--warmup`` steps, in a fresh process. Its peak
  RSS is taken when training ends, like the peers' (their decoding runs in other
  processes); the peak after decoding as well is printed beside it.
- Peers: ``run.py throughput joey|onmt`` of ``../shared/bench/peers`` (same
  warm-up and step count); their decoding is timed with their own CLIs on the 1,014
  validation sentences (max. 100 pieces, batches of 64, like ours), with the model
  that run saved (``n/a`` when it cannot be), minus the CLI's start-up (timed on a
  one-sentence file).
- Decoding speed follows output length: after a few hundred steps a model writes
  outputs of arbitrary length, so ``--steps`` should be large enough (600: about
  25 BLEU) for the decoding columns to mean something. The decoding table prints
  BLEU and mean output length in words beside each speed, so that like is compared
  with like. All systems decode with their model after warm-up + ``--steps`` steps.
- Matmul utilisation: FLOPs of the model's matmuls per target token (``flops_per_token``
  below, ×3 for a training step) × tok/s ÷ the fp32 ``torch.matmul`` rate measured here
  (the bf16 row: ÷ the bf16 rate, its own hardware limit; both are printed). The last
  line is that of the last precision listed (bf16 by default), with ``precision=``
  and ``beam5_best_vs_joeynmt=`` (our beam 5 with ``decode.stop=best``, the peers'
  stop rule), then ``greedy_vs_opennmt=``, ``beam5_vs_opennmt=`` and
  ``beam5_best_vs_opennmt=`` (decoding sent/s against OpenNMT-py's) appended; the
  line before it is fp32's, the peers' precision.

- ``--race CKPT …``: the decoding race on trained models instead. Our checkpoints
  (the reference model trained for the peers' budget, a recipe's model) decode with
  their default settings (``Translator.translate``, fresh processes), the peers'
  models of ``run.py bleu … --budget`` with their CLIs, ``--peer-batch`` sentences a
  batch, on ``--peer-repeat`` copies of the validation set (so that their decoding
  outweighs the start-up subtracted from it); ``--rounds`` alternate them. The
  table gives sent/s, BLEU and words per search; the last line is the first
  checkpoint's ratios against OpenNMT-py and JoeyNMT (``n/a`` for a peer without a
  model). ``--vocab auto,fp32`` decodes each checkpoint with each vocabulary
  precision (``decode.vocab_precision``; the first makes the last line).

    # all; --no-peers: ours only; --steps 600: decoding means something
    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_compare.py
    # the decoding race on trained models
    flock /tmp/seq2seq-cpu.lock python scripts/benchmarks/bench_compare.py --race \\
        runs/race_ref/checkpoints/best.pt --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
# The peers' harness beside the checkout (../shared/bench/peers), or PEERS_HARNESS.
PEERS = Path(os.environ.get("PEERS_HARNESS", ROOT.parent / "shared/bench/peers"))
PEERS_ROOT = Path(os.environ.get("PEERS_ROOT", Path.home() / ".cache/seq2seq-peers"))
DATA = PEERS_ROOT / "data"
MODEL = {"emb": 256, "enc": 256, "dec": 512, "vocab": 8004}
MEDIAN_KEYS = (  # over --rounds; the peers have no beam5_best
    "train_tok_s",
    "greedy_sent_s",
    "beam5_sent_s",
    "beam5_best_sent_s",
    "peak_rss_mb",
)


def flops_per_token(att: str, src_per_tgt: float, s_mean: float) -> float:
    """Forward matmul FLOPs per target token (2 per multiply-add), reference model.

    Encoder (per source token, ×src_per_tgt): GRU gates of both directions
    2 · 2·3He(E + He); keys 2·2He·Hd. Decoder per target token: GRU gates
    2·3Hd(E + X + Hd) with X = C (Bahdanau context) or Hd (Luong feed); query
    projection 2·Hd·Hd (additive only); scores + read 2·S·Hd + 2·S·C; deep output
    2·Hd(Hd + C + E) (Bahdanau) or attentional layer 2·Hd(C + Hd) (Luong); vocabulary
    projection 2·Hd·V."""
    e, he, hd, v = MODEL["emb"], MODEL["enc"], MODEL["dec"], MODEL["vocab"]
    c = 2 * he
    enc = 2 * 2 * 3 * he * (e + he) + 2 * c * hd
    if att == "bahdanau":
        dec = 2 * 3 * hd * (e + c + hd) + 2 * hd * hd + 2 * hd * (hd + c + e)
    else:
        dec = 2 * 3 * hd * (e + hd + hd) + 2 * hd * (c + hd)
    dec += 2 * s_mean * hd + 2 * s_mean * c + 2 * hd * v
    return enc * src_per_tgt + dec


def matmul_rate(
    m: int, k: int, n: int, seconds: float = 1.0, dtype: torch.dtype = torch.float32
) -> float:
    """``torch.matmul`` FLOP/s for (m×k)·(k×n) in ``dtype``, median of repeated runs."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    a @ b
    rates, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 3:
        t0 = time.perf_counter()
        a @ b
        rates.append(2 * m * k * n / (time.perf_counter() - t0))
    return statistics.median(rates)


# ---------------------------------------------------------------- our system (worker)
def load_split(split: str, tok):
    """EncodedSplit from the harness's pieces (ids + 4), or from our tokenizer."""
    from seq2seq.data.splits import EncodedSplit
    from seq2seq.data.tokenizer import UNK_ID

    if tok is None:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(DATA / "spm.model"))

        def ids(lang: str) -> list[list[int]]:
            lines = (DATA / f"{split}.sp.{lang}").read_text().splitlines()
            return [
                [sp.piece_to_id(p) + 4 if sp.piece_to_id(p) else UNK_ID for p in ln]
                for ln in (line.split() for line in lines)
            ]

        src, tgt = ids("de"), ids("en")
    else:
        src_text, tgt_text = tok["texts"][split]
        src, tgt = tok["tok"].encode_src(src_text), tok["tok"].encode_tgt(tgt_text)
        if split == "train":
            keep = [i for i in range(len(src)) if 0 < len(src[i]) <= 50 >= len(tgt[i])]
            src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    return EncodedSplit([""] * len(src), [""] * len(tgt), src, tgt)


def own_tokenizer(corpus: Path) -> dict:
    """Joint unigram 8k SentencePiece on train de+en (when the harness is absent)."""
    from seq2seq.data.tokenizer import Tokenizer

    texts = {}
    for split, name in (("train", "train"), ("valid", "validation")):
        rows = [json.loads(x) for x in (corpus / f"{name}.jsonl").open()]
        texts[split] = ([r["de"] for r in rows], [r["en"] for r in rows])
    tok = Tokenizer.train(*texts["train"], 8000, "unigram", True, 1.0, 42)
    return {"tok": tok, "texts": texts}


def worker(args) -> dict:
    """Train ``warmup + steps`` steps, then time greedy and beam-5 decoding."""
    from omegaconf import OmegaConf

    from seq2seq.config import ModelConfig
    from seq2seq.data.batching import make_loader
    from seq2seq.decoding.search import beam_search, greedy_search
    from seq2seq.model.device import autocast, resolve_precision
    from seq2seq.model.loss import token_loss
    from seq2seq.model.seq2seq import build_model
    from seq2seq.training.optim import build_optimizer

    torch.set_num_threads(args.threads)
    amp = resolve_precision(args.worker, torch.device("cpu"))
    torch.manual_seed(42)
    tok = None if (DATA / "train.sp.en").exists() else own_tokenizer(args.corpus)
    train, valid = load_split("train", tok), load_split("valid", tok)
    cfg = ModelConfig()
    cfg.encoder.layers = 1  # the peers' encoder: one bidirectional layer
    cfg.attention.type = "bahdanau" if args.attention == "bahdanau" else "luong_general"
    cfg.decoder.style = "bahdanau" if args.attention == "bahdanau" else "luong"
    model = build_model(cfg, MODEL["vocab"], MODEL["vocab"])
    adam = {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "weight_decay": 0.0}
    opt = build_optimizer(OmegaConf.create(adam), model)  # the trainer's (fused) Adam
    loader = make_loader(
        train, args.batch_tokens, shuffle=True, seed=42, sort_by="target"
    )
    rates, sents, tokens, start, step = [], [], 0, 0.0, 0
    model.train()
    while len(rates) * args.window < args.steps:
        for batch in loader:
            with autocast(torch.device("cpu"), amp):
                out = model(  # as the trainer: logits at the non-pad targets only
                    batch.src,
                    batch.src_lengths,
                    batch.src_mask,
                    batch.tgt_in,
                    rows=batch.tgt_rows,
                )
                loss = token_loss(out.logits, batch.flat_targets(), 0.0)
            (loss / batch.n_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            sents.append(batch.src.size(0))
            if step == args.warmup:
                start, tokens = time.perf_counter(), 0
            elif step > args.warmup:
                tokens += batch.n_tokens
                if (step - args.warmup) % args.window == 0:
                    now = time.perf_counter()
                    rates.append(tokens / (now - start))
                    start, tokens = now, 0
                    if len(rates) * args.window >= args.steps:
                        break
    res = {"train_tok_s": statistics.median(rates), "windows": rates}
    res["sent_per_batch"] = statistics.mean(sents)
    # Training peak, comparable with the peers' (their throughput runs only train).
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["trained_steps"] = step
    if args.keep_models:
        args.keep_models.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.keep_models / f"seq2seq-{args.worker}.pt")
    order = sorted(range(len(valid.src_ids)), key=lambda i: len(valid.src_ids[i]))
    from seq2seq.data.batching import collate

    chunks = [order[i : i + 64] for i in range(0, len(order), 64)]
    batches = [
        collate([(i, valid.src_ids[i], valid.tgt_ids[i]) for i in c]) for c in chunks
    ]
    detok = target_detokenizer(tok)
    searches = (
        ("greedy", greedy_search, {}),
        ("beam5", beam_search, {"beam_size": 5}),  # our default stop rule (exact)
        ("beam5_best", beam_search, {"beam_size": 5, "stop": "best"}),  # the peers'
    )
    for name, fn, kw in searches:
        hyps = []
        t0 = time.perf_counter()
        for b in batches:
            with autocast(torch.device("cpu"), amp):
                out = fn(
                    model,
                    b.src,
                    b.src_lengths,
                    b.src_mask,
                    max_len_a=0,
                    max_len_b=100,
                    **kw,
                )
            hyps += [h[0] if isinstance(h, list) else h for h in out]
        res[f"{name}_sent_s"] = len(order) / (time.perf_counter() - t0)
        texts = [""] * len(order)
        for i, h in zip(order, hyps, strict=True):
            texts[i] = detok(h.tokens)
        res[f"{name}_quality"] = quality(texts, valid_references(tok))
    res["decode_peak_rss_mb"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    res["data"] = "harness pieces" if tok is None else "own joint unigram 8k"
    src_t = sum(len(s) + 1 for s in train.src_ids)
    res["src_per_tgt"] = src_t / sum(len(t) + 1 for t in train.tgt_ids)
    res["s_mean"] = src_t / len(train.src_ids)
    return res


def target_detokenizer(tok):
    """Our target ids → text (the harness's pieces are SentencePiece ids + 4)."""
    from seq2seq.data.tokenizer import EOS_ID, UNK_ID

    if tok is not None:
        return tok["tok"].decode_tgt
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(DATA / "spm.model"))

    def detok(ids: list[int]) -> str:
        kept = []
        for i in ids:
            if i == EOS_ID:
                break
            if i == UNK_ID:
                kept.append(sp.unk_id())
            elif i >= 4:  # PAD and BOS (0, 2) are dropped
                kept.append(i - 4)
        return sp.decode(kept)

    return detok


def valid_references(tok) -> list[str]:
    if tok is not None:
        return tok["texts"]["valid"][1]
    return (DATA / "valid.en").read_text().splitlines()


def quality(texts: list[str], refs: list[str]) -> dict:
    """Cased sacreBLEU and the mean output length in words: decoding speed follows
    output length, so the speed columns compare only with these beside them."""
    import sacrebleu

    return {
        "bleu": sacrebleu.corpus_bleu(texts, [refs]).score,
        "words": statistics.mean(len(t.split()) for t in texts),
    }


# ---------------------------------------------------------------- peers (harness)
def peer_env() -> dict:
    env = dict(
        os.environ, PEERS_ROOT=str(PEERS_ROOT), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"
    )
    env.update(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", CUDA_VISIBLE_DEVICES="")
    return env


def timed_cmd(cmd: list, log: Path) -> float:
    t0 = time.perf_counter()
    with log.open("w") as f:
        subprocess.run(
            list(map(str, cmd)),
            stdout=f,
            stderr=subprocess.STDOUT,
            env=peer_env(),
            check=True,
        )
    return time.perf_counter() - t0


def peer_checkpoint(tk: str, run: Path) -> Path | None:
    """The newest checkpoint of a harness run (by step number, not by name)."""
    if tk == "onmt":
        ckpts = sorted(run.glob("model_step_*.pt"), key=lambda q: int(q.stem[11:]))
    else:
        ckpts = sorted((run / "model").glob("[0-9]*.ckpt"), key=lambda q: int(q.stem))
    return ckpts[-1] if ckpts else None


def peer_decode_cmd(
    tk: str, run: Path, ckpt: Path, beam: int, src: Path, batch: int = 64
) -> list:
    """The peer's own CLI decoding ``src.de`` (pieces) into ``run/hyp<beam>``, in
    batches of ``batch`` sentences."""
    venv = PEERS_ROOT / "venvs" / tk / "bin"
    if tk == "onmt":
        return [
            venv / "onmt_translate",
            "-model",
            ckpt,
            "-src",
            f"{src}.de",
            "-output",
            run / f"hyp{beam}",
            "-beam_size",
            beam,
            "-batch_size",
            batch,
            "-max_length",
            100,
            "-gpu",
            -1,
        ]
    cfg = (run / "config.yaml").read_text()
    cfg = cfg.replace("testing:\n", f'testing:\n    load_model: "{ckpt}"\n', 1)
    cfg = cfg.replace("beam_size: 1 ", f"beam_size: {beam} ")
    cfg = cfg.replace("batch_size: 64", f"batch_size: {batch}")
    # joeynmt test decodes its dev and test sets: both are ``src`` here
    for split in ("valid", "test"):
        cfg = cfg.replace(f'"{DATA}/{split}.sp"', f'"{src}"')
    (run / f"test{beam}.yaml").write_text(cfg)
    return [
        venv / "python",
        "-m",
        "joeynmt",
        "test",
        run / f"test{beam}.yaml",
        "-o",
        run / f"hyp{beam}",
    ]


def peer_decode(
    tk: str, run: Path, beam: int, batch: int = 64, repeat: int = 1
) -> tuple[float | None, dict | None]:
    """Sentences/s of the peer's own CLI on the validation set (``repeat`` copies of
    it in one file), and the quality of its output (the first copy). The CLI's
    start-up (Python, imports, model load) is timed on a one-sentence file and
    subtracted, so the figure is its decoding alone; ``repeat`` makes the decoding
    outweigh the start-up, whose own noise otherwise moves the rate."""
    ckpt = peer_checkpoint(tk, run)
    if ckpt is None:
        return None, None
    one = run / "one.sp"
    for lang in ("de", "en"):
        first = (DATA / f"valid.sp.{lang}").read_text().splitlines()[0]
        Path(f"{one}.{lang}").write_text(first + "\n")
    copies = 1 if tk == "onmt" else 2  # joeynmt decodes the file twice
    refs = (DATA / "valid.en").read_text().splitlines()
    src = DATA / "valid.sp"
    if repeat > 1:
        src = run / f"valid_x{repeat}.sp"
        for lang in ("de", "en"):
            text = (DATA / f"valid.sp.{lang}").read_text()
            Path(f"{src}.{lang}").write_text(text * repeat)
    try:
        start_up = timed_cmd(
            peer_decode_cmd(tk, run, ckpt, beam, one, batch),
            run / f"decode{beam}_one.log",
        )
        full = timed_cmd(
            peer_decode_cmd(tk, run, ckpt, beam, src, batch),
            run / f"decode{beam}.log",
        )
    except subprocess.CalledProcessError as err:
        print(f"{tk} beam {beam} decoding failed: {err}", file=sys.stderr)
        return None, None
    hyp = run / (f"hyp{beam}" if tk == "onmt" else f"hyp{beam}.dev")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(DATA / "spm.model"))
    lines = hyp.read_text().splitlines()[: len(refs)]
    texts = [sp.decode_pieces(ln.split()) for ln in lines]
    rate = copies * repeat * len(refs) / max(full - start_up, 1e-9)
    return rate, quality(texts, refs)


def peer(tk: str, args) -> dict:
    """The harness's throughput run, and decoding with the model it saved."""
    att = "bahdanau" if args.attention == "bahdanau" else "luong"
    cmd = [
        sys.executable,
        PEERS / "run.py",
        "throughput",
        tk,
        "--attention",
        att,
        "--warmup",
        args.warmup,
        "--steps",
        args.steps,
    ]
    timed_cmd(cmd, PEERS_ROOT / f"bench_compare_{tk}.log")
    r = json.loads((PEERS_ROOT / f"results/{tk}_{att}_throughput.json").read_text())
    run = PEERS_ROOT / f"runs/{tk}_{att}_throughput"
    greedy, greedy_q = peer_decode(tk, run, 1)
    beam5, beam5_q = peer_decode(tk, run, 5)
    return {
        "train_tok_s": r["tgt_tok_per_s_data"],
        "peak_rss_mb": r["peak_rss_mb"],
        "sent_per_batch": 64,
        "greedy_sent_s": greedy,
        "beam5_sent_s": beam5,
        "greedy_quality": greedy_q,
        "beam5_quality": beam5_q,
        "trained_steps": args.warmup + args.steps,
    }


def peers_available() -> bool:
    venvs = PEERS_ROOT / "venvs"
    return (
        all((venvs / v / "bin/python").exists() for v in ("joey", "onmt"))
        and (DATA / "train.sp.en").exists()
    )


# ---------------------------------------------------------------- the decoding race
RACE_SEARCHES = (("greedy", 1, None), ("beam5", 5, None), ("beam5_best", 5, "best"))


def own_decode(
    checkpoint: Path, beam: int, stop: str | None, threads: int, vocab: str | None
):
    """Sentences/s of ``Translator.translate`` (tokenize, batch, search, detokenize)
    over the checkpoint's validation split, with its default settings (batch budget,
    stop rule, length limits, vocabulary precision) but ``beam``, ``stop`` and
    ``vocab`` (None: the default); the quality of the output."""
    from seq2seq.data.splits import encode_corpus_split
    from seq2seq.decoding.translator import Translator

    torch.set_num_threads(threads)
    tr = Translator.from_checkpoint(
        checkpoint, device="cpu", beam_size=beam, stop=stop, vocab_precision=vocab
    )
    split = encode_corpus_split(tr.config.data, tr.tokenizer, "validation")
    tr.translate(split.src_text[:64])  # warm-up: allocator, oneDNN caches
    t0 = time.perf_counter()
    texts = tr.translate(split.src_text)
    rate = len(texts) / (time.perf_counter() - t0)
    return rate, quality(texts, split.tgt_text), tr.step, tr.batch_tokens


def race(args) -> None:
    """Decode trained models of each system on the 1,014 validation sentences: ours
    (``--race`` checkpoints, default settings) and the peers' models of ``run.py bleu
    … --budget`` (their CLIs, ``--peer-batch`` sentences per batch). The systems
    alternate within each of ``--rounds`` rounds; speeds are medians."""
    att = "bahdanau" if args.attention == "bahdanau" else "luong"
    systems: dict[str, dict] = {}
    vocabs = args.vocab.split(",") if args.vocab else [None]
    for ckpt, vocab in itertools.product(args.race, vocabs):
        name = f"seq2seq {ckpt.parent.parent.name}"
        name += f", vocab {vocab}" if args.vocab else ""
        systems[name] = {"ckpt": ckpt, "vocab": vocab}
    for tk, name in (("joey", "joeynmt"), ("onmt", "opennmt")):
        run = PEERS_ROOT / f"runs/{tk}_{att}_bleu{args.budget}s"
        ckpt = peer_checkpoint(tk, run) if run.exists() else None
        if ckpt is None:
            print(
                f"{name}: no model under {run} (python3 run.py bleu {tk} "
                f"--budget {args.budget})",
                file=sys.stderr,
            )
            continue
        systems[name] = {"tk": tk, "run": run, "ckpt": ckpt}
    for _ in range(args.rounds):
        for sysm in systems.values():
            for search, beam, stop in RACE_SEARCHES:
                if "tk" in sysm:
                    if stop is not None:
                        continue  # the peers' one beam search is theirs, stop=best
                    rate, q = peer_decode(
                        sysm["tk"], sysm["run"], beam, args.peer_batch, args.peer_repeat
                    )
                    sysm["batch"] = f"{args.peer_batch} sentences"
                    sysm["steps"] = int("".join(filter(str.isdigit, sysm["ckpt"].stem)))
                else:
                    cmd = [
                        sys.executable,
                        __file__,
                        "--own-decode",
                        sysm["ckpt"],
                        "--beam",
                        beam,
                        "--stop",
                        stop or "",
                        "--threads",
                        args.threads,
                        "--vocab",
                        sysm["vocab"] or "",
                    ]
                    out = subprocess.run(
                        list(map(str, cmd)), check=True, capture_output=True, text=True
                    )
                    rate, q, sysm["steps"], budget = json.loads(
                        out.stdout.splitlines()[-1]
                    )
                    sysm["batch"] = f"{budget} tokens"
                sysm.setdefault(f"{search}_rates", []).append(rate)
                sysm[f"{search}_quality"] = q
    print(f"race: {args.rounds} rounds, {args.threads} threads, validation")
    print(race_report(systems, next(iter(systems))))


def race_report(systems: dict[str, dict], ours: str) -> str:
    """The race's table (median sent/s over rounds, BLEU, words per search), then its
    last line: system ``ours``'s decoding ratios against OpenNMT-py and JoeyNMT
    (``n/a`` where a peer has no model)."""
    lines = [
        "| system | steps | batch | "
        + " | ".join(f"{s} sent/s | {s} BLEU | {s} words" for s, *_ in RACE_SEARCHES)
        + " |",
        "|---" * (3 + 3 * len(RACE_SEARCHES)) + "|",
    ]
    for name, sysm in systems.items():
        row = f"| {name} | {fmt(sysm.get('steps'))} | {sysm.get('batch')} |"
        for search, *_ in RACE_SEARCHES:
            rates = [r for r in sysm.get(f"{search}_rates", []) if r is not None]
            sysm[f"{search}_sent_s"] = statistics.median(rates) if rates else None
            q = sysm.get(f"{search}_quality") or {}
            row += (
                f" {fmt(sysm[f'{search}_sent_s'], '.1f')} |"
                f" {fmt(q.get('bleu'), '.2f')} | {fmt(q.get('words'), '.2f')} |"
            )
        lines.append(row)
    lines.append(
        " ".join(
            f"{search}_vs_{peer}="
            + fmt(
                decoding_ratio(systems[ours], systems.get(peer, {}), search, theirs),
                ".2f",
            )
            for peer in ("opennmt", "joeynmt")
            for search, theirs in DECODING_VS_PEERS
        )
    )
    return "\n".join(lines)


# ---------------------------------------------------------------- main
def fmt(x, spec: str = ",.0f") -> str:
    return "n/a" if x is None else format(x, spec)


def ratio(a, b) -> float | None:
    return None if a is None or not b else a / b


def report(results: dict, rates: dict) -> None:
    """The table, then per seq2seq row its utilisation and machine-readable line."""
    ours = [k for k in results if k.startswith("seq2seq")]
    peers = [k for k in results if k not in ours]
    head = "| system | train tok/s | sent/batch | peak RSS MB | greedy sent/s | "
    head += "beam5 sent/s |"
    print(head + "".join(f" tok/s vs {p} | beam5 vs {p} |" for p in peers))
    print("|---" * (6 + 2 * len(peers)) + "|")
    for name, r in results.items():
        row = (
            f"| {name} | {fmt(r['train_tok_s'])} | {fmt(r['sent_per_batch'], '.1f')} | "
            f"{fmt(r['peak_rss_mb'])} | {fmt(r['greedy_sent_s'], '.1f')} | "
            f"{fmt(r['beam5_sent_s'], '.1f')} |"
        )
        for p in peers:
            row += (
                f" {fmt(ratio(r['train_tok_s'], results[p]['train_tok_s']), '.2f')} |"
                f" {fmt(ratio(r['beam5_sent_s'], results[p]['beam5_sent_s']), '.2f')} |"
            )
        print(row)
    print(
        "\n| system | model: steps | greedy sent/s | greedy BLEU | greedy words | "
        "beam5 sent/s | beam5 BLEU | beam5 words | beam5 stop=best sent/s | BLEU | "
        "words |\n" + "|---" * 11 + "|"
    )
    for name, r in results.items():
        row = f"| {name} | {fmt(r.get('trained_steps'))} |"
        for search in ("greedy", "beam5", "beam5_best"):
            q = r.get(f"{search}_quality") or {}
            row += (
                f" {fmt(r.get(f'{search}_sent_s'), '.1f')} |"
                f" {fmt(q.get('bleu'), '.1f')} |"
                f" {fmt(q.get('words'), '.1f')} |"
            )
        print(row)
    for dtype, (big, own) in rates.items():
        print(
            f"matmul {dtype}: 2048³ {big / 1e9:.1f} GFLOP/s, "
            f"model shapes {own / 1e9:.1f} GFLOP/s"
        )
    j, o = results.get("joeynmt", {}), results.get("opennmt", {})
    lines = []
    for name in ours:
        r = results[name]
        fl = 3 * flops_per_token(r["attention"], r["src_per_tgt"], r["s_mean"])
        achieved = fl * r["train_tok_s"]
        util = achieved / rates[r["precision"]][0]  # of its own dtype's rate
        own = "".join(
            f", {achieved / big:.2f} of {dtype} 2048³ and {achieved / sh:.2f} of "
            f"{dtype} model shapes"
            for dtype, (big, sh) in rates.items()
        )
        print(
            f"{name} ({r['precision']}): model {fl / 1e6:.1f} MFLOP per target token "
            f"(training step); achieved {achieved / 1e9:.1f} GFLOP/s{own}; "
            f"windows {[round(x) for x in r['windows']]}, data: {r['data']}; "
            f"peak RSS after training {r['peak_rss_mb']:,.0f} MB (the column), "
            f"after decoding too {r['decode_peak_rss_mb']:,.0f} MB"
        )
        lines.append(
            f"train_tok_s={r['train_tok_s']:.0f} "
            f"vs_joeynmt={fmt(ratio(r['train_tok_s'], j.get('train_tok_s')), '.2f')} "
            f"vs_opennmt={fmt(ratio(r['train_tok_s'], o.get('train_tok_s')), '.2f')} "
            f"matmul_utilisation={util:.2f} "
            "beam5_vs_joeynmt="
            f"{fmt(ratio(r['beam5_sent_s'], j.get('beam5_sent_s')), '.2f')} "
            f"peak_rss_mb={r['peak_rss_mb']:.0f} precision={r['precision']} "
            "beam5_best_vs_joeynmt="
            f"{fmt(ratio(r.get('beam5_best_sent_s'), j.get('beam5_sent_s')), '.2f')} "
            + " ".join(
                f"{ours}_vs_opennmt={fmt(decoding_ratio(r, o, ours, theirs), '.2f')}"
                for ours, theirs in DECODING_VS_PEERS
            )
        )
    print("\n".join(lines))


# Our searches against the peers' (theirs stop when the best hypothesis ends).
DECODING_VS_PEERS = (("greedy", "greedy"), ("beam5", "beam5"), ("beam5_best", "beam5"))


def decoding_ratio(ours: dict, peer: dict, search: str, peer_search: str):
    """Our ``search`` sent/s over the peer's ``peer_search`` (None when missing)."""
    return ratio(ours.get(f"{search}_sent_s"), peer.get(f"{peer_search}_sent_s"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attention", choices=["bahdanau", "luong"], default="bahdanau")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=300, help="timed training steps")
    p.add_argument("--window", type=int, default=25, help="steps per tok/s window")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1, help="alternations (medians)")
    p.add_argument("--batch-tokens", type=int, default=1152, help="~64 sentences")
    p.add_argument("--corpus", type=Path, default=ROOT.parent / "shared/data/multi30k")
    p.add_argument(
        "--precision",
        nargs="+",
        choices=["fp32", "bf16"],
        default=["fp32", "bf16"],
        help="one seq2seq row each; the last one makes the last line",
    )
    p.add_argument(
        "--keep-models",
        type=Path,
        metavar="DIR",
        help="save our trained models there (seq2seq-<precision>.pt state dicts)",
    )
    p.add_argument("--no-peers", action="store_true")
    p.add_argument(
        "--race",
        type=Path,
        nargs="+",
        metavar="CKPT",
        help="the decoding race: these trained checkpoints (the first one makes the "
        "last line) against the peers' models of run.py bleu --budget",
    )
    p.add_argument(
        "--vocab",
        default="",
        help="the race: our vocabulary precisions, e.g. auto,fp32 (default: the "
        "checkpoints' decode.vocab_precision; the first makes the last line)",
    )
    p.add_argument("--budget", type=int, default=1200, help="the peers' bleu runs (s)")
    p.add_argument("--peer-batch", type=int, default=64, help="sentences per batch")
    p.add_argument(
        "--peer-repeat",
        type=int,
        default=4,
        help="the race: copies of the validation set in the peers' input file",
    )
    p.add_argument("--worker", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    p.add_argument("--own-decode", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--stop", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.own_decode:
        out = own_decode(
            args.own_decode,
            args.beam,
            args.stop or None,
            args.threads,
            args.vocab or None,
        )
        print(json.dumps(out))
        return
    if args.race:
        race(args)
        return
    if args.worker:
        extra = {"attention": args.attention, "precision": args.worker}
        print(json.dumps(worker(args) | extra))
        return
    torch.set_num_threads(args.threads)
    use_peers = not args.no_peers and peers_available()
    if not args.no_peers and not use_peers:
        print(
            f"peers not installed under {PEERS_ROOT} (run setup.sh and run.py "
            "prepare): measuring seq2seq only",
            file=sys.stderr,
        )
    runs: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for prec in args.precision:
            cmd = [sys.executable, __file__, *sys.argv[1:], "--worker", prec]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            name = "seq2seq" if prec == "fp32" else f"seq2seq-{prec}"
            runs.setdefault(name, []).append(json.loads(out.stdout.splitlines()[-1]))
        if use_peers:
            runs.setdefault("joeynmt", []).append(peer("joey", args))
            runs.setdefault("opennmt", []).append(peer("onmt", args))
    results = {}
    for name, rs in runs.items():  # medians over rounds
        results[name] = dict(rs[0])
        for key in MEDIAN_KEYS:
            vals = [r[key] for r in rs if r.get(key) is not None]
            results[name][key] = statistics.median(vals) if vals else None
    shapes = [(1000, 512, 8004), (64, 512, 1536), (1000, 256, 768), (64, 512, 512)]
    rates = {}
    for prec in dict.fromkeys(["fp32", *args.precision]):
        dtype = torch.float32 if prec == "fp32" else torch.bfloat16
        big = matmul_rate(2048, 2048, 2048, dtype=dtype)
        own = statistics.mean(matmul_rate(*s, 0.5, dtype) for s in shapes)
        rates[prec] = (big, own)
    report(results, rates)


if __name__ == "__main__":
    main()
