"""Batches: the ``Batch`` dataclass, ``collate`` and a token-budget length-bucketed
sampler.

Bucketing: each epoch the examples are shuffled with a generator seeded by ``seed +
epoch``, then stably sorted by ``(target length, source length)`` (``sort_by="target"``,
for training) or ``(source length, target length)`` (``"source"``, for decoding), so
equal lengths come in a fresh random order. Training sorts by the target: the
decoder's step loop runs every row of a batch to its longest target, while the encoder
runs packed, so target padding costs far more than source padding (on the Multi30k
pieces at 1,152 tokens a batch: 0.1 % target and 4.7 % source padding, against 5.3 %
and 0.1 % sorted by the source). The sorted list is cut greedily into batches whose
padded size ``len(batch) * max(max_src + 1, max_tgt + 1)`` stays within
``batch_tokens`` (+1 for EOS/BOS), and the order of the batches is shuffled.

Sharding (DDP): batch ``k`` goes to rank ``k % num_replicas``. When the batch count does
not divide evenly, the largest batches are split in two until it does, so every rank
runs the same number of steps while the shards stay disjoint and together cover every
example once.

Resume: ``state_dict()`` holds the epoch and how many batches this rank has yielded in
it; after ``load_state_dict`` the next iteration skips those batches. With
``num_workers=0`` the loader draws one batch from the sampler per step, so the position
is exact. ``set_epoch(e)`` starts epoch ``e`` from its beginning unless ``e`` is the
epoch in progress.

Ids: a ``VocabCheck`` (``make_loader(..., vocab=...)``) checks each batch's ids
against the vocabulary before the batch leaves the loader: a minimum and a maximum
over its two id tensors, microseconds a batch. An id outside would index past the
embedding (``IndexError: index out of range in self`` on CPU, a device assert on
CUDA); this names the split, the pair and the file instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seq2seq.errors import CacheError

if TYPE_CHECKING:
    from seq2seq.data.splits import EncodedSplit

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """A padded batch. ``B`` sentences, ``S`` source and ``T`` target steps."""

    src: Tensor  # (B, S) long, source pieces + EOS, PAD_ID padded
    src_lengths: Tensor  # (B,) long, on CPU (pack_padded_sequence wants CPU lengths)
    src_mask: Tensor  # (B, S) bool, True for real tokens
    tgt_in: Tensor  # (B, T) long, BOS + pieces
    tgt_out: Tensor  # (B, T) long, pieces + EOS, PAD_ID padded
    ids: Tensor  # (B,) long, example indices in the split
    n_tokens: int  # non-pad target tokens (len(pieces) + 1 summed)
    # (n_tokens,) long, flat indices ``row * T + step`` of the non-pad targets: the
    # only positions whose logits the loss needs (found here, on the host, so the
    # training step needs no device sync to skip the padding)
    tgt_rows: Tensor

    def flat_targets(self) -> Tensor:
        """The non-pad targets ``(n_tokens,)``, in the order of ``tgt_rows``: the
        targets of the logits ``model(..., rows=batch.tgt_rows)`` returns."""
        return self.tgt_out.view(-1).index_select(0, self.tgt_rows)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """Move every tensor but ``src_lengths`` (which stays on CPU) to ``device``."""

        def move(t: Tensor) -> Tensor:
            return t.to(device, non_blocking=non_blocking)

        return Batch(
            src=move(self.src),
            src_lengths=self.src_lengths,
            src_mask=move(self.src_mask),
            tgt_in=move(self.tgt_in),
            tgt_out=move(self.tgt_out),
            ids=move(self.ids),
            n_tokens=self.n_tokens,
            tgt_rows=move(self.tgt_rows),
        )

    def pin_memory(self) -> Batch:
        return Batch(
            src=self.src.pin_memory(),
            src_lengths=self.src_lengths,
            src_mask=self.src_mask.pin_memory(),
            tgt_in=self.tgt_in.pin_memory(),
            tgt_out=self.tgt_out.pin_memory(),
            ids=self.ids.pin_memory(),
            n_tokens=self.n_tokens,
            tgt_rows=self.tgt_rows.pin_memory(),
        )


def collate(examples: Sequence[tuple[int, Sequence[int], Sequence[int]]]) -> Batch:
    """Pad ``(id, src_ids, tgt_ids)`` examples: src + EOS, BOS + tgt, tgt + EOS."""
    n = len(examples)
    src_len = [len(s) + 1 for _, s, _ in examples]
    tgt_len = [len(t) + 1 for _, _, t in examples]
    src = torch.full((n, max(src_len)), PAD_ID, dtype=torch.long)
    tgt_in = torch.full((n, max(tgt_len)), PAD_ID, dtype=torch.long)
    tgt_out = torch.full((n, max(tgt_len)), PAD_ID, dtype=torch.long)
    for row, (_, s, t) in enumerate(examples):
        src[row, : len(s) + 1] = torch.tensor([*s, EOS_ID], dtype=torch.long)
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS_ID, *t], dtype=torch.long)
        tgt_out[row, : len(t) + 1] = torch.tensor([*t, EOS_ID], dtype=torch.long)
    lengths = torch.tensor(src_len, dtype=torch.long)
    mask = torch.arange(src.size(1)).unsqueeze(0) < lengths.unsqueeze(1)  # (B, S)
    return Batch(
        src=src,
        src_lengths=lengths,
        src_mask=mask,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        ids=torch.tensor([i for i, _, _ in examples], dtype=torch.long),
        n_tokens=sum(tgt_len),
        tgt_rows=(tgt_out != PAD_ID).view(-1).nonzero().squeeze(1),
    )


@dataclass(frozen=True)
class VocabCheck:
    """The ids a split's batches may hold: ``0 <= id < size`` on each side.
    ``split`` names it in the error, ``src_file`` / ``tgt_file`` the ids files
    (empty when the ids are not memory-mapped)."""

    split: str
    src_size: int
    tgt_size: int
    src_file: str = ""
    tgt_file: str = ""

    @classmethod
    def of(cls, split: EncodedSplit, name: str, tokenizer: Any) -> VocabCheck:
        """The check of ``split`` (called ``name``) under ``tokenizer``'s sizes."""
        return cls(
            name,
            tokenizer.src_vocab_size,
            tokenizer.tgt_vocab_size,
            str(getattr(split.src_ids, "path", None) or ""),
            str(getattr(split.tgt_ids, "path", None) or ""),
        )

    def __call__(self, batch: Batch) -> Batch:
        sides = (
            ("source", batch.src, self.src_size, self.src_file),
            ("target", batch.tgt_out, self.tgt_size, self.tgt_file),
        )
        for side, ids, size, where in sides:
            if ids.numel() and (int(ids.max()) >= size or int(ids.min()) < 0):
                self._refuse(batch, side, ids, size, where)
        return batch

    def _refuse(self, batch: Batch, side: str, ids: Tensor, size: int, where: str):
        outside = (ids >= size) | (ids < 0)  # (B, S)
        row = int(outside.any(1).nonzero()[0, 0])
        value = int(ids[row][outside[row]][0])
        source = f"the ids file {where}" if where else "the split's ids"
        raise CacheError(
            f"{self.split} pair {int(batch.ids[row])}: {side} id {value} is outside "
            f"the vocabulary of {size} pieces, so {source} is damaged; run "
            "seq2seq-prepare verify=true with the same data settings to find and "
            "rebuild it (or delete the cache folder)"
        )


def checked_collate(check: VocabCheck, examples: Sequence) -> Batch:
    """``collate``, then ``check``."""
    return check(collate(examples))


def padded_size(
    batch: Sequence[int], src_lengths: Sequence[int], tgt_lengths: Sequence[int]
) -> int:
    """``len(batch) * max(max_src + 1, max_tgt + 1)``: the budgeted size of a batch."""
    longest = max(max(src_lengths[i], tgt_lengths[i]) for i in batch) + 1
    return len(batch) * longest


SORT_KEYS = ("source", "target")


def cut(sizes: np.ndarray, batch_tokens: int) -> np.ndarray:
    """Greedy cuts of ``sizes`` (padded lengths in planning order) into batches of at
    most ``batch_tokens`` padded tokens: the start of each batch.

    A batch grows while ``(k + 1) * max(sizes of its k + 1 items)`` stays within the
    budget; the first item always goes in. Planning order sorts by length, so sizes
    come in long runs of one value: a batch that starts in a run of size ``z`` with at
    least ``batch_tokens // z`` items left in it holds exactly that many (one more
    would pass the budget whatever its size), so those batches are cut by arithmetic,
    a run at a time. A batch that crosses runs is searched: that product never
    decreases as a batch grows, so its end is one ``searchsorted`` over a window's
    running maximum, the window about twice the previous batch, doubled until the cut
    falls inside it. Python work per run of sizes, not per batch or example.
    """
    n = len(sizes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    most = min(n, batch_tokens // max(int(sizes.min()), 1) + 1)  # items, at most
    counts = np.arange(1, most + 1)
    run_ends = [*(np.flatnonzero(np.diff(sizes)) + 1).tolist(), n]
    run_sizes = sizes[np.asarray(run_ends) - 1].tolist()
    starts: list[int] = []
    start, last, run = 0, 8, 0
    while start < n:
        while run_ends[run] <= start:
            run += 1
        fit = batch_tokens // run_sizes[run]
        whole = (run_ends[run] - start) // fit if fit else 0  # batches inside the run
        if whole:
            starts.extend(range(start, start + whole * fit, fit))
            start += whole * fit
            last = fit
            continue
        starts.append(start)
        window = min(most, n - start, 2 * last + 8)
        while True:
            running = np.maximum.accumulate(sizes[start : start + window])
            padded = running * counts[:window]
            length = int(np.searchsorted(padded, batch_tokens, side="right"))
            if length < window or window == min(most, n - start):
                break
            window = min(most, n - start, 2 * window)
        last = max(1, length)
        start += last
    return np.asarray(starts, dtype=np.int64)


class TokenBucketSampler(Sampler[list[int]]):
    """Yields index arrays of examples whose padded size stays within
    ``batch_tokens``, planned on the lengths arrays with numpy.

    An example too long to fit the budget alone forms a batch of its own (logged
    once). ``agree`` (DDP) maps this rank's batch count to the count every rank must
    reach, a max over ranks; one process needs none.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        batch_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        sort_by: str = "source",
        agree: Callable[[int], int] | None = None,
    ) -> None:
        if sort_by not in SORT_KEYS:
            raise ValueError(f"sort_by must be one of {SORT_KEYS}, got {sort_by!r}")
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(
                f"{len(src_lengths)} source but {len(tgt_lengths)} target lengths"
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} outside [0, {num_replicas})")
        self.batch_tokens = batch_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.sort_by = sort_by
        self.agree = agree
        self.epoch = 0
        self.position = 0  # batches of this rank already yielded in ``epoch``
        self._memo: tuple[tuple[int, int, bool], list[np.ndarray]] | None = None
        self.set_lengths(src_lengths, tgt_lengths)
        too_long = np.flatnonzero(self.sizes > batch_tokens)
        if len(too_long):
            log.warning(
                "%d examples exceed batch_tokens=%d alone: one batch each (e.g. #%d)",
                len(too_long),
                batch_tokens,
                too_long[0],
            )

    def set_lengths(
        self, src_lengths: Sequence[int] | np.ndarray, tgt_lengths: Sequence[int]
    ) -> None:
        """The lengths to plan on (subword sampling changes them every epoch)."""
        # int32, as the cache stores them: a memory-mapped array is used in place
        self.src_lengths = np.asarray(src_lengths, dtype=np.int32)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int32)
        # what an example costs in a batch: its longer side plus EOS/BOS
        self.sizes = np.maximum(self.src_lengths, self.tgt_lengths) + 1
        self._memo = None

    @property
    def _lengths(self) -> tuple[np.ndarray, np.ndarray]:
        return self.src_lengths, self.tgt_lengths

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.seed = int(state.get("seed", self.seed))

    def share(self, generator: torch.Generator | None) -> np.ndarray:
        """This rank's examples of the epoch, in a seeded random order: a slice of
        one permutation, so the ranks' shares are disjoint and cover every example."""
        n = len(self.sizes)
        if generator is None:
            order = np.arange(n)
        else:
            order = torch.randperm(n, generator=generator).numpy()
        return order[self.rank :: self.num_replicas]

    def plan_on(self, share: np.ndarray) -> None:
        """Called with this epoch's share before it is planned (subword sampling
        cuts its pieces here)."""

    def _order(self, share: np.ndarray) -> np.ndarray:
        """``share`` stably sorted by (first, second) length: equal lengths keep
        their random order."""
        first, second = self.src_lengths, self.tgt_lengths
        if self.sort_by == "target":
            first, second = second, first
        first, second = first[share], second[share]
        if len(share) == 0:
            return share
        # numpy's stable sort of 16-bit keys is a radix sort (linear time): one key
        # when (first, second) fits 16 bits, else two passes (LSD: by the second,
        # then stably by the first), else a 64-bit key
        span = int(second.max()) + 1
        if (int(first.max()) + 1) * span <= 2**16:
            key = (first.astype(np.int32) * span + second).astype(np.uint16)
            return share[np.argsort(key, kind="stable")]
        if max(int(first.max()), int(second.max())) < 2**16:
            by_second = np.argsort(second.astype(np.uint16), kind="stable")
            by_first = np.argsort(first[by_second].astype(np.uint16), kind="stable")
            return share[by_second[by_first]]
        key = first.astype(np.int64) * span + second
        return share[np.argsort(key, kind="stable")]

    def _chunk(self, order: np.ndarray) -> list[np.ndarray]:
        if len(order) == 0:
            return []
        return np.split(order, cut(self.sizes[order], self.batch_tokens)[1:])

    def _balance(self, batches: list[np.ndarray], count: int) -> list[np.ndarray]:
        """Split the largest batches in two until there are ``count``."""
        while len(batches) < count:
            largest = max(range(len(batches)), key=lambda k: len(batches[k]))
            batch = batches[largest]
            if len(batch) < 2:
                raise ValueError(
                    f"cannot cut {sum(map(len, batches))} examples into {count} "
                    "batches (too few examples for the ranks)"
                )
            half = len(batch) // 2
            batches[largest : largest + 1] = [batch[:half], batch[half:]]
        return batches

    def epoch_batches(self) -> list[np.ndarray]:
        """All of this rank's batches of the current epoch, in order."""
        key = (self.epoch, self.seed, self.shuffle)
        if self._memo is None or self._memo[0] != key:
            self._memo = (key, self._make_batches())
        return self._memo[1]

    def _make_batches(self) -> list[np.ndarray]:
        generator = None
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
        share = self.share(generator)
        self.plan_on(share)
        batches = self._chunk(self._order(share))
        if self.agree is not None:  # every rank runs as many steps
            batches = self._balance(batches, self.agree(len(batches)))
        if generator is not None:
            batches = [
                batches[k] for k in torch.randperm(len(batches), generator=generator)
            ]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.epoch_batches()
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield batch.tolist()
        self.position = 0

    def __len__(self) -> int:
        return len(self.epoch_batches())


def padding_fraction(sampler: TokenBucketSampler) -> float:
    """Share of padding in the source and target tensors of one epoch's batches
    (each batch's maximum by ``reduceat`` over the epoch's examples laid end to end:
    numpy work per epoch, not per batch)."""
    batches = [batch for batch in sampler.epoch_batches() if len(batch)]
    if not batches:
        return 0.0
    examples = np.concatenate(batches)
    starts = np.cumsum([0] + [len(batch) for batch in batches[:-1]])
    counts = np.diff(np.append(starts, len(examples)))
    real = padded = 0
    for lengths in (sampler.src_lengths, sampler.tgt_lengths):
        sizes = lengths[examples].astype(np.int64) + 1  # with EOS/BOS
        real += int(sizes.sum())
        padded += int((np.maximum.reduceat(sizes, starts) * counts).sum())
    return 1.0 - real / padded


class Pairs(Dataset):
    """``(id, src_ids, tgt_ids)`` by index, read from the split when asked (a
    memory-mapped training split stays on disk)."""

    def __init__(self, split: EncodedSplit) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[int, list[int], list[int]]:
        return int(index), self.split.src_ids[index], self.split.tgt_ids[index]


def make_loader(
    split: EncodedSplit,
    batch_tokens: int,
    shuffle: bool,
    seed: int,
    num_replicas: int = 1,
    rank: int = 0,
    pin_memory: bool = False,
    sort_by: str = "source",
    agree: Callable[[int], int] | None = None,
    vocab: VocabCheck | None = None,
) -> DataLoader:
    """A ``DataLoader`` of ``Batch``; its sampler is ``loader.batch_sampler``;
    ``sort_by="target"`` for teacher forcing, ``"source"`` for decoding; ``vocab``
    checks each batch's ids."""
    sampler = TokenBucketSampler(
        split.src_lengths(),
        split.tgt_lengths(),
        batch_tokens,
        shuffle=shuffle,
        seed=seed,
        num_replicas=num_replicas,
        rank=rank,
        sort_by=sort_by,
        agree=agree,
    )
    return batch_loader(Pairs(split), sampler, pin_memory, seed, vocab)


def batch_loader(
    examples: Any,
    sampler: TokenBucketSampler,
    pin_memory: bool,
    seed: int,
    vocab: VocabCheck | None = None,
) -> DataLoader:
    """The ``DataLoader`` of ``Batch`` over ``examples`` (``(id, src_ids, tgt_ids)``
    by index) in the batches of ``sampler``, in this process (exact resume)."""
    return DataLoader(
        examples,
        batch_sampler=sampler,
        collate_fn=collate
        if vocab is None
        else functools.partial(checked_collate, vocab),
        num_workers=0,
        pin_memory=pin_memory,
        # Its own generator: creating an iterator must not draw from the global RNG,
        # or validation and resumption would shift the dropout stream.
        generator=torch.Generator().manual_seed(seed),
    )
