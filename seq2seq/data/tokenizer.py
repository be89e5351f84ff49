"""SentencePiece tokenizer: train in memory, encode, decode; special ids defined once.

Every model is trained with ``pad_id=0, unk_id=1, bos_id=2, eos_id=3`` so the ids below
hold for the source and the target side alike. Training reads sentences from an iterator
and writes the model into memory (``model_writer``): nothing touches the working
directory, and the model bytes travel inside checkpoints (``to_bytes`` /
``from_bytes``).

The vocabulary size is a soft limit (``hard_vocab_limit=False``): a corpus too small for
the requested size gets the largest vocabulary it supports instead of an error, said
in one warning with the size reached. When even the soft limit cannot be met (BPE
reports "Vocabulary size too high"), the size is clamped to the maximum SentencePiece
names and training runs again.

Training reads exactly the sentences it is given (``input_sentence_size=0``): the
caller passes a seeded sample of a large corpus (``data/prepare.py``), so the pieces
do not depend on SentencePiece's own sampling.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import sentencepiece as spm

log = logging.getLogger(__name__)

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
_DROPPED_ON_DECODE = frozenset({PAD_ID, BOS_ID, EOS_ID})
# Below this many sentences, encoding one at a time is faster: SentencePiece's list
# call starts a thread pool each time (about 0.2 ms, 70x one short sentence; a
# server encodes one request's sentence at a time).
POOLED_FROM = 128
_TOO_HIGH = re.compile(
    r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)"
)


def _train_model(
    texts: Sequence[str] | Path,
    vocab_size: int,
    model_type: str,
    character_coverage: float,
    seed: int,
    num_threads: int,
) -> bytes:
    """Train one SentencePiece model on ``texts`` (sentences, or a file of one
    sentence per line) and return its serialized bytes."""
    spm.set_random_generator_seed(seed)
    size = vocab_size
    for _ in range(3):
        buffer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_sentences(texts),
                model_writer=buffer,
                vocab_size=size,
                model_type=model_type,
                character_coverage=character_coverage,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                pad_piece="<pad>",
                hard_vocab_limit=False,
                input_sentence_size=0,
                shuffle_input_sentence=False,
                num_threads=num_threads,
                minloglevel=2,
            )
        except RuntimeError as err:
            match = _TOO_HIGH.search(str(err))
            if match is None:
                raise
            size = int(match.group(2))
            log.warning(
                "vocab_size %d too large for this corpus; using %d", vocab_size, size
            )
            continue
        model = buffer.getvalue()
        reached = _load(model).get_piece_size()
        if reached < vocab_size and size == vocab_size:
            log.warning(
                "vocabulary size %d asked, but the training text supports only %d "
                "pieces: using %d",
                vocab_size,
                reached,
                reached,
            )
        return model
    raise RuntimeError(f"SentencePiece training failed for vocab_size={vocab_size}")


def _sentences(texts: Sequence[str] | Path) -> Iterator[str]:
    """The sentences, from a list or streamed from a file's lines (SentencePiece keeps
    its own copy; a file's ``input=`` would also write its path into the model)."""
    if not isinstance(texts, Path):
        yield from texts
        return
    with open(texts, encoding="utf-8") as handle:
        for line in handle:
            yield line[:-1] if line.endswith("\n") else line


def _load(model: bytes) -> spm.SentencePieceProcessor:
    processor = spm.SentencePieceProcessor()
    processor.LoadFromSerializedProto(model)
    return processor


def _encode(
    processor: spm.SentencePieceProcessor, texts: Sequence[str]
) -> list[list[int]]:
    """Piece ids per text: one call per text for a few, SentencePiece's pooled list
    call for many (``POOLED_FROM``); both give the same ids."""
    if len(texts) < POOLED_FROM:
        return [processor.encode(text, out_type=int) for text in texts]
    return processor.encode(list(texts), out_type=int)


def _decode(processor: spm.SentencePieceProcessor, ids: Iterable[int]) -> str:
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    kept: list[int] = []
    for token in ids:
        if token == EOS_ID:
            break
        if token not in _DROPPED_ON_DECODE:
            kept.append(int(token))
    return processor.decode(kept)


class Tokenizer:
    """One SentencePiece model for both sides (joint) or one per side (separate)."""

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None) -> None:
        self.joint = tgt_model is None
        self._src_bytes = src_model
        self._tgt_bytes = src_model if tgt_model is None else tgt_model
        self._src = _load(src_model)
        self._tgt = self._src if tgt_model is None else _load(tgt_model)

    @classmethod
    def train(
        cls,
        src_texts: Sequence[str],
        tgt_texts: Sequence[str],
        vocab_size: int = 8000,
        model_type: str = "unigram",
        joint: bool = True,
        character_coverage: float = 1.0,
        seed: int = 0,
        num_threads: int = 2,
    ) -> Tokenizer:
        """Train on the given texts (the train split); deterministic for a seed."""
        args = (vocab_size, model_type, character_coverage, seed, num_threads)
        if joint:
            return cls(_train_model([*src_texts, *tgt_texts], *args))
        return cls(_train_model(src_texts, *args), _train_model(tgt_texts, *args))

    @classmethod
    def train_from_files(
        cls,
        files: Sequence[Path],
        vocab_size: int = 8000,
        model_type: str = "unigram",
        character_coverage: float = 1.0,
        seed: int = 0,
        num_threads: int = 2,
    ) -> Tokenizer:
        """Train on files of one sentence per line: one file, a joint model; two
        (source, target), a model per side. SentencePiece reads them itself, so a
        large sample never lives as Python strings beside its own copy."""
        args = (vocab_size, model_type, character_coverage, seed, num_threads)
        return cls(*(_train_model(Path(path), *args) for path in files))

    # --- sizes ------------------------------------------------------------------------
    @property
    def src_vocab_size(self) -> int:
        return self._src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._tgt.get_piece_size()

    # --- encode / decode --------------------------------------------------------------
    def encode_src(self, texts: Sequence[str]) -> list[list[int]]:
        """Piece ids per sentence, without BOS/EOS (the collate adds them)."""
        return _encode(self._src, texts)

    def encode_tgt(self, texts: Sequence[str]) -> list[list[int]]:
        return _encode(self._tgt, texts)

    def processor(self, side: str) -> spm.SentencePieceProcessor:
        """The SentencePiece model of ``side`` (``"src"`` or ``"tgt"``), for code
        that reads its vocabulary and normalizer (``data/lattice.py``)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side must be 'src' or 'tgt', got {side!r}")
        return self._src if side == "src" else self._tgt

    def decode_src(self, ids: Iterable[int]) -> str:
        """Detokenized text; PAD/BOS/EOS dropped, stops at the first EOS."""
        return _decode(self._src, ids)

    def decode_tgt(self, ids: Iterable[int]) -> str:
        return _decode(self._tgt, ids)

    def src_pieces(self, ids: Iterable[int]) -> list[str]:
        """Piece strings (specials included, e.g. ``</s>``), for plots."""
        return [self._src.id_to_piece(int(i)) for i in ids]

    def tgt_pieces(self, ids: Iterable[int]) -> list[str]:
        return [self._tgt.id_to_piece(int(i)) for i in ids]

    # --- serialization ----------------------------------------------------------------
    def to_bytes(self) -> dict[str, bytes]:
        """``{"joint": model}`` or ``{"src": model, "tgt": model}``."""
        if self.joint:
            return {"joint": self._src_bytes}
        return {"src": self._src_bytes, "tgt": self._tgt_bytes}

    @classmethod
    def from_bytes(cls, data: dict[str, bytes]) -> Tokenizer:
        if "joint" in data:
            return cls(bytes(data["joint"]))
        try:
            return cls(bytes(data["src"]), bytes(data["tgt"]))
        except KeyError as err:
            raise ValueError(
                "tokenizer data needs key 'joint' or keys 'src' and 'tgt'; "
                f"got {sorted(data)}"
            ) from err
