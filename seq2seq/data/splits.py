"""A split as text and piece ids, and how to make one from text or a corpus.

``EncodedSplit`` is the plain type between data preparation and everything that reads
a split: batching, decoding, scoring and alignment. Encoding never retrains the
tokenizer: a checkpoint's tokenizer encodes any text or corpus it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.data.corpus import CorpusError, read_corpus
from seq2seq.data.tokenizer import Tokenizer


@dataclass
class EncodedSplit:
    """One split as text and piece ids (no BOS/EOS); all lists have the same length.
    ``alignment``: gold word links per pair (Pharaoh), when the corpus has them."""

    src_text: list[str]
    tgt_text: list[str]
    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    alignment: list[str] | None = None

    def __len__(self) -> int:
        return len(self.src_ids)

    def select(self, indices: Sequence[int]) -> EncodedSplit:
        """The pairs at ``indices``, in that order."""
        pick = list(indices)
        return EncodedSplit(
            src_text=[self.src_text[i] for i in pick],
            tgt_text=[self.tgt_text[i] for i in pick],
            src_ids=[self.src_ids[i] for i in pick],
            tgt_ids=[self.tgt_ids[i] for i in pick],
            alignment=None
            if self.alignment is None
            else [self.alignment[i] for i in pick],
        )

    def head(self, n: int | None) -> EncodedSplit:
        """The first ``n`` pairs (all of them when ``n`` is None or too large)."""
        if n is None or n >= len(self):
            return self
        return self.select(range(n))


def encode_texts(
    tokenizer: Tokenizer,
    src: Sequence[str],
    tgt: Sequence[str] | None = None,
    alignment: Sequence[str] | None = None,
) -> EncodedSplit:
    """Encode raw text with an existing tokenizer; without ``tgt`` the targets are
    empty (a split to translate)."""
    tgt = list(tgt) if tgt is not None else [""] * len(src)
    return EncodedSplit(
        src_text=list(src),
        tgt_text=tgt,
        src_ids=tokenizer.encode_src(list(src)),
        tgt_ids=tokenizer.encode_tgt(tgt),
        alignment=list(alignment) if alignment is not None else None,
    )


def encode_corpus_split(data_cfg, tokenizer: Tokenizer, split: str) -> EncodedSplit:
    """Load ``split`` of the corpus that ``data_cfg`` describes and encode it.

    Raises:
        CorpusError: the corpus has no such split, or the split has no pairs.
    """
    corpus = read_corpus(data_cfg, links_for=(split,)).splits
    if split not in corpus:
        raise CorpusError(
            f"split={split}: no such split; the corpus has {', '.join(corpus)}"
        )
    ds = corpus[split]
    if len(ds) == 0:
        raise CorpusError(
            f"split={split} of corpus {data_cfg.name} has no pairs (an empty file, "
            "or only pairs with an empty side)"
        )
    alignment = ds["alignment"] if "alignment" in ds.column_names else None
    return encode_texts(tokenizer, ds["src"], ds["tgt"], alignment)


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    """Write one line per item (hypotheses, say), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path
