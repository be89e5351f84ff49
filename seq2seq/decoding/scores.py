"""Scoring translations: sacreBLEU BLEU and chrF with the signatures that make them
reproducible. Strings in, numbers out; nothing here knows about models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF


@dataclass
class Scores:
    """Corpus scores with the sacreBLEU signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    lc_bleu: float | None = None
    n_sentences: int = 0
    lc_bleu_signature: str | None = None

    def summary(self) -> str:
        """One line: scores first, then the signatures."""
        line = f"BLEU {self.bleu:.2f} chrF {self.chrf:.2f}"
        if self.lc_bleu is not None:
            line += f" lcBLEU {self.lc_bleu:.2f}"
        line += f" (n={self.n_sentences}) | BLEU {self.bleu_signature}"
        line += f" | chrF {self.chrf_signature}"
        return line

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(hyps: Sequence[str], refs: Sequence[str], lowercase: bool = False) -> Scores:
    """Corpus BLEU and chrF (one reference per hypothesis) with sacreBLEU's defaults.

    ``lowercase=True`` additionally reports case-insensitive BLEU in ``lc_bleu`` (the
    cased BLEU stays the headline number).
    """
    hyps, refs = list(hyps), list(refs)
    if len(hyps) != len(refs):
        raise ValueError(
            f"got {len(hyps)} hypotheses but {len(refs)} references; "
            "they must pair up one to one"
        )
    if not hyps:
        raise ValueError("cannot score an empty corpus (0 hypotheses, 0 references)")
    bleu, chrf = BLEU(), CHRF()
    result = Scores(
        bleu=float(bleu.corpus_score(hyps, [refs]).score),
        chrf=float(chrf.corpus_score(hyps, [refs]).score),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        n_sentences=len(hyps),
    )
    if lowercase:
        lc = BLEU(lowercase=True)
        result.lc_bleu = float(lc.corpus_score(hyps, [refs]).score)
        result.lc_bleu_signature = str(lc.get_signature())
    return result
