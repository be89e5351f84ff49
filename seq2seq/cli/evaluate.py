"""``seq2seq-evaluate``: translate a split, print BLEU/chrF (and AER), write hypotheses.

``alignment=true reverse_checkpoint=B.pt`` (a model trained the other way on the same
corpus) adds the AER of each direction and of their symmetrizations
(``alignment/twoway.py``).

``data.*`` overrides (``data.local_dir=DIR``, ``data.name=local``: the set fields of
``DataOverrides``, merged onto the checkpoint's corpus settings) evaluate the same
model on another corpus or folder; the checkpoint's tokenizer is reused.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_reverse, load_translator, run_dir
from seq2seq.cli.checks import (
    check_decoding_overrides,
    check_reverse_file,
    corpus_settings,
)
from seq2seq.config_checks import (
    AT_LEAST_1,
    SIZES,
    check_folder,
    check_values,
    require,
)


def check_evaluate(cfg: DictConfig) -> None:
    """The overrides alone; the corpus settings they make with the checkpoint's are
    checked (``check_data``) once the checkpoint is read (``corpus_settings``)."""
    check_decoding_overrides(cfg)
    check_values(cfg.data, "data.", dict.fromkeys(SIZES, AT_LEAST_1))
    check_folder(cfg.data.local_dir, "data.local_dir")
    check_reverse_file(cfg)
    require(
        cfg.reverse_checkpoint is None or cfg.alignment,
        "reverse_checkpoint= combines the two directions' word alignments for AER: "
        "add alignment=true",
    )


def evaluate_checkpoint(cfg: DictConfig, out_dir: Path):
    """Translate ``cfg.split`` with ``cfg.checkpoint``, print and return the scores."""
    from seq2seq.alignment.error import alignment_scores
    from seq2seq.alignment.maps import zero_share
    from seq2seq.alignment.twoway import readout_for, symmetrized_scores
    from seq2seq.data.splits import encode_corpus_split, write_lines
    from seq2seq.decoding.scores import score

    translator = load_translator(cfg)
    reverse = load_reverse(cfg, translator)
    data_cfg = corpus_settings(translator.config.data, cfg.data)
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
        forced = translator.forced_attention(split)  # one pass serves every score
        aligned = alignment_scores(translator, split, forced)
        if aligned is None:
            print("AER: this corpus has no gold alignments (no `alignment` column)")
        else:
            print(aligned.summary())
        if aligned is not None and reverse is not None:
            readout = readout_for(cfg.two_way, data_cfg)
            two_way = symmetrized_scores(translator, reverse, split, forced, readout)
            print(two_way.summary())
        zeros = zero_share([f.weights for f in forced])
        normalizer = translator.config.model.attention.normalizer
        print(
            f"attention ({normalizer}): {100 * zeros:.1f}% of the weights on "
            "references are exactly 0"
        )
    print(f"hypotheses: {out}")
    return scores


def _evaluate(cfg: DictConfig) -> None:
    evaluate_checkpoint(cfg, run_dir())


main = command("evaluate", _evaluate, check_evaluate)
