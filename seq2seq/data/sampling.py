"""Subword regularization: every training epoch sees the training split cut into
pieces afresh (Kudo 2018, "Subword Regularization").

The model sees a word split in several ways over training, which regularizes it on
small corpora. Each epoch draws, for every training sentence on both sides, a
segmentation with probability ``∝ P(segmentation) ** alpha`` over all segmentations
of the unigram model (SentencePiece's ``enable_sampling=True, nbest_size=-1``; the
sampler is ``data/lattice.py``). Small ``alpha`` flattens the distribution (more and
shorter pieces: on Multi30k with 8,000 pieces, ``alpha=0.1`` doubles the pieces,
0.2 adds a third, 0.5 a few percent), large ``alpha`` comes close to the cached pieces.

Why here, at batching: the prepared cache keeps the deterministic encoding that
validation, test, decoding and alignment read, so it stays valid; with sampling off
the trainer builds the loader of before, untouched.

Reproducible: epoch ``e``'s pieces are a function of the sampler's seed, ``e`` and the
texts (numpy's generator seeded with ``(seed, e, side)``), in any process, so a
resumed run re-creates the epoch it stopped in and DDP ranks agree on it.

Not supported, refused with a message: ``model_type=bpe`` (BPE-dropout). SentencePiece
implements it, but (in sentencepiece 0.2.3) its seeded generator is salted per
process: the same seed gives other pieces in the next process, so resume could not
be exact. The same holds for its n-best sampling (``nbest_size > 1``); drawn
reproducibly from its n-best lists (``nbest_encode``) instead, it would cost about
30 s an epoch on Multi30k at n=64, so it is not offered.

Lengths: pairs filtered at preparation (``data.max_len``) stay out, since the cached
training split is what is re-encoded. A sampled encoding is longer and nothing is
truncated: an example too long for ``data.batch_tokens`` alone gets a batch of its
own, as with the cached pieces.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, Dataset

from seq2seq.config import PieceModel
from seq2seq.data.batching import TokenBucketSampler, batch_loader
from seq2seq.data.lattice import UnigramSampler
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

SIDES = ("src", "tgt")


@dataclass(frozen=True)
class SubwordSampling:
    """Subword sampling settings, checked against the tokenizer's model type
    (``seq2seq-train`` refuses the same settings by their keys at the start)."""

    alpha: float
    model_type: str = "unigram"

    def __post_init__(self) -> None:
        if self.alpha < 0:
            raise ValueError(f"a sampling alpha of {self.alpha}: must be >= 0")
        if PieceModel(self.model_type) != PieceModel.unigram:
            raise ValueError(
                f"a {self.model_type} model cannot be sampled reproducibly: subword "
                "sampling draws unigram segmentations only"
            )
        if self.alpha == 0:
            raise ValueError(
                "alpha 0 means no sampling: subword_sampling gives None for it"
            )


def subword_sampling(alpha: float, model_type: str) -> SubwordSampling | None:
    """The settings, or None when ``alpha`` is 0 (sampling off)."""
    if alpha == 0:
        return None
    return SubwordSampling(alpha, str(model_type))


def epoch_generator(seed: int, epoch: int, side: str) -> np.random.Generator:
    """The generator of one side of one epoch: the same in every process."""
    return np.random.default_rng([seed & (2**64 - 1), epoch, SIDES.index(side)])


class SampledExamples(Dataset):
    """The training examples ``(id, src_ids, tgt_ids)`` of the epoch being batched.

    ``current`` is the cached split until the sampler first plans an epoch, then that
    epoch's sampled encoding (one held at a time). The samplers are built here, once
    (2-3 s for the Multi30k training split; ``scripts/benchmarks/bench_sampling.py``).
    """

    def __init__(
        self, split: EncodedSplit, tokenizer: Tokenizer, sampling: SubwordSampling
    ) -> None:
        self.cached, self.current = split, split
        self.sampling = sampling
        self.samplers = {
            side: UnigramSampler(
                tokenizer.processor(side),
                split.src_text if side == "src" else split.tgt_text,
                sampling.alpha,
            )
            for side in SIDES
        }
        self._key: tuple[int, int] | None = None

    def sample(
        self, seed: int, epoch: int, share: np.ndarray | None = None
    ) -> EncodedSplit:
        """The split with both sides sampled for ``(seed, epoch)``; same texts and
        gold links. With ``share`` (a DDP rank's examples) only those are sampled;
        the others keep their cached pieces, which this rank does not train on."""
        split = self.cached
        if share is None:
            src, tgt = (
                self.samplers[side].sample(epoch_generator(seed, epoch, side))
                for side in SIDES
            )
        else:
            chosen = np.sort(share)
            src, tgt = list(split.src_ids), list(split.tgt_ids)
            for side, ids in (("src", src), ("tgt", tgt)):
                rng = epoch_generator(seed, epoch, side)
                drawn = self.samplers[side].sample(rng, chosen)
                for index, pieces in zip(chosen.tolist(), drawn, strict=True):
                    ids[index] = pieces
        return EncodedSplit(split.src_text, split.tgt_text, src, tgt, split.alignment)

    def use(
        self, seed: int, epoch: int, share: np.ndarray | None = None
    ) -> EncodedSplit:
        """Make ``(seed, epoch)``'s encoding current (sampled once) and return it."""
        if self._key != (seed, epoch):
            start = time.perf_counter()
            self.current = self.sample(seed, epoch, share)
            self._key = (seed, epoch)
            log.info(
                "subword sampling: epoch %d cut in %.2f s, %+.1f%% pieces against the "
                "cached encoding",
                epoch + 1,
                time.perf_counter() - start,
                100 * (_pieces(self.current) / max(_pieces(self.cached), 1) - 1),
            )
        return self.current

    def __len__(self) -> int:
        return len(self.current)

    def __getitem__(self, index: int) -> tuple[int, list[int], list[int]]:
        return index, self.current.src_ids[index], self.current.tgt_ids[index]


def _pieces(split: EncodedSplit) -> int:
    return int(split.src_lengths().sum() + split.tgt_lengths().sum())


class SampledBucketSampler(TokenBucketSampler):
    """The token-bucket sampler of training over ``SampledExamples``: each epoch's
    batches are planned from that epoch's sampled lengths."""

    def __init__(
        self, examples: SampledExamples, batch_tokens: int, **sharding: Any
    ) -> None:
        """``sharding``: ``seed``, ``num_replicas``, ``rank``, ``agree`` of
        ``TokenBucketSampler``; training batches are shuffled and sorted by target."""
        split = examples.cached
        lengths = split.src_lengths(), split.tgt_lengths()
        options = {"shuffle": True, "sort_by": "target", **sharding}
        super().__init__(*lengths, batch_tokens, **options)
        self.examples = examples

    def plan_on(self, share: np.ndarray) -> None:
        """Sample this epoch's pieces (of this rank's share under DDP), then plan on
        their lengths."""
        whole = self.num_replicas == 1
        split = self.examples.use(self.seed, self.epoch, None if whole else share)
        self.set_lengths(split.src_lengths(), split.tgt_lengths())
        alone = int((self.sizes > self.batch_tokens).sum())
        if alone:
            log.info(
                "subword sampling: %d sampled examples exceed batch_tokens=%d alone: "
                "one batch each",
                alone,
                self.batch_tokens,
            )


def make_sampled_loader(
    split: EncodedSplit,
    tokenizer: Tokenizer,
    sampling: SubwordSampling,
    batch_tokens: int,
    pin_memory: bool = False,
    **sharding: Any,
) -> DataLoader:
    """The training ``DataLoader`` of ``Batch`` with subword sampling: shuffled and
    bucketed by target length like ``make_loader(..., sort_by="target")``; its
    examples are ``loader.dataset`` (``SampledExamples``), its sampler
    ``loader.batch_sampler``; ``sharding``: ``seed`` (required), ``num_replicas``,
    ``rank``."""
    examples = SampledExamples(split, tokenizer, sampling)
    sampler = SampledBucketSampler(examples, batch_tokens, **sharding)
    return batch_loader(examples, sampler, pin_memory, sharding["seed"])
