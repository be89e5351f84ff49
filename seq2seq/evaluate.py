"""Translate a split or a file and score it with sacreBLEU (BLEU, chrF, signatures).

Shared by the trainer and the ``seq2seq-evaluate`` / ``seq2seq-translate`` commands; the
model is only ever used through ``forward`` and ``translate_batch``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq.data.batching import make_loader
from seq2seq.data.prepare import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.inference import (
    decode_settings,
    encode_corpus_split,
    encode_texts,
    load_model,
)
from seq2seq.loss import token_loss
from seq2seq.metrics import Scores, score
from seq2seq.model.search import Hypothesis, translate_batch
from seq2seq.runtime import autocast, resolve_precision, select_device

log = logging.getLogger(__name__)


@torch.inference_mode()
def split_loss(model, split: EncodedSplit, batch_tokens: int, device, amp_dtype=None):
    """Mean per-token cross-entropy (no smoothing) of a split under teacher forcing."""
    model.eval()
    total, tokens = torch.zeros((), device=device), 0
    batches = make_loader(split, batch_tokens, shuffle=False, seed=0, sort_by="target")
    for batch in batches:
        batch = batch.to(device, non_blocking=True)
        with autocast(device, amp_dtype):
            out = model(
                batch.src,
                batch.src_lengths,
                batch.src_mask,
                batch.tgt_in,
                rows=batch.tgt_rows,
            )
        total += token_loss(out.logits, batch.flat_targets())
        tokens += batch.n_tokens
    return float(total) / max(tokens, 1)


@torch.inference_mode()
def translate_split(
    model,
    split: EncodedSplit,
    decode_cfg,
    device: torch.device,
    batch_tokens: int,
    amp_dtype=None,
) -> list[Hypothesis]:
    """The best hypothesis for every pair of ``split``, in the split's order."""
    model.eval()
    best: list[Hypothesis | None] = [None] * len(split.src_ids)
    for batch in make_loader(split, batch_tokens=batch_tokens, shuffle=False, seed=0):
        batch = batch.to(device, non_blocking=True)
        with autocast(device, amp_dtype):
            nbests = translate_batch(model, batch, decode_cfg)
        for index, nbest in zip(batch.ids.tolist(), nbests, strict=True):
            best[index] = nbest[0]
    return best  # type: ignore[return-value]


def head(split: EncodedSplit, n: int | None) -> EncodedSplit:
    """The first ``n`` pairs of a split (all when n is None)."""
    if n is None or n >= len(split.src_ids):
        return split
    return EncodedSplit(
        src_text=split.src_text[:n],
        tgt_text=split.tgt_text[:n],
        src_ids=split.src_ids[:n],
        tgt_ids=split.tgt_ids[:n],
        alignment=split.alignment[:n] if split.alignment is not None else None,
    )


def detokenize(tokenizer: Tokenizer, hyps: list[Hypothesis]) -> list[str]:
    return [tokenizer.decode_tgt(h.tokens) for h in hyps]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def evaluate_checkpoint(cfg: DictConfig, run_dir: Path) -> Scores:
    """``seq2seq-evaluate``: translate a split, print BLEU/chrF, write hypotheses.

    ``data=...`` overrides (merged onto the checkpoint's corpus settings) evaluate the
    same model on another corpus or folder; the checkpoint's tokenizer is reused.
    """
    device = select_device(cfg.device)
    loaded = load_model(cfg.checkpoint, device)
    data_cfg = loaded.config.data
    if cfg.data is not None:
        data_cfg = OmegaConf.merge(data_cfg, cfg.data)
    split = encode_corpus_split(data_cfg, loaded.tokenizer, cfg.split)
    decode = decode_settings(
        loaded.config.decode, cfg.beam_size, cfg.length_penalty, cfg.stop
    )
    batch_tokens = cfg.batch_tokens or data_cfg.batch_tokens
    amp = resolve_precision(cfg.precision, device)
    hyps = translate_split(loaded.model, split, decode, device, batch_tokens, amp)
    texts = detokenize(loaded.tokenizer, hyps)
    scores = score(texts, split.tgt_text, lowercase=cfg.lowercase)
    out = write_lines(run_dir / "hyps" / f"{cfg.split}.txt", texts)
    print(
        f"{cfg.checkpoint} (step {loaded.step}) on {data_cfg.name} "
        f"{data_cfg.src_lang}->{data_cfg.tgt_lang} {cfg.split} "
        f"({len(texts)} sentences, beam {decode.beam_size})"
    )
    print(scores.summary())
    if cfg.alignment:
        print_alignment_scores(loaded, split, batch_tokens, device)
    print(f"hypotheses: {out}")
    return scores


def print_alignment_scores(loaded, split: EncodedSplit, batch_tokens, device) -> None:
    """AER of the attention, force-decoding the references (``alignment=true``)."""
    from seq2seq.alignment_error import alignment_scores

    result = alignment_scores(
        loaded.model, loaded.tokenizer, split, batch_tokens, device
    )
    if result is None:
        print("AER: this corpus has no gold alignments (no `alignment` column)")
    else:
        print(result.summary())


def read_input(path: str | None) -> list[str]:
    if path is None:
        return [line.rstrip("\n") for line in sys.stdin]
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid UTF-8 ({err})") from err


def translate_lines(
    loaded, lines: list[str], decode, device, max_pieces: int, amp_dtype=None
) -> list[str]:
    """Translate each line; empty lines stay empty, over-long ones are truncated."""
    keep = [i for i, line in enumerate(lines) if line.strip()]
    split = encode_texts(loaded.tokenizer, [lines[i].strip() for i in keep])
    for row, ids in enumerate(split.src_ids):
        if len(ids) > max_pieces:
            log.warning(
                "line %d has %d pieces: translating only the first %d "
                "(translate.max_input_pieces)",
                keep[row] + 1,
                len(ids),
                max_pieces,
            )
            split.src_ids[row] = ids[:max_pieces]
    out = [""] * len(lines)
    if keep:
        hyps = translate_split(
            loaded.model, split, decode, device, 8192, amp_dtype=amp_dtype
        )
        for i, text in zip(keep, detokenize(loaded.tokenizer, hyps), strict=True):
            out[i] = text
    return out


def translate_file(cfg: DictConfig) -> list[str]:
    """``seq2seq-translate``: stdin or ``input=FILE`` in, one line out per line in."""
    device = select_device(cfg.device)
    loaded = load_model(cfg.checkpoint, device)
    decode = decode_settings(
        loaded.config.decode, cfg.beam_size, cfg.length_penalty, cfg.stop
    )
    lines = read_input(cfg.input)
    amp = resolve_precision(cfg.precision, device)
    out = translate_lines(loaded, lines, decode, device, cfg.max_input_pieces, amp)
    if cfg.output:
        write_lines(Path(cfg.output), out)
    else:
        sys.stdout.write("".join(line + "\n" for line in out))
        sys.stdout.flush()
    return out
