import random

import numpy as np
import pytest
import torch

from seq2seq.data.batching import (
    Batch,
    TokenBucketSampler,
    collate,
    cut,
    make_loader,
    padded_size,
    padding_fraction,
)
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


def lengths(n=500, seed=0):
    rng = random.Random(seed)
    src = [rng.randint(1, 40) for _ in range(n)]
    tgt = [max(1, s + rng.randint(-5, 5)) for s in src]
    return src, tgt


def test_collate_pads_and_adds_bos_eos():
    batch = collate([(7, [5, 6, 7], [8]), (9, [5], [8, 9, 10])])
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.src_lengths.tolist() == [4, 2]
    assert batch.src_mask.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID, PAD_ID], [BOS_ID, 8, 9, 10]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, EOS_ID]]
    assert batch.ids.tolist() == [7, 9]
    assert batch.n_tokens == 6
    # the flat positions (row * T + step) of the non-pad targets, one per token
    assert batch.tgt_rows.tolist() == [0, 1, 4, 5, 6, 7]
    assert batch.flat_targets().tolist() == [8, EOS_ID, 8, 9, 10, EOS_ID]


def test_batch_to_keeps_lengths_on_cpu():
    batch = collate([(0, [5, 6], [7])]).to("cpu")
    assert isinstance(batch, Batch) and batch.src_lengths.device.type == "cpu"


def test_budget_never_exceeded_and_every_example_once():
    src, tgt = lengths()
    sampler = TokenBucketSampler(src, tgt, batch_tokens=200, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert all(padded_size(b, src, tgt) <= 200 for b in batches)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))
        assert len(batches) == len(sampler)


def _padding(batches, lengths_):
    real = sum(lengths_[i] + 1 for b in batches for i in b)
    return 1 - real / sum(len(b) * (max(lengths_[i] for i in b) + 1) for b in batches)


def test_sort_by_target_pads_the_targets_least():
    """Training sorts by target length: the decoder's step loop runs each batch to
    its longest target, the packed encoder does not pay for source padding."""
    src, tgt = lengths()
    by_src = list(TokenBucketSampler(src, tgt, 200, seed=1))
    by_tgt = list(TokenBucketSampler(src, tgt, 200, seed=1, sort_by="target"))
    assert sorted(i for b in by_tgt for i in b) == list(range(len(src)))
    assert all(padded_size(b, src, tgt) <= 200 for b in by_tgt)
    assert _padding(by_tgt, tgt) < 0.02 < _padding(by_src, tgt)
    assert _padding(by_src, src) < 0.02 < _padding(by_tgt, src)
    with pytest.raises(ValueError, match="sort_by must be one of"):
        TokenBucketSampler(src, tgt, 200, sort_by="length")


def test_same_seed_same_batches_and_epochs_differ():
    src, tgt = lengths()
    first = list(TokenBucketSampler(src, tgt, 200, seed=5))
    assert first == list(TokenBucketSampler(src, tgt, 200, seed=5))
    other = TokenBucketSampler(src, tgt, 200, seed=5)
    other.set_epoch(1)
    assert list(other) != first


@pytest.mark.parametrize("replicas", [2, 3])
def test_shards_are_disjoint_covering_and_even(replicas):
    """Each rank plans its own share; ``agree`` (a max over ranks under DDP) makes
    every rank run as many steps."""
    src, tgt = lengths(n=301)
    options = {"seed": 2, "num_replicas": replicas}
    alone = [len(TokenBucketSampler(src, tgt, 150, rank=r, **options))
             for r in range(replicas)]  # fmt: skip
    shards = [
        list(TokenBucketSampler(src, tgt, 150, rank=r, agree=lambda n: max(alone),
                                **options))
        for r in range(replicas)
    ]  # fmt: skip
    assert {len(s) for s in shards} == {max(alone)}
    seen = [i for shard in shards for b in shard for i in b]
    assert sorted(seen) == list(range(len(src)))
    assert all(padded_size(b, src, tgt) <= 150 for shard in shards for b in shard)


def reference_batches(src, tgt, budget, seed, epoch, sort_by):
    """The planner before it moved to numpy, in plain Python: the batches every
    Multi30k and phrasebook result was trained on."""
    generator = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(len(src), generator=generator).tolist()
    first, second = (tgt, src) if sort_by == "target" else (src, tgt)
    order = sorted(order, key=lambda i: (first[i], second[i]))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(src[i], tgt[i]) + 1
        if current and (len(current) + 1) * max(longest, size) > budget:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    return [batches[k] for k in torch.randperm(len(batches), generator=generator)]


@pytest.mark.parametrize("sort_by", ["target", "source"])
@pytest.mark.parametrize(
    "budget, longest",
    # 140: one 16-bit key; 1,000: two 16-bit radix passes; 70,000: a 64-bit key;
    # 12: long runs of equal sizes, cut a run at a time
    [
        (7, 140),
        (64, 140),
        (200, 140),
        (4096, 140),
        (4096, 1000),
        (10**6, 70_000),
        (7, 12),
        (100, 12),
        (4096, 12),
    ],
)
def test_numpy_plan_equals_the_python_planner_on_random_lengths(
    sort_by, budget, longest
):
    rng = random.Random(budget + longest)
    n = 3000
    src = [rng.choice([0, 1, rng.randint(1, longest - 10)]) for _ in range(n)]
    tgt = [rng.randint(0, longest) for _ in range(n)]
    sampler = TokenBucketSampler(src, tgt, budget, seed=11, sort_by=sort_by)
    for epoch in (0, 3):
        sampler.set_epoch(epoch)
        expected = reference_batches(src, tgt, budget, 11, epoch, sort_by)
        assert list(sampler) == expected


def test_numpy_plan_equals_the_python_planner_on_multi30k(multi30k_prepared):
    train = multi30k_prepared.splits["train"]
    src, tgt = train.src_lengths().tolist(), train.tgt_lengths().tolist()
    sampler = TokenBucketSampler(src, tgt, 4096, seed=42, sort_by="target")
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        assert list(sampler) == reference_batches(src, tgt, 4096, 42, epoch, "target")


def greedy_starts(sizes: list[int], budget: int) -> list[int]:
    starts, longest = [], 0
    for i, size in enumerate(sizes):
        if i == 0 or (i - starts[-1] + 1) * max(longest, size) > budget:
            starts.append(i)
            longest = 0
        longest = max(longest, size)
    return starts


@pytest.mark.parametrize("budget", [1, 7, 64, 1000])
@pytest.mark.parametrize("shape", ["runs", "sorted runs", "random"])
def test_cut_equals_a_greedy_loop_over_the_examples(budget, shape):
    rng = random.Random(budget)
    if shape == "random":
        sizes = [rng.randint(1, 80) for _ in range(2000)]
    else:  # runs of one size, some longer than a batch, some shorter
        sizes = [
            v for _ in range(150) for v in [rng.randint(1, 30)] * rng.randint(1, 40)
        ]
        if shape == "sorted runs":
            sizes.sort()
    got = cut(np.asarray(sizes), budget).tolist()
    assert got == greedy_starts(sizes, budget)


@pytest.mark.parametrize("budget", [7, 300, 4096])
def test_padding_fraction_equals_a_sum_over_the_batches(budget):
    src, tgt = lengths(2000, seed=budget)
    sampler = TokenBucketSampler(src, tgt, budget, seed=3, sort_by="target")
    real = padded = 0
    for batch in sampler.epoch_batches():
        s = [src[i] + 1 for i in batch]
        t = [tgt[i] + 1 for i in batch]
        real += sum(s) + sum(t)
        padded += len(batch) * (max(s) + max(t))
    assert padding_fraction(sampler) == pytest.approx(1 - real / padded, abs=1e-12)
    assert padding_fraction(TokenBucketSampler([], [], budget)) == 0.0


def test_state_dict_resume_continues_identically():
    src, tgt = lengths()
    reference = TokenBucketSampler(src, tgt, 200, seed=3)
    reference.set_epoch(2)
    expected = list(reference)
    interrupted = TokenBucketSampler(src, tgt, 200, seed=3)
    interrupted.set_epoch(2)
    iterator = iter(interrupted)
    head = [next(iterator) for _ in range(4)]
    state = interrupted.state_dict()
    resumed = TokenBucketSampler(src, tgt, 200, seed=0)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # the trainer's loop calls this again; it must not rewind
    assert head + list(resumed) == expected
    assert resumed.state_dict()["position"] == 0


def test_no_examples_no_batches():
    assert list(TokenBucketSampler([], [], 100)) == []


def test_example_over_budget_gets_its_own_batch():
    sampler = TokenBucketSampler([3, 50, 4], [3, 60, 4], batch_tokens=20, shuffle=False)
    assert [1] in list(sampler)


def test_make_loader_yields_batches():
    split = EncodedSplit(["a"] * 20, ["b"] * 20, [[5] * (i % 7 + 1) for i in range(20)],
                         [[6] * (i % 5 + 1) for i in range(20)])  # fmt: skip
    loader = make_loader(split, batch_tokens=32, shuffle=True, seed=0)
    ids = []
    for batch in loader:
        assert isinstance(batch, Batch)
        assert batch.src.numel() <= 32 and batch.tgt_out.numel() <= 32
        ids += batch.ids.tolist()
        torch.testing.assert_close(batch.src_lengths, batch.src_mask.sum(1))
    assert sorted(ids) == list(range(20))
