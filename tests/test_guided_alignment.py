"""Guided alignment: the gold attention's pieces, the loss, and that it guides."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.alignment.guided import (
    GoldAttention,
    SampledGoldAttention,
    guided_alignment_loss,
    pair_gold,
)
from seq2seq.alignment.links import parse_pharaoh
from seq2seq.alignment.words import regroup, word_alignment_from_attention
from seq2seq.data.prepare import prepare_data
from seq2seq.data.splits import EncodedSplit
from seq2seq.training.trainer import Trainer
from tests.helpers import build_trainer, tiny_train_config


def _dense(gold, n_tgt: int, n_src: int) -> torch.Tensor:
    rows, cols, weights = (torch.from_numpy(a) for a in gold)
    out = torch.zeros(n_tgt, n_src)
    out[rows, cols] = weights
    return out


def test_pair_gold_spreads_each_word_over_its_pieces():
    # source words: piece 0 | pieces 1, 2; target words: pieces 0, 1 | piece 2
    gold = _dense(pair_gold([[0], [1, 2]], [[0, 1], [2]], "1-0 0?1 1?1"), 4, 4)
    expected = torch.tensor(
        [
            [0.0, 0.5, 0.5, 0.0],  # both pieces of target word 0 read source word 1
            [0.0, 0.5, 0.5, 0.0],
            [1 / 3, 1 / 3, 1 / 3, 0.0],  # target word 1: source words 0 and 1
            [0.0, 0.0, 0.0, 0.0],  # the EOS step is free
        ]
    )
    torch.testing.assert_close(gold, expected)


def test_pair_gold_leaves_unaligned_words_free_and_rejects_bad_links():
    gold = _dense(pair_gold([[0], [1]], [[0], [1]], "0-1"), 2, 2)
    assert gold[0].sum() == 0 and gold[1].tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="outside a pair of 2 source and 2 target"):
        pair_gold([[0], [1]], [[0], [1]], "0-2")


def test_loss_is_the_cross_entropy_of_the_gold_rows_only():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 4, requires_grad=True)
    attention = logits.softmax(-1)
    gold = torch.zeros(2, 3, 4)
    gold[0, 1, 2] = 1.0
    gold[1, 0, :2] = 0.5
    loss = guided_alignment_loss(attention, gold)
    expected = -(
        attention[0, 1, 2].log()
        + 0.5 * attention[1, 0, 0].log()
        + 0.5 * attention[1, 0, 1].log()
    )
    torch.testing.assert_close(loss, expected)
    loss.backward()
    free = torch.ones(2, 3, dtype=torch.bool)
    free[0, 1] = free[1, 0] = False
    assert logits.grad[free].abs().max() == 0  # rows without gold are not pushed


def _phrasebook(tmp_path: Path):
    cfg = tiny_train_config(tmp_path / "cache")
    return prepare_data(cfg.data, cfg.tokenizer, Path(cfg.data.cache_dir))


def test_gold_attention_reads_back_as_the_phrasebook_links(tmp_path):
    data = _phrasebook(tmp_path)
    split, tok = data.splits["train"], data.tokenizer
    gold = GoldAttention(split, tok)
    checked = 0
    for k, pair in enumerate(gold.pairs):
        if pair is None:
            continue
        src = tok.src_pieces(list(split.src_ids[k]))
        tgt = tok.tgt_pieces(list(split.tgt_ids[k]))
        dense = gold.batch([k], len(tgt) + 1, len(src) + 1)[0]
        rows = dense.sum(-1)
        assert torch.all(((rows - 1).abs() < 1e-6) | (rows == 0))
        _, possible = parse_pharaoh(split.alignment[k])
        aligned = {j for _, j in possible}
        links = word_alignment_from_attention(dense, src, tgt)
        assert {link for link in links if link[1] in aligned} <= possible
        checked += 1
    assert checked > 0.9 * len(split)
    n_tgt = max(len(split.tgt_ids[k]) for k in (0, 1)) + 1
    n_src = max(len(split.src_ids[k]) for k in (0, 1)) + 1
    assert gold.batch([0, 1], n_tgt + 3, n_src + 2).shape == (2, n_tgt + 3, n_src + 2)


def test_gold_attention_needs_gold_links():
    split = EncodedSplit(["a"], ["b"], [[4]], [[5]], alignment=None)
    with pytest.raises(ValueError, match="needs word alignments of the training split"):
        GoldAttention(split, tokenizer=None)


def _trainer(tmp_path: Path, run: str, *overrides: str) -> Trainer:
    cfg = tiny_train_config(tmp_path / "cache", "optim.lr=0.005", *overrides)
    return build_trainer(cfg, tmp_path / run)


def test_guided_training_pulls_the_attention_to_the_gold(tmp_path):
    """Same seed, same batch, 80 steps: only the guided run learns the alignment."""
    free = _trainer(tmp_path, "free")
    guided = _trainer(tmp_path, "guided", "trainer.guided_alignment=1.0")
    batch = next(iter(guided.loader))
    gold = guided.gold.batch(
        batch.ids.tolist(), batch.tgt_out.size(1), batch.src.size(1)
    )
    rows = int((gold.sum(-1) > 0).sum())

    def gold_cross_entropy(trainer: Trainer) -> float:
        trainer.model.eval()  # no dropout: the same weights give the same attention
        with torch.no_grad():
            out = trainer.model(
                batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in
            )
        return float(guided_alignment_loss(out.attention, gold)) / rows

    before = gold_cross_entropy(guided)
    assert gold_cross_entropy(free) == pytest.approx(before)  # same initial weights
    for _ in range(80):
        free.train_step([batch])
        guided.train_step([batch])
    assert gold_cross_entropy(guided) < 0.6 * before
    assert gold_cross_entropy(guided) < 0.5 * gold_cross_entropy(free)


def test_guided_alignment_needs_an_attention(tmp_path):
    with pytest.raises(ValueError, match="needs a model that attends"):
        _trainer(tmp_path, "none", "model/attention=none", "trainer.guided_alignment=1")


def test_guided_training_logs_its_alignment_loss(tmp_path):
    trainer = _trainer(tmp_path, "run", "trainer.guided_alignment=0.5")
    trainer.fit()
    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    values = [e.value for e in events.Scalars("train/alignment_loss")]
    assert [e.step for e in events.Scalars("train/alignment_loss")] == [5, 10, 15, 20]
    assert all(0 < v < 10 for v in values)
    free = _trainer(tmp_path, "free")
    free.fit()
    events = EventAccumulator(str(tmp_path / "free" / "tb"))
    events.Reload()
    assert "train/alignment_loss" not in events.Tags()["scalars"]


def test_guided_alignment_follows_the_sampled_pieces(tmp_path):
    """With subword sampling the gold is rebuilt from each epoch's pieces."""
    trainer = _trainer(
        tmp_path,
        "sampled",
        "trainer.guided_alignment=1.0",
        "tokenizer.sampling_alpha=0.2",
    )
    tok, cached = trainer.data.tokenizer, trainer.data.splits["train"]
    assert isinstance(trainer.gold, SampledGoldAttention)
    for epoch in (0, 1):
        trainer.sampler.set_epoch(epoch)
        batch = next(iter(trainer.loader))
        ids, shape = batch.ids.tolist(), (batch.tgt_out.size(1), batch.src.size(1))
        gold = trainer.gold.batch(ids, *shape)
        pieces = trainer.loader.dataset.current
        assert pieces.src_ids != cached.src_ids
        torch.testing.assert_close(gold, GoldAttention(pieces, tok).batch(ids, *shape))
        assert not torch.equal(gold, GoldAttention(cached, tok).batch(ids, *shape))
        stats = trainer.train_step([batch])
        assert stats is not None and float(stats["align_sum"]) > 0


def test_a_links_file_is_what_the_attention_is_guided_to(tmp_path):
    """data.alignments.train=FILE: the gold rows follow the file, not the corpus."""
    first = _trainer(tmp_path, "gold", "trainer.guided_alignment=1.0")
    n_pairs = len(first.data.splits["train"])
    links = tmp_path / "train.links"
    links.write_text("0-0\n" * n_pairs)  # every pair: target word 0 -> source word 0
    trainer = _trainer(
        tmp_path,
        "file",
        "trainer.guided_alignment=1.0",
        f"data.alignments.train={links}",
    )
    assert list(trainer.data.splits["train"].alignment) == ["0-0"] * n_pairs
    assert (
        first.data.splits["train"].alignment != trainer.data.splits["train"].alignment
    )
    batch = next(iter(trainer.loader))
    gold = trainer.gold.batch(
        batch.ids.tolist(), batch.tgt_out.size(1), batch.src.size(1)
    )
    tok, split = trainer.data.tokenizer, trainer.data.splits["train"]
    for row, index in enumerate(batch.ids.tolist()):
        src = regroup(tok.src_pieces(list(split.src_ids[index])), split.src_text[index])
        tgt = regroup(tok.tgt_pieces(list(split.tgt_ids[index])), split.tgt_text[index])
        if src is None or tgt is None:
            continue
        aligned = (gold[row].sum(-1) > 0).nonzero().flatten().tolist()
        assert aligned == tgt[0]  # only the first target word's pieces are guided
        for t in tgt[0]:
            assert gold[row, t].nonzero().flatten().tolist() == src[0]
