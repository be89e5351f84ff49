"""Validation during training: loss, decoding, BLEU/chrF, AER, heatmaps and samples."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from seq2seq.alignment.error import alignment_scores
from seq2seq.alignment.extract import attention_maps, forced_split
from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.occlusion import attach_occlusion
from seq2seq.alignment.render import alignment_figure
from seq2seq.alignment.views import self_view
from seq2seq.data.prepare import PreparedData
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.scores import score
from seq2seq.decoding.translator import Translator
from seq2seq.training.tracking import Tracker


def validate(
    translator: Translator, data: PreparedData, cfg, tracker: Tracker, step: int
) -> dict:
    """Score the validation split and log it; returns loss, ppl, bleu and chrf (and
    aer, aer_shifted when the corpus has gold alignments).

    The first ``trainer.alignment_samples`` validation sentences are rendered at every
    validation (and each self-attention head's map of them, for a model with
    blocks), so TensorBoard's step slider shows their attention sharpening.
    """
    split = data.splits["validation"]
    loss = translator.loss(split)
    subset = split.head(cfg.trainer.valid_max_sentences)
    hyps = translator.hypotheses(subset)
    texts = translator.detokenize(hyps)
    scores = score(texts, subset.tgt_text)
    ppl = math.exp(min(loss, 50.0))
    result = {
        "loss": loss,
        "ppl": ppl,
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "ter": scores.ter,
    }
    # Gold alignments (phrasebook): one teacher-forced pass over the same subset.
    aligned = alignment_scores(translator, subset)
    if aligned is not None:
        result.update(aer=aligned.aer, aer_shifted=aligned.aer_shifted)
    tracker.scalars({f"valid/{name}": value for name, value in result.items()}, step)
    if getattr(translator.model, "self_attention", None) is not None:
        forced = translator.forced_attention(subset)
        entropy = head_entropies([f.self_heads for f in forced])
        tracker.scalars(entropy_scalars(entropy), step)
    n = min(cfg.trainer.alignment_samples, len(hyps))
    shown = forced_split(subset.head(n), [h.tokens for h in hyps[:n]])
    maps = attention_maps(translator, shown)
    if cfg.trainer.alignment_occlusion and maps:
        log_occlusion(translator, shown, maps, tracker, step)
    for i, att in enumerate(maps):
        tracker.figure(f"alignment/{i}", alignment_figure(att, f"step {step}"), step)
        log_self_attention(tracker, att, i, step)
    tracker.text("valid/samples", samples_markdown(subset, texts, n=5), step)
    tracker.flush()
    return result


def log_occlusion(
    translator: Translator,
    shown: EncodedSplit,
    maps: list[AttentionMap],
    tracker: Tracker,
    step: int,
) -> None:
    """Occlusion beside each sample's attention (``alignment/occlusion.py``, drawn
    by ``alignment_figure``) and the mean Spearman ρ of the two, as
    ``valid/spearman_occlusion``."""
    attach_occlusion(translator, shown, maps)
    rhos = [a.spearman for a in maps if a.spearman is not None]
    rhos = [r for r in rhos if not math.isnan(r)]
    if rhos:
        tracker.scalars({"valid/spearman_occlusion": sum(rhos) / len(rhos)}, step)


def head_entropies(maps: Sequence[np.ndarray]) -> np.ndarray:
    """Each block's and head's mean attention entropy ``-Σ p log p`` in nats
    ``(layers, heads)``, over every real query of ``maps`` (one ``(layers, heads, S,
    S)`` array a sentence, padding cut off). Near 0: a saturated head that reads one
    piece; ``log S``: one that reads all alike."""
    total, rows = 0.0, 0
    for weights in maps:
        p = weights.astype(np.float64)
        total = total - (p * np.log(np.where(p > 0, p, 1.0))).sum(axis=(-1, -2))
        rows += weights.shape[-2]
    return np.asarray(total) / max(rows, 1)


def entropy_scalars(entropy: np.ndarray) -> dict[str, float]:
    """``valid/self_attention_entropy/layer{l}_head{h}`` for each head."""
    layers, heads = entropy.shape
    return {
        f"valid/self_attention_entropy/layer{layer}_head{head}": float(
            entropy[layer, head]
        )
        for layer in range(layers)
        for head in range(heads)
    }


def log_self_attention(tracker: Tracker, att: AttentionMap, i: int, step: int) -> None:
    """Each layer's and head's self-attention of sample ``i`` (source pieces on both
    axes), one tag per layer and head: ``self_attention/layer{l}_head{h}/{i}``."""
    if att.self_attention is None:
        return
    layers, heads = att.self_attention.shape[:2]
    for layer in range(layers):
        for head in range(heads):
            view = self_view(att, layer, head)
            tag = f"self_attention/layer{layer}_head{head}/{i}"
            tracker.figure(
                tag, alignment_figure(view, f"{view.title}, step {step}"), step
            )


def samples_markdown(split: EncodedSplit, hyps: list[str], n: int) -> str:
    """A markdown table of sources, references and hypotheses for TensorBoard."""
    rows = ["| source | reference | hypothesis |", "|---|---|---|"]
    for src, ref, hyp in list(zip(split.src_text, split.tgt_text, hyps, strict=False))[
        :n
    ]:
        rows.append(f"| {_cell(src)} | {_cell(ref)} | {_cell(hyp)} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
