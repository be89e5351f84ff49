"""Exact sampling of unigram segmentations, reproducible in any process.

The distribution is SentencePiece's own (``enable_sampling=True, nbest_size=-1``):
over every segmentation of the normalized sentence into pieces of the vocabulary,
``P(segmentation) ∝ exp(alpha · Σ log p(piece))``, drawn by forward filtering and
backward sampling over the lattice that SentencePiece builds (``PopulateNodes`` in its
``unigram_model.cc``: every vocabulary piece matching at a position, and an unknown
piece of one character scoring ``min score - 10`` where no one-character piece does;
runs of unknown pieces come out merged into one, as SentencePiece merges them). Models
with user-defined symbols, which SentencePiece scores apart, are not covered;
``Tokenizer.train`` makes none.

Why not call SentencePiece's sampler: in sentencepiece 0.2.3 its seeded generator is
salted once per process, so ``spm.set_random_generator_seed(s)`` repeats the pieces only
inside one process. A resumed run, or another DDP rank, would cut an epoch
differently. Here the draws come from numpy's generator, seeded by the caller.

Why it is fast: a piece never holds ``▁`` past its first character (words are cut at
whitespace), so every segmentation cuts before each ``▁`` and the distribution
factorizes over words. Each word type's lattice and forward pass are built once (a
corpus has far fewer types than words), and an epoch samples all word occurrences
together, one backward step at a time, with array operations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import sentencepiece as spm

UNK_PENALTY = 10.0  # SentencePiece's kUnkPenalty
_WORDS = re.compile("▁?[^▁]+|▁")  # a word starts at its ▁ (the dummy prefix too)


def _vocabulary(processor: spm.SentencePieceProcessor) -> dict[str, tuple[int, float]]:
    """The pieces a lattice can hold: ``piece -> (id, score)``."""
    vocab: dict[str, tuple[int, float]] = {}
    for i in range(processor.get_piece_size()):
        if not (
            processor.is_control(i)
            or processor.is_unknown(i)
            or processor.is_unused(i)
            or processor.is_byte(i)
        ):
            piece = processor.id_to_piece(i)
            if "▁" in piece[1:]:
                raise ValueError(
                    f"piece {piece!r} spans whitespace: subword sampling needs a "
                    "model trained with split_by_whitespace (as Tokenizer.train does)"
                )
            vocab[piece] = (i, processor.get_score(i))
    return vocab


class UnigramSampler:
    """Samples segmentations of fixed ``texts`` with one SentencePiece unigram model.

    Built once (lattices of the word types, forward pass at ``alpha``); ``sample``
    then draws a segmentation of every text from a numpy generator.
    """

    def __init__(
        self,
        processor: spm.SentencePieceProcessor,
        texts: Sequence[str],
        alpha: float,
    ) -> None:
        vocab = _vocabulary(processor)
        self.unk_id = processor.unk_id()
        unk_score = min(score for _, score in vocab.values()) - UNK_PENALTY
        longest = max(len(piece) for piece in vocab)
        types: dict[str, int] = {}
        occurrences: list[int] = []
        self.words_per_text = np.zeros(len(texts), dtype=np.int64)
        for k, normalized in enumerate(processor.normalize(list(texts))):
            words = _WORDS.findall(normalized)
            self.words_per_text[k] = len(words)
            occurrences += [types.setdefault(w, len(types)) for w in words]
        self.occurrence_type = np.asarray(occurrences, dtype=np.int64)
        lengths = [len(word) for word in types]
        self.type_length = np.asarray(lengths, dtype=np.int64)
        # group g = base[type] + end - 1: the edges ending at position ``end``
        self.type_base = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        keys: list[float] = []
        begins: list[int] = []
        ids: list[int] = []
        for t, word in enumerate(types):
            edges = _lattice(word, vocab, longest, (self.unk_id, unk_score))
            for end, group in enumerate(_backward(edges, alpha), start=1):
                g = int(self.type_base[t]) + end - 1
                for begin, piece, cumulative in group:
                    keys.append(g + cumulative)
                    begins.append(begin)
                    ids.append(piece)
        self.keys = np.asarray(keys, dtype=np.float64)  # sorted: group, then cum.
        self.begins = np.asarray(begins, dtype=np.int64)
        self.ids = np.asarray(ids, dtype=np.int64)

    def sample(
        self, rng: np.random.Generator, texts: np.ndarray | None = None
    ) -> list[list[int]]:
        """One segmentation per text (piece ids), drawn from ``rng``; of the texts
        at the sorted indices ``texts`` only, when given (a DDP rank's share)."""
        n = len(self.occurrence_type)
        pos = self.type_length[self.occurrence_type].copy()
        if texts is None:
            active = np.arange(n)
        else:  # the word occurrences of the chosen texts, in text order
            ends = np.cumsum(self.words_per_text)
            counts = self.words_per_text[texts]
            firsts = np.repeat(ends[texts] - counts, counts)
            within = np.arange(counts.sum()) - np.repeat(
                np.cumsum(counts) - counts, counts
            )
            active = firsts + within
        drawn_occ, drawn_ids, drawn_step = [], [], []
        step = 0
        while active.size:  # one backward step of every unfinished word
            group = self.type_base[self.occurrence_type[active]] + pos[active] - 1
            edge = np.searchsorted(self.keys, group + rng.random(active.size), "right")
            drawn_occ.append(active)
            drawn_ids.append(self.ids[edge])
            drawn_step.append(np.full(active.size, step))
            pos[active] = self.begins[edge]
            active = active[pos[active] > 0]
            step += 1
        occ = np.concatenate(drawn_occ) if drawn_occ else np.zeros(0, np.int64)
        steps = np.concatenate(drawn_step) if drawn_step else occ
        # words in text order, each word's pieces front to back (drawn back to front)
        order = np.lexsort((-steps, occ))
        flat = (np.concatenate(drawn_ids)[order] if drawn_ids else occ).tolist()
        per_word = np.bincount(occ, minlength=n)
        word_ends = np.cumsum(self.words_per_text)
        piece_ends = np.concatenate([[0], np.cumsum(per_word)])[word_ends]
        piece_starts = np.concatenate([[0], piece_ends[:-1]])
        chosen = range(len(piece_ends)) if texts is None else texts
        out = []
        for start, end in zip(
            piece_starts[chosen].tolist(), piece_ends[chosen].tolist(), strict=True
        ):
            ids = flat[start:end]
            out.append(_merge_unknown(ids, self.unk_id) if self.unk_id in ids else ids)
        return out


def _lattice(
    word: str, vocab: dict[str, tuple[int, float]], longest: int, unk: tuple
) -> list[list[tuple[int, int, float]]]:
    """Edges ``(begin, id, score)`` ending at each position ``1..len(word)``."""
    ending: list[list[tuple[int, int, float]]] = [[] for _ in word]
    for begin in range(len(word)):
        single = False
        for end in range(begin + 1, min(len(word), begin + longest) + 1):
            hit = vocab.get(word[begin:end])
            if hit is not None:
                ending[end - 1].append((begin, *hit))
                single = single or end == begin + 1
        if not single:
            ending[begin].append((begin, *unk))
    return ending


def _backward(
    ending: list[list[tuple[int, int, float]]], alpha: float
) -> list[list[tuple[int, int, float]]]:
    """Per end position, its edges ``(begin, id, cumulative probability)``: the
    chance of each edge being the last piece of a segmentation ending there."""
    forward = [0.0]  # log Σ over the segmentations of the prefix of each length
    for edges in ending:
        terms = [forward[begin] + alpha * score for begin, _, score in edges]
        top = max(terms)
        forward.append(top + math.log(sum(math.exp(x - top) for x in terms)))
    groups = []
    for end, edges in enumerate(ending, start=1):
        total, group = 0.0, []
        for begin, piece, score in edges:
            total += math.exp(forward[begin] + alpha * score - forward[end])
            group.append((begin, piece, total))
        last_begin, last_piece, _ = group[-1]
        group[-1] = (last_begin, last_piece, 1.0)  # exactly the group's end
        groups.append(group)
    return groups


def _merge_unknown(ids: list[int], unk_id: int) -> list[int]:
    """Runs of unknown pieces as one, as SentencePiece writes them."""
    return [i for k, i in enumerate(ids) if not (i == unk_id and k and ids[k - 1] == i)]
