"""Ensemble decoding: one member is that model, two copies are one model, the mixture
is the mean of the members' probabilities, and mismatched vocabularies are refused."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from torch.testing import assert_close

from seq2seq.config import DecodeConfig, TrainConfig
from seq2seq.data.tokenizer import BOS_ID, Tokenizer
from seq2seq.decoding.ensemble import Ensemble
from seq2seq.decoding.search import beam_search, greedy_search, translate_batch
from seq2seq.decoding.translator import Translator
from seq2seq.model.checkpoint import FORMAT, FORMAT_VERSION, save_checkpoint
from seq2seq.model.seq2seq import build_model
from tests.test_search import _batch, _model


def _search_both(model, batch):
    beam = beam_search(model, *batch, DecodeConfig(beam_size=3, n_best=2))
    return greedy_search(model, *batch), [h for hyps in beam for h in hyps]


def test_an_ensemble_of_one_is_that_model_exactly():
    model, batch = _model(), _batch()
    greedy, beam = _search_both(model, batch)
    e_greedy, e_beam = _search_both(Ensemble([model]).eval(), batch)
    for h, g in zip(greedy, e_greedy, strict=True):
        assert h.tokens == g.tokens and h.score == g.score
        assert torch.equal(h.attention, g.attention)
    for h, g in zip(beam, e_beam, strict=True):
        assert h.tokens == g.tokens and h.score == g.score


def test_two_copies_decode_as_one_model():
    model, batch = _model(), _batch()
    greedy, beam = _search_both(model, batch)
    e_greedy, e_beam = _search_both(Ensemble([model, model]).eval(), batch)
    for h, g in zip(greedy + beam, e_greedy + e_beam, strict=True):
        assert h.tokens == g.tokens
        assert h.score == pytest.approx(g.score, abs=1e-4)
        assert_close(h.attention, g.attention)


def test_the_step_mixes_probabilities_and_averages_attention():
    a, b = _model(), _model(attention="luong_general", style="luong")
    src, lengths, mask = _batch()
    ensemble = Ensemble([a, b]).eval()
    prev = torch.full((src.size(0),), BOS_ID)
    with torch.no_grad():
        log_probs, _, weights = ensemble.step(
            prev, ensemble.init_state(ensemble.encode(src, lengths, mask))
        )
        pa, _, wa = a.step(prev, a.init_state(a.encode(src, lengths, mask)))
        pb, _, wb = b.step(prev, b.init_state(b.encode(src, lengths, mask)))
    assert_close(log_probs.exp(), (pa.exp() + pb.exp()) / 2)
    assert_close(weights, (wa + wb) / 2)
    assert_close(log_probs.exp().sum(-1), torch.ones(src.size(0)))
    # Teacher forcing gives the same mixture, and the search decodes through it.
    tgt_in = torch.full((src.size(0), 1), BOS_ID)
    with torch.no_grad():
        forced = ensemble(src, lengths, mask, tgt_in)
    assert_close(forced.logits[:, 0].log_softmax(-1), log_probs)
    batch = type("B", (), {"src": src, "src_lengths": lengths, "src_mask": mask})
    nbests = translate_batch(ensemble, batch, DecodeConfig(beam_size=2))
    assert len(nbests) == src.size(0)


def _checkpoint(path, texts, seed: int, train_batch_tokens: int = 4096):
    tok = Tokenizer.train(texts, texts, vocab_size=40, model_type="bpe", seed=0)
    cfg = OmegaConf.structured(TrainConfig)
    cfg.data.batch_tokens = train_batch_tokens
    cfg.model.emb_dim, cfg.model.decoder.hidden_size = 8, 8
    cfg.model.encoder.hidden_size, cfg.model.encoder.layers = 4, 1
    torch.manual_seed(seed)
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size)
    state = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": model.state_dict(),
        "config": OmegaConf.to_container(cfg, enum_to_str=True),
        "tokenizer": tok.to_bytes(),
        "step": seed,
    }
    return save_checkpoint(path, state)


TEXTS = ["the cat sat on the mat", "a dog runs in the park", "the red car is fast"]


def test_translator_ensembles_checkpoints_of_one_vocabulary(tmp_path):
    a = _checkpoint(tmp_path / "a.pt", TEXTS, seed=1)
    b = _checkpoint(tmp_path / "b.pt", TEXTS, seed=2)
    pair = Translator.from_checkpoint([a, b], device="cpu")
    assert isinstance(pair.model, Ensemble) and len(pair.model.members) == 2
    assert pair.step == 1  # the first checkpoint describes the run
    assert len(pair.translate(["the cat", "", "a dog"])) == 3
    single = Translator.from_checkpoint(a, device="cpu")
    assert not isinstance(single.model, Ensemble)
    other = _checkpoint(tmp_path / "other.pt", [t.upper() for t in TEXTS], seed=3)
    with pytest.raises(
        ValueError, match=rf"{other}.* and {a} have different tokenizers"
    ):
        Translator.from_checkpoint([a, other], device="cpu")


def test_decoding_batch_budget_is_decode_batch_tokens_not_the_training_one(tmp_path):
    """evaluate, translate and align batch by ``decode.batch_tokens`` (old
    checkpoints: its default); ``batch_tokens=`` overrides it."""
    a = _checkpoint(tmp_path / "a.pt", TEXTS, seed=1, train_batch_tokens=512)
    translator = Translator.from_checkpoint(a, device="cpu")
    assert translator.batch_tokens == DecodeConfig.batch_tokens != 512
    assert (
        Translator.from_checkpoint(a, device="cpu", batch_tokens=64).batch_tokens == 64
    )
