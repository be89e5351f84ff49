"""Show where a trained model looked: force-decode, then render or export attention.

Attention weights describe how the model mixed the source states; they are not a causal
explanation of its output (see ``ATTENTION_CAVEAT``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from seq2seq.align_export import emit, merged, pharaoh_line, write_files
from seq2seq.attribution import model_attribution, spearman
from seq2seq.data.batching import collate
from seq2seq.data.prepare import EncodedSplit
from seq2seq.data.tokenizer import EOS_ID, Tokenizer
from seq2seq.evaluate import head, translate_split
from seq2seq.inference import (
    decode_settings,
    encode_corpus_split,
    encode_texts,
    load_model,
)
from seq2seq.runtime import select_device
from seq2seq.visualize import (
    ATTENTION_CAVEAT,
    alignment_terminal,
    figure_to_png,
    plot_alignment,
    plot_comparison,
    plot_heads,
)

log = logging.getLogger(__name__)

FORMATS = ("png", "html", "terminal", "pharaoh", "json", "npy")


@dataclass
class Attention:
    """One sentence's attention: weights (T, S), per-head (heads, T, S) or None.

    Rows are target tokens (the end-of-sentence row last), columns source tokens (the
    source's end-of-sentence last).
    """

    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    heads: np.ndarray | None = None
    gold: str | None = None
    attribution: np.ndarray | None = None  # gradient × input, (T, S) like weights
    spearman: float | None = None  # rank correlation of weights and attribution
    title: str = ""


@torch.inference_mode()
def force_decode(
    model, tokenizer: Tokenizer, src_ids: list[int], tgt_ids: list[int], device
) -> Attention:
    """Attention of the model reading ``src_ids`` while producing ``tgt_ids``.

    ``tgt_ids`` may end with EOS (a hypothesis) or not (a reference); the EOS row is
    always included. Force-decoding the model's own hypothesis reproduces the search's
    attention and also gives the per-head weights of multi-head models.
    """
    tgt_ids = list(tgt_ids[:-1] if tgt_ids and tgt_ids[-1] == EOS_ID else tgt_ids)
    model.eval()
    batch = collate([(0, list(src_ids), tgt_ids)]).to(device)
    out = model(batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in)
    heads = out.head_attention
    return Attention(
        src_tokens=[*tokenizer.src_pieces(list(src_ids)), "</s>"],
        tgt_tokens=[*tokenizer.tgt_pieces(tgt_ids), "</s>"],
        weights=out.attention[0].float().cpu().numpy(),
        heads=heads[0].float().cpu().numpy() if heads is not None else None,
    )


def alignment_figure(att: Attention, title: str | None = None):
    """Heatmap(s) of one sentence: per head, or beside its attribution when given."""
    title = title or att.title or None
    if att.attribution is not None:
        return plot_comparison(
            att.weights, att.attribution, att.src_tokens, att.tgt_tokens, title=title
        )
    if att.heads is not None:
        return plot_heads(att.heads, att.src_tokens, att.tgt_tokens, title=title)
    return plot_alignment(att.weights, att.src_tokens, att.tgt_tokens, title=title)


def save_alignment_pictures(model, data, cfg, device, folder: Path) -> Path:
    """PNG heatmaps of the first ``trainer.alignment_samples`` validation sentences."""
    split = data.splits["validation"]
    n = min(max(cfg.trainer.alignment_samples, 1), len(split.src_ids))
    subset_ids = split.src_ids[:n]
    hyps = translate_split(
        model, head(split, n), cfg.decode, device, cfg.data.batch_tokens
    )
    folder.mkdir(parents=True, exist_ok=True)
    for i, (src, hyp) in enumerate(zip(subset_ids, hyps, strict=True)):
        att = force_decode(model, data.tokenizer, src, hyp.tokens, device)
        (folder / f"valid_{i}.png").write_bytes(figure_to_png(alignment_figure(att)))
    return folder


def _sentences(
    cfg: DictConfig, tok: Tokenizer, data_cfg
) -> tuple[EncodedSplit, list[str]]:
    """The pairs to show (text or split selection) and a title for each."""
    if cfg.text is not None:
        refs = [cfg.reference] if cfg.reference is not None else None
        return encode_texts(tok, [cfg.text], refs), ["text"]
    if cfg.split is None:
        raise ValueError('give text="..." or split=NAME (optionally index=[...])')
    full = encode_corpus_split(data_cfg, tok, cfg.split)
    n = len(full.src_ids)
    indices = list(range(n)) if cfg.index is None else list(cfg.index)
    bad = [i for i in indices if not 0 <= i < n]
    if bad:
        raise IndexError(f"index {bad} out of range: split {cfg.split!r} has {n} pairs")
    return _select(full, indices), [f"{cfg.split} {i}" for i in indices]


def collect(cfg: DictConfig, loaded, device) -> list[Attention]:
    """The sentences the user asked for, decoded or forced to their references.

    Gold links are attached only when the references are forced: their indices count
    the reference's words, not a hypothesis's.
    """
    tok = loaded.tokenizer
    split, titles = _sentences(cfg, tok, loaded.config.data)
    forced = cfg.reference is not None or (cfg.split is not None and cfg.references)
    if forced:
        targets = split.tgt_ids
    else:
        decode = decode_settings(loaded.config.decode, beam_size=cfg.beam_size)
        hyps = translate_split(loaded.model, split, decode, device, batch_tokens=4096)
        targets = [h.tokens for h in hyps]
    gold = split.alignment if forced and cfg.text is None else None
    out = []
    for i, (src, tgt) in enumerate(zip(split.src_ids, targets, strict=True)):
        att = force_decode(loaded.model, tok, src, tgt, device)
        att.gold = gold[i] if gold else None
        att.title = titles[i]
        if cfg.attribution:
            attr = model_attribution(loaded.model, src, tgt, device)
            att.attribution = attr.cpu().numpy()
            att.spearman = spearman(att.weights, att.attribution)
        out.append(att)
    return out


def _select(split: EncodedSplit, indices: list[int]) -> EncodedSplit:
    return EncodedSplit(
        src_text=[split.src_text[i] for i in indices],
        tgt_text=[split.tgt_text[i] for i in indices],
        src_ids=[split.src_ids[i] for i in indices],
        tgt_ids=[split.tgt_ids[i] for i in indices],
        alignment=[split.alignment[i] for i in indices] if split.alignment else None,
    )


def run_align(cfg: DictConfig, run_dir: Path) -> Path | None:
    """``seq2seq-align``: render or export the attention of the requested sentences."""
    if cfg.format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {cfg.format!r}")
    device = select_device(cfg.device)
    loaded = load_model(cfg.checkpoint, device)
    items = collect(cfg, loaded, device)
    print(ATTENTION_CAVEAT)
    for att in items:
        if att.spearman is not None:
            rho = att.spearman
            print(f"{att.title}: Spearman rho(attention, attribution) = {rho:.3f}")
    if cfg.merge_subwords and not (cfg.format == "pharaoh" and cfg.words):
        items = [merged(a) for a in items]  # words=true regroups the pieces itself
    if cfg.format == "pharaoh":
        lines = [pharaoh_line(a, cfg.words, cfg.shifted, cfg.threshold) for a in items]
        return emit(cfg, run_dir, "alignments.txt", "".join(x + "\n" for x in lines))
    if cfg.format == "terminal":
        for att in items:
            print(att.title)
            print(alignment_terminal(att.weights, att.src_tokens, att.tgt_tokens))
            if att.attribution is not None:
                print("attribution (gradient x input):")
                print(
                    alignment_terminal(att.attribution, att.src_tokens, att.tgt_tokens)
                )
        return None
    return write_files(cfg, run_dir, items, alignment_figure)
