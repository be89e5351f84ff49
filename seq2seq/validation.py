"""Validation during training: loss, decoding, BLEU/chrF, heatmaps and samples."""

from __future__ import annotations

import math

from seq2seq.align import alignment_figure, force_decode
from seq2seq.alignment_error import alignment_scores
from seq2seq.data.prepare import EncodedSplit, PreparedData
from seq2seq.evaluate import detokenize, head, split_loss, translate_split
from seq2seq.inference import decode_settings
from seq2seq.metrics import score
from seq2seq.tracking import Tracker


def validate(
    model, data: PreparedData, cfg, device, amp_dtype, tracker: Tracker, step: int
) -> dict:
    """Score the validation split and log it; returns loss, ppl, bleu and chrf (and
    aer, aer_shifted when the corpus has gold alignments).

    The first ``trainer.alignment_samples`` validation sentences are rendered at every
    validation, so TensorBoard's step slider shows their attention sharpening.
    """
    split = data.splits["validation"]
    loss = split_loss(model, split, cfg.data.batch_tokens, device, amp_dtype)
    subset = head(split, cfg.trainer.valid_max_sentences)
    decode = decode_settings(cfg.decode, cfg.trainer.valid_beam_size)
    batch_tokens = cfg.data.batch_tokens
    hyps = translate_split(model, subset, decode, device, batch_tokens, amp_dtype)
    texts = detokenize(data.tokenizer, hyps)
    scores = score(texts, subset.tgt_text)
    ppl = math.exp(min(loss, 50.0))
    result = {"loss": loss, "ppl": ppl, "bleu": scores.bleu, "chrf": scores.chrf}
    # Gold alignments (phrasebook): one teacher-forced pass over the same subset.
    aligned = alignment_scores(
        model, data.tokenizer, subset, cfg.data.batch_tokens, device
    )
    if aligned is not None:
        result.update(aer=aligned.aer, aer_shifted=aligned.aer_shifted)
    tracker.scalars({f"valid/{name}": value for name, value in result.items()}, step)
    for i in range(min(cfg.trainer.alignment_samples, len(hyps))):
        att = force_decode(
            model, data.tokenizer, subset.src_ids[i], hyps[i].tokens, device
        )
        tracker.figure(f"alignment/{i}", alignment_figure(att, f"step {step}"), step)
    tracker.text("valid/samples", samples_markdown(subset, texts, n=5), step)
    tracker.flush()
    return result


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
