"""``seq2seq-evaluate``: translate a split, print BLEU/chrF (and AER), write hypotheses.

``data=...`` overrides (merged onto the checkpoint's corpus settings) evaluate the
same model on another corpus or folder; the checkpoint's tokenizer is reused.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from seq2seq.cli.app import command, load_translator, run_dir


def evaluate_checkpoint(cfg: DictConfig, out_dir: Path):
    """Translate ``cfg.split`` with ``cfg.checkpoint``, print and return the scores."""
    from seq2seq.alignment.error import alignment_scores
    from seq2seq.data.splits import encode_corpus_split, write_lines
    from seq2seq.decoding.scores import score

    translator = load_translator(cfg)
    data_cfg = translator.config.data
    if cfg.data is not None:
        data_cfg = OmegaConf.merge(data_cfg, cfg.data)
    split = encode_corpus_split(data_cfg, translator.tokenizer, cfg.split)
    texts = translator.detokenize(translator.hypotheses(split))
    paper_lang = data_cfg.tgt_lang if cfg.paper_bleu else None
    scores = score(texts, split.tgt_text, cfg.lowercase, paper_lang)
    out = write_lines(out_dir / "hyps" / f"{cfg.split}.txt", texts)
    print(
        f"{cfg.checkpoint} (step {translator.step}) on {data_cfg.name} "
        f"{data_cfg.src_lang}->{data_cfg.tgt_lang} {cfg.split} "
        f"({len(texts)} sentences, beam {translator.beam_size})"
    )
    print(scores.summary())
    if cfg.alignment:  # AER of the attention, force-decoding the references
        aligned = alignment_scores(translator, split)
        if aligned is None:
            print("AER: this corpus has no gold alignments (no `alignment` column)")
        else:
            print(aligned.summary())
    print(f"hypotheses: {out}")
    return scores


def _evaluate(cfg: DictConfig) -> None:
    evaluate_checkpoint(cfg, run_dir())


main = command("evaluate", _evaluate)
