"""Scoring translations: sacreBLEU BLEU, chrF and TER (translation edit rate, lower is
better) with the signatures that make them reproducible. Strings in, numbers out;
nothing here knows about models.

Two case-insensitive readings sit beside the cased headline score:

- ``lc_bleu``: sacreBLEU with ``lowercase=True`` and its 13a tokenizer on the
  detokenized text (what ``sacrebleu -lc`` prints);
- ``paper_bleu``: the literature's Multi30k scale (``multi-bleu.perl`` on lowercased,
  punctuation-normalized, Moses-tokenized references). Hypotheses and references are
  lowercased, normalized and tokenized with sacremoses (the Python port of the Moses
  scripts, dashes split aggressively, no escaping), then scored by sacreBLEU with
  ``tokenize="none"``: corpus BLEU over whitespace tokens, as ``multi-bleu.perl``
  computes it. How far the two readings differ on our outputs: docs/results.md.

Every BLEU runs with ``force=True``, which only silences sacreBLEU's warning that 100 or
more hypotheses end in a tokenized period (" ."): it guesses that someone forgot to
detokenize. Our hypotheses are always the model's SentencePiece output decoded, in the
references' own style, so a corpus tokenized by design (the phrasebook ends every
sentence with " .") would get that warning at every validation for nothing, and the
paper scale tokenizes on purpose. The scores and signatures are the same with or
without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER


@dataclass
class Scores:
    """Corpus scores with the sacreBLEU signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    ter: float = float("nan")
    ter_signature: str = ""
    lc_bleu: float | None = None
    n_sentences: int = 0
    lc_bleu_signature: str | None = None
    paper_bleu: float | None = None
    paper_bleu_signature: str | None = None

    def summary(self) -> str:
        """One line: scores first, then the signatures."""
        line = f"BLEU {self.bleu:.2f} chrF {self.chrf:.2f} TER {self.ter:.2f}"
        if self.lc_bleu is not None:
            line += f" lcBLEU {self.lc_bleu:.2f}"
        if self.paper_bleu is not None:
            line += f" paperBLEU {self.paper_bleu:.2f}"
        line += f" (n={self.n_sentences}) | BLEU {self.bleu_signature}"
        line += f" | chrF {self.chrf_signature} | TER {self.ter_signature}"
        if self.lc_bleu_signature is not None:
            line += f" | lcBLEU {self.lc_bleu_signature}"
        if self.paper_bleu_signature is not None:
            line += f" | paperBLEU {self.paper_bleu_signature}"
        return line

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(
    hyps: Sequence[str],
    refs: Sequence[str],
    lowercase: bool = False,
    paper_lang: str | None = None,
) -> Scores:
    """Corpus BLEU and chrF (one reference per hypothesis) with sacreBLEU's defaults.

    ``lowercase=True`` additionally reports case-insensitive BLEU in ``lc_bleu``;
    ``paper_lang`` (the target language, e.g. ``"de"``) the paper-scale ``paper_bleu``
    (see the module docstring). The cased BLEU stays the headline number.
    """
    hyps, refs = list(hyps), list(refs)
    if len(hyps) != len(refs):
        raise ValueError(
            f"got {len(hyps)} hypotheses but {len(refs)} references; "
            "they must pair up one to one"
        )
    if not hyps:
        raise ValueError("cannot score an empty corpus (0 hypotheses, 0 references)")
    bleu, chrf, ter = BLEU(force=True), CHRF(), TER()
    result = Scores(
        bleu=float(bleu.corpus_score(hyps, [refs]).score),
        chrf=float(chrf.corpus_score(hyps, [refs]).score),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        ter=float(ter.corpus_score(hyps, [refs]).score),
        ter_signature=str(ter.get_signature()),
        n_sentences=len(hyps),
    )
    if lowercase:
        lc = BLEU(lowercase=True, force=True)
        result.lc_bleu = float(lc.corpus_score(hyps, [refs]).score)
        result.lc_bleu_signature = str(lc.get_signature())
    if paper_lang is not None:
        result.paper_bleu, result.paper_bleu_signature = paper_bleu(
            hyps, refs, paper_lang
        )
    return result


def sentence_scores(
    hyps: Sequence[str], refs: Sequence[str]
) -> list[tuple[float, float]]:
    """Per hypothesis its sentence-level ``(BLEU, chrF)`` against its reference:
    sacreBLEU's ``sentence_score`` (BLEU with effective order, so a short sentence
    without 4-gram matches is not 0 by construction; chrF as the corpus score's)."""
    if len(hyps) != len(refs):
        raise ValueError(
            f"got {len(hyps)} hypotheses but {len(refs)} references; "
            "they must pair up one to one"
        )
    bleu, chrf = BLEU(effective_order=True, force=True), CHRF()
    return [
        (
            float(bleu.sentence_score(h, [r]).score),
            float(chrf.sentence_score(h, [r]).score),
        )
        for h, r in zip(hyps, refs, strict=True)
    ]


def moses_tokenize(lines: Sequence[str], lang: str) -> list[str]:
    """Lowercase, normalize punctuation and Moses-tokenize each line (sacremoses):
    the preprocessing of the Multi30k references that papers score against."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [
        tokenizer.tokenize(
            normalizer.normalize(line.lower()),
            escape=False,
            aggressive_dash_splits=True,
            return_str=True,
        )
        for line in lines
    ]


def paper_bleu(
    hyps: Sequence[str], refs: Sequence[str], lang: str
) -> tuple[float, str]:
    """BLEU on the literature's scale and its signature (module docstring)."""
    import sacremoses

    bleu = BLEU(tokenize="none", force=True)
    value = bleu.corpus_score(moses_tokenize(hyps, lang), [moses_tokenize(refs, lang)])
    moses = f"moses-lc-norm-tok-a:{lang}|sacremoses:{sacremoses.__version__}"
    return float(value.score), f"{bleu.get_signature()}|{moses}"
