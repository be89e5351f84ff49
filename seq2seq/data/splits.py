"""A split as text and piece ids, and how to make one from text or a corpus.

``EncodedSplit`` is the plain type between data preparation and everything that reads
a split: batching, decoding, scoring and alignment. Its columns are sequences: lists
for text being translated, validation and test, and memory-mapped views
(``data/store.py``) for a prepared training split, which is never held as Python
objects. Encoding never retrains the tokenizer: a checkpoint's tokenizer encodes any
text or corpus it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seq2seq.data.columns import SPLITS
from seq2seq.data.corpus import CorpusError, read_corpus
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.disk import write_atomic


@dataclass
class EncodedSplit:
    """One split as text and piece ids (no BOS/EOS); all columns have the same
    length. ``alignment``: gold word links per pair (Pharaoh), when the corpus has
    them."""

    src_text: Sequence[str]
    tgt_text: Sequence[str]
    src_ids: Sequence[Sequence[int]]
    tgt_ids: Sequence[Sequence[int]]
    alignment: Sequence[str] | None = None

    def __len__(self) -> int:
        return len(self.src_ids)

    def src_lengths(self) -> np.ndarray:
        """Pieces per source sentence ``(pairs,)``, without building a list per pair."""
        return _lengths(self.src_ids)

    def tgt_lengths(self) -> np.ndarray:
        return _lengths(self.tgt_ids)

    def in_memory(self) -> EncodedSplit:
        """The same split as Python lists (for the small splits that decoding,
        scoring and alignment read many times)."""
        return EncodedSplit(
            list(self.src_text),
            list(self.tgt_text),
            [list(ids) for ids in self.src_ids],
            [list(ids) for ids in self.tgt_ids],
            None if self.alignment is None else list(self.alignment),
        )

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


def _lengths(pieces: Sequence[Sequence[int]]) -> np.ndarray:
    lengths = getattr(pieces, "lengths", None)  # data.store.Pieces: memory-mapped
    if lengths is not None:
        return np.asarray(lengths)
    return np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))


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
    split = str(getattr(split, "value", split))  # a command's Split choice
    if split not in SPLITS:
        raise CorpusError(f"split={split}: no such split; the corpus has {SPLITS}")
    ds = read_corpus(data_cfg, links_for=(split,), splits=(split,)).splits[split]
    if len(ds) == 0:
        raise CorpusError(
            f"split={split} of corpus {data_cfg.name} has no pairs (an empty file, "
            "or only pairs with an empty side)"
        )
    alignment = ds["alignment"] if "alignment" in ds.column_names else None
    return encode_texts(tokenizer, ds["src"], ds["tgt"], alignment)


def write_lines(
    path: Path,
    lines: Sequence[str],
    what: str = "hypotheses",
    elsewhere: str = "write elsewhere (hydra.run.dir=DIR)",
) -> Path:
    """Write one line per item (hypotheses, say), creating the folder: atomically
    (a file that exists is complete); a refused write names ``what`` and the
    setting that writes ``elsewhere``."""
    return write_atomic(path, "".join(line + "\n" for line in lines), what, elsewhere)
