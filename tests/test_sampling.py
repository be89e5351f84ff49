"""Subword sampling: new pieces every epoch, never a new text; SentencePiece's
distribution; reproducible from (seed, epoch) in any process; batches planned from
the sampled lengths; the cache untouched."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from seq2seq.config import TokenizerConfig
from seq2seq.data.batching import padded_size
from seq2seq.data.lattice import UnigramSampler
from seq2seq.data.prepare import PreparedData, prepare_data
from seq2seq.data.sampling import (
    SampledBucketSampler,
    SampledExamples,
    SubwordSampling,
    epoch_generator,
    make_sampled_loader,
    subword_sampling,
)
from tests.conftest import REPO_ROOT
from tests.helpers import phrasebook_config

UNIGRAM = SubwordSampling(alpha=0.2)


def _prepared(cache: Path, **tokenizer: object) -> PreparedData:
    cfg = TokenizerConfig(vocab_size=300, **tokenizer)  # type: ignore[arg-type]
    return prepare_data(phrasebook_config(300, 20, 20), cfg, cache)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> PreparedData:
    return _prepared(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def examples(data) -> SampledExamples:
    return SampledExamples(data.splits["train"], data.tokenizer, UNIGRAM)


def _changed(a: list[list[int]], b: list[list[int]]) -> float:
    return sum(x != y for x, y in zip(a, b, strict=True)) / len(a)


def test_sampling_changes_the_pieces_never_the_text(data, examples):
    cached, tok = data.splits["train"], data.tokenizer
    first, second = examples.sample(42, 0), examples.sample(42, 1)
    for split in (first, second):
        assert split.src_text == cached.src_text and split.tgt_text == cached.tgt_text
        assert split.alignment == cached.alignment
        assert _changed(split.src_ids, cached.src_ids) > 0.3
        assert _changed(split.tgt_ids, cached.tgt_ids) > 0.3
        for k in range(len(cached)):  # the pieces still spell the same text
            assert tok.decode_src(split.src_ids[k]) == tok.decode_src(cached.src_ids[k])
            assert tok.decode_tgt(split.tgt_ids[k]) == tok.decode_tgt(cached.tgt_ids[k])
    assert _changed(first.src_ids, second.src_ids) > 0.3  # two epochs differ
    assert _changed(first.tgt_ids, second.tgt_ids) > 0.3
    assert first.src_ids != examples.sample(7, 0).src_ids  # so do two seeds
    assert examples.sample(42, 1) == second  # the same (seed, epoch): the same


def test_separate_models_sample_each_side_with_its_own(tmp_path):
    data = _prepared(tmp_path, joint=False)
    cached, tok = data.splits["train"], data.tokenizer
    sampled = SampledExamples(cached, tok, UNIGRAM).sample(42, 0)
    assert _changed(sampled.tgt_ids, cached.tgt_ids) > 0.3
    for k in range(len(cached)):
        assert tok.decode_src(sampled.src_ids[k]) == tok.decode_src(cached.src_ids[k])
        assert tok.decode_tgt(sampled.tgt_ids[k]) == tok.decode_tgt(cached.tgt_ids[k])


def test_unknown_characters_come_out_as_sentencepiece_writes_them(data):
    processor = data.tokenizer.processor("src")
    texts = ["we  open ΩΩ my Ω windows", "ΩΩΩ"]  # Ω is not in the vocabulary
    sampled = UnigramSampler(processor, texts, 0.2).sample(np.random.default_rng(0))
    for text, ids in zip(texts, sampled, strict=True):
        reference = processor.encode(text, out_type=int)
        assert processor.decode(ids) == processor.decode(reference)
        assert ids.count(processor.unk_id()) == reference.count(processor.unk_id())


def _exact(processor: spm.SentencePieceProcessor, text: str, alpha: float) -> dict:
    """Every segmentation of ``text`` and its probability, by enumeration."""
    vocab = {
        processor.id_to_piece(i): (i, processor.get_score(i))
        for i in range(processor.get_piece_size())
        if not (processor.is_control(i) or processor.is_unknown(i))
    }
    normalized = processor.normalize(text)

    def cuts(rest: str):
        if not rest:
            yield (), 0.0
        for n in range(1, len(rest) + 1):
            if rest[:n] in vocab:
                piece, score = vocab[rest[:n]]
                for tail, total in cuts(rest[n:]):
                    yield (piece, *tail), score + total

    weights = {seg: math.exp(alpha * total) for seg, total in cuts(normalized)}
    z = sum(weights.values())
    return {seg: w / z for seg, w in weights.items()}


def _distance(draws: list[list[int]], exact: dict) -> float:
    """Total-variation distance of the draws' frequencies from ``exact``."""
    counts = Counter(map(tuple, draws))
    assert set(counts) <= set(exact)
    return 0.5 * sum(abs(counts[s] / len(draws) - p) for s, p in exact.items())


def test_the_draws_follow_sentencepieces_distribution(data):
    """Our sampler and SentencePiece's own both match the enumerated distribution."""
    processor, n = data.tokenizer.processor("src"), 40_000
    for text, alpha in (("a pen", 0.2), ("big park", 0.5), ("open windows", 0.1)):
        exact = _exact(processor, text, alpha)
        assert 5 < len(exact) < 100 and max(exact.values()) < 0.7
        ours = UnigramSampler(processor, [text] * n, alpha).sample(
            np.random.default_rng(1)
        )
        spm.set_random_generator_seed(1)
        theirs = processor.encode(
            [text] * n, out_type=int, enable_sampling=True, alpha=alpha, nbest_size=-1
        )
        assert _distance(ours, exact) < 0.03
        assert _distance(theirs, exact) < 0.03


def test_another_process_samples_the_same_pieces(data, examples, tmp_path):
    """What a resumed run (a new process) and the other DDP ranks rely on; with
    SentencePiece's own seeded sampler this fails (a per-process salt)."""
    model = tmp_path / "joint.model"
    model.write_bytes(data.tokenizer.to_bytes()["joint"])
    texts = list(data.splits["train"].tgt_text)
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from seq2seq.data.lattice import UnigramSampler\n"
        "from seq2seq.data.sampling import epoch_generator\n"
        "from seq2seq.data.tokenizer import Tokenizer\n"
        "tok = Tokenizer(Path(sys.argv[1]).read_bytes())\n"
        "sampler = UnigramSampler(tok.processor('tgt'), json.load(sys.stdin), 0.2)\n"
        "print(json.dumps(sampler.sample(epoch_generator(42, 3, 'tgt'))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(model)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert json.loads(proc.stdout) == examples.sample(42, 3).tgt_ids


def test_alpha_zero_is_off_and_what_cannot_work_is_refused():
    assert subword_sampling(0.0, "unigram") is None
    assert subword_sampling(0.0, "bpe") is None
    assert subword_sampling(0.3, "unigram") == SubwordSampling(0.3, "unigram")
    with pytest.raises(ValueError, match=r"alpha of -0.1: must be >= 0"):
        subword_sampling(-0.1, "unigram")
    with pytest.raises(ValueError, match=r"a bpe model cannot be sampled"):
        subword_sampling(0.1, "bpe")


def test_the_cache_ignores_the_sampling_settings(tmp_path):
    plain = _prepared(tmp_path)
    sampled = _prepared(tmp_path, sampling_alpha=0.3)
    assert sampled.cached and sampled.cache_dir == plain.cache_dir
    assert {k: v.in_memory() for k, v in sampled.splits.items()} == {
        k: v.in_memory() for k, v in plain.splits.items()
    }


def _epoch(loader) -> list:
    return [(b.ids.tolist(), b.src.tolist(), b.tgt_out.tolist()) for b in loader]


def test_loader_plans_each_epoch_from_its_sampled_lengths(data, examples):
    cached, tok = data.splits["train"], data.tokenizer
    loader = make_sampled_loader(cached, tok, UNIGRAM, batch_tokens=400, seed=42)
    sampler = loader.batch_sampler
    assert isinstance(sampler, SampledBucketSampler)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(loader)
        expected = examples.sample(42, epoch)
        assert sampler.src_lengths.tolist() == [len(s) for s in expected.src_ids]
        assert sorted(i for b in batches for i in b.ids.tolist()) == list(
            range(len(cached))
        )
        for batch in batches:
            ids = batch.ids.tolist()
            assert padded_size(ids, *sampler._lengths) <= 400 or len(ids) == 1
            for row, k in enumerate(ids):
                n = len(expected.tgt_ids[k])
                assert batch.tgt_out[row, :n].tolist() == expected.tgt_ids[k]
        epochs.append(_epoch(batches))
    assert epochs[0] != epochs[1]


def test_a_resumed_sampler_recreates_the_epoch_and_its_remaining_batches(data):
    cached, tok = data.splits["train"], data.tokenizer

    def loader(seed: int):
        return make_sampled_loader(cached, tok, UNIGRAM, batch_tokens=400, seed=seed)

    full = loader(42)
    full.batch_sampler.set_epoch(2)
    reference = _epoch(full)
    first = loader(42)
    first.batch_sampler.set_epoch(2)
    it = iter(first)
    done = [next(it) for _ in range(3)]
    resumed = loader(0)
    resumed.batch_sampler.load_state_dict(first.batch_sampler.state_dict())  # seed 42
    assert _epoch(done) + _epoch(resumed) == reference


def test_sampled_pairs_longer_than_max_len_and_the_budget_are_kept(tmp_path):
    """``max_len`` filters the cached pieces; a sampled pair may be longer: nothing is
    truncated and one too long for the budget alone gets a batch of its own."""
    corpus = phrasebook_config(300, 20, 20)
    corpus.max_len = 40
    data = prepare_data(corpus, TokenizerConfig(vocab_size=300), tmp_path)
    cached, tok = data.splits["train"], data.tokenizer
    longest = max(max(cached.src_lengths()), max(cached.tgt_lengths()))
    assert longest <= 40 < longest + 10  # long pairs filtered, the longest kept
    budget = 48  # every cached pair fits alone
    flat = SubwordSampling(alpha=0.01)  # far more pieces than the best cut
    loader = make_sampled_loader(cached, tok, flat, batch_tokens=budget, seed=1)
    batches = list(loader)
    examples = loader.dataset.current
    assert max(len(ids) for ids in examples.src_ids + examples.tgt_ids) > budget
    assert sorted(i for b in batches for i in b.ids.tolist()) == list(
        range(len(cached))
    )
    for batch in batches:
        ids = batch.ids.tolist()
        assert padded_size(ids, *loader.batch_sampler._lengths) <= budget or (
            len(ids) == 1
        )
        for row, k in enumerate(ids):  # all of it, no piece cut off
            assert (
                batch.src[row, : batch.src_lengths[row] - 1].tolist()
                == (examples.src_ids[k])
            )
            assert tok.decode_tgt(batch.tgt_out[row].tolist()) == tok.decode_tgt(
                cached.tgt_ids[k]
            )


def test_a_share_is_cut_as_the_whole_split_would_cut_it_alone(data):
    """A DDP rank samples its share only: the pieces come from the same lattices,
    each text's pieces are a segmentation of that text, and the whole-split draw
    (one process) is what it was."""
    tok = data.tokenizer
    split = data.splits["train"]
    sampler = UnigramSampler(tok.processor("tgt"), list(split.tgt_text), 0.2)
    whole = sampler.sample(epoch_generator(1, 0, "tgt"))
    assert whole == sampler.sample(epoch_generator(1, 0, "tgt"), None)
    share = np.arange(3, len(split), 7)
    part = sampler.sample(epoch_generator(1, 0, "tgt"), share)
    assert len(part) == len(share)
    for index, pieces in zip(share.tolist(), part, strict=True):
        assert tok.decode_tgt(pieces) == tok.decode_tgt(split.tgt_ids[index])
