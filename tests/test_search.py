"""Search: greedy and beam agree, batching is transparent, beams end correctly, and a
wide beam finds the exhaustive optimum under the length penalty."""

import itertools
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from torch.nn import functional as F
from torch.testing import assert_close

from seq2seq.config import (
    AttentionConfig,
    DecodeConfig,
    DecoderConfig,
    EncoderConfig,
    ModelConfig,
    SelfAttentionConfig,
)
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from seq2seq.decoding.search import (
    beam_search,
    greedy_search,
    length_penalty,
    translate_batch,
)
from seq2seq.decoding.settings import (
    DEFAULT_MAX_LEN_A,
    DEFAULT_MAX_LEN_B,
    max_lengths,
)
from seq2seq.decoding.settings import decode_settings as _settings
from seq2seq.model.seq2seq import build_model

V_SRC = 15


def _model(v_tgt=17, attention="bahdanau", style=None, sharpen=1.0, blocks=0):
    """A tiny model; ``blocks`` self-attention blocks over the encoder's states."""
    cfg = ModelConfig(
        emb_dim=6,
        encoder=EncoderConfig(
            hidden_size=4,
            layers=1,
            self_attention=SelfAttentionConfig(layers=blocks, heads=2, ffn=12),
        ),
        decoder=DecoderConfig(style=style, hidden_size=8),
        attention=AttentionConfig(type=attention, heads=2),
    )
    torch.manual_seed(0)
    model = build_model(cfg, V_SRC, v_tgt)
    with torch.no_grad():
        model.decoder.output.proj.weight.mul_(sharpen)
    return model.eval()


def _batch(lengths=(5, 3, 1)):
    torch.manual_seed(5)
    lengths = torch.tensor(lengths)
    s = int(lengths.max())
    mask = torch.arange(s)[None] < lengths[:, None]
    src = torch.randint(4, V_SRC, (len(lengths), s)).masked_fill(~mask, PAD_ID)
    return src, lengths, mask


def _same(h, g):
    assert h.tokens == g.tokens
    assert h.finished == g.finished
    assert_close(h.score, g.score, atol=1e-4, rtol=1e-4)
    assert_close(h.attention, g.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("blocks", [0, 1], ids=["gru", "self-attention"])
@pytest.mark.parametrize(
    ("attention", "style"), [("bahdanau", None), ("multihead", "luong")]
)
def test_beam_one_equals_greedy(attention, style, blocks):
    model = _model(attention=attention, style=style, sharpen=5.0, blocks=blocks)
    args = _batch()
    greedy = greedy_search(model, *args, _settings(max_len_a=1.0, max_len_b=4))
    beam = beam_search(
        model,
        *args,
        _settings(beam_size=1, length_penalty=0.0, max_len_a=1.0, max_len_b=4),
    )
    for g, [h] in zip(greedy, beam, strict=True):
        _same(h, g)


def test_batched_equals_one_at_a_time():
    model = _model(sharpen=3.0)
    src, lengths, mask = _batch()
    greedy = greedy_search(model, src, lengths, mask)
    beams = beam_search(model, src, lengths, mask, _settings(beam_size=4, n_best=3))
    for i, n in enumerate(lengths.tolist()):
        one = (src[i : i + 1, :n], lengths[i : i + 1], mask[i : i + 1, :n])
        _same(greedy_search(model, *one)[0], greedy[i])
        [alone] = beam_search(model, *one, _settings(beam_size=4, n_best=3))
        for h, g in zip(alone, beams[i], strict=True):
            _same(h, g)


def test_n_best_sorted_and_well_formed():
    model = _model(sharpen=2.0)
    src, lengths, mask = _batch()
    limits = max_lengths(lengths, DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B).tolist()
    for hyps, n, limit in zip(
        beam_search(model, src, lengths, mask, _settings(beam_size=5, n_best=4)),
        lengths.tolist(),
        limits,
        strict=True,
    ):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for h in hyps:
            assert h.attention.shape == (len(h.tokens), n)
            assert_close(h.attention.sum(-1), torch.ones(len(h.tokens)))
            assert EOS_ID not in h.tokens[:-1]
            assert PAD_ID not in h.tokens and BOS_ID not in h.tokens
            assert h.finished == (h.tokens[-1] == EOS_ID)
            assert len(h.tokens) <= limit
            assert h.finished or len(h.tokens) == limit


@pytest.mark.parametrize("beam_size", [1, 3])
def test_hypotheses_stop_at_eos(beam_size):
    model = _model()
    with torch.no_grad():
        model.decoder.output.proj.bias[EOS_ID] = 50.0
    src, lengths, mask = _batch()
    for hyps in translate_batch(
        model,
        SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask),
        DecodeConfig(beam_size=beam_size, n_best=1),
    ):
        assert hyps[0].tokens == [EOS_ID]
        assert hyps[0].finished


@pytest.mark.parametrize("beam_size", [1, 3])
def test_hypotheses_respect_max_length(beam_size):
    model = _model()
    with torch.no_grad():
        model.decoder.output.proj.bias[EOS_ID] = -50.0
    src, lengths, mask = _batch()
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=0.5, max_len_b=2)
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    for [h], n in zip(
        translate_batch(model, batch, cfg), lengths.tolist(), strict=True
    ):
        assert len(h.tokens) == int(0.5 * n + 2)
        assert not h.finished


def _exhaustive(model, src, max_len, alpha):
    """Every finished hypothesis up to ``max_len`` tokens, scored by teacher forcing."""
    words = [UNK_ID, *range(4, model.decoder.output.proj.out_features)]
    seqs = [
        [*prefix, EOS_ID]
        for n in range(max_len)
        for prefix in itertools.product(words, repeat=n)
    ]
    tgt_in = torch.full((len(seqs), max_len), PAD_ID)
    tgt_out = torch.full((len(seqs), max_len), PAD_ID)
    for i, seq in enumerate(seqs):
        tgt_in[i, : len(seq)] = torch.tensor([BOS_ID, *seq[:-1]])
        tgt_out[i, : len(seq)] = torch.tensor(seq)
    n = len(seqs)
    with torch.no_grad():
        logits = model(
            src.expand(n, -1),
            torch.tensor([src.size(1)] * n),
            torch.ones(n, src.size(1), dtype=torch.bool),
            tgt_in,
        ).logits
    lp = F.log_softmax(logits, -1).gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    raw = lp.masked_fill(tgt_out == PAD_ID, 0.0).sum(-1)
    pen = raw / length_penalty(torch.tensor([len(s) for s in seqs]).double(), alpha)
    order = pen.argsort(descending=True).tolist()
    return [(seqs[i], float(pen[i])) for i in order]


def _peaked_model():
    """A random model with N(0, 1) weights: peaked distributions, and for this seed the
    best hypothesis under α = 0 is shorter than under α > 0."""
    model = _model(v_tgt=6)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 1.0)
        model.decoder.output.proj.bias[EOS_ID] = 1.0
    return model


@pytest.mark.parametrize("alpha", [0.0, 1.0, 3.0])
def test_wide_beam_matches_exhaustive_search(alpha):
    """Target vocabulary: 3 words + EOS, at most 4 tokens: 40 finished hypotheses. A
    beam of 4·3³ keeps every candidate, so only the stopping rule can go wrong."""
    model = _peaked_model()
    src, lengths, mask = _batch(lengths=(4,))
    ranked = _exhaustive(model, src, max_len=4, alpha=alpha)
    settings = _settings(
        beam_size=4 * 27, length_penalty=alpha, max_len_a=0.0, max_len_b=4, n_best=5
    )
    [hyps] = beam_search(model, src, lengths, mask, settings)
    assert [h.tokens for h in hyps] == [seq for seq, _ in ranked[:5]]
    scores = torch.tensor([h.score for h in hyps])
    assert_close(
        scores, torch.tensor([score for _, score in ranked[:5]]), rtol=1e-5, atol=1e-5
    )


def test_length_penalty_prefers_the_longer_hypothesis():
    """Under α = 1 the search goes on after the α = 0 answer has finished."""
    model = _peaked_model()
    args = _batch(lengths=(4,))
    kw = {"beam_size": 12, "max_len_a": 0.0, "max_len_b": 4}
    [[short]] = beam_search(model, *args, _settings(length_penalty=0.0, **kw))
    [[long]] = beam_search(model, *args, _settings(length_penalty=1.0, **kw))
    assert short.tokens == [5, 4, EOS_ID]
    assert long.tokens == [5, 5, 4, EOS_ID]


def test_search_restores_training_mode_and_checks_n_best():
    model = _model().train()
    src, lengths, mask = _batch()
    beam_search(model, src, lengths, mask, _settings(beam_size=2))
    assert model.training
    too_many = OmegaConf.merge(_settings(beam_size=2), {"n_best": 3})  # unchecked
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, src, lengths, mask, too_many)


def test_stop_best_ends_early_and_never_beats_the_exact_rule():
    """``stop="best"`` (JoeyNMT's and OpenNMT-py's rule) ends a sentence as soon as
    its best hypothesis has ended; the exact rule goes on and may find a better one
    later, never a worse one. Seed 10 has such a sentence at α = 2."""
    model = _model(v_tgt=12)
    torch.manual_seed(10)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    args = _batch()
    kw = {"beam_size": 3, "length_penalty": 2.0, "max_len_a": 0.0, "max_len_b": 10}
    exact = beam_search(model, *args, _settings(stop="bound", **kw))
    early = beam_search(model, *args, _settings(stop="best", **kw))
    for [e], [b] in zip(exact, early, strict=True):
        assert b.score <= e.score + 1e-6
    assert early[0][0].tokens == [5, 1, 1, 1, 1, 5, 6, EOS_ID]
    assert exact[0][0].tokens == [5, 1, 1, 1, 1, 1, 5, 6, 6, EOS_ID]
    greedy = greedy_search(model, *args, _settings(max_len_a=0.0, max_len_b=10))
    one = beam_search(
        model,
        *args,
        _settings(length_penalty=0.0, max_len_a=0.0, max_len_b=10, stop="best"),
    )
    for g, [h] in zip(greedy, one, strict=True):
        _same(h, g)


def test_unknown_stop_rule_is_rejected():
    model = _model()
    with pytest.raises(ValueError, match="'first' is not a valid Stop"):
        beam_search(model, *_batch(), DecodeConfig(beam_size=2, stop="first"))


def test_decode_settings_default_override_and_check_the_stop_rule():
    old_checkpoint = OmegaConf.create({"beam_size": 5})  # saved before decode.stop
    assert _settings(old_checkpoint).stop == "bound"
    assert _settings(old_checkpoint, stop="best").stop == "best"
    with pytest.raises(ValueError, match=r"Invalid value 'first'.*\[bound, best\]"):
        _settings(old_checkpoint, stop="first")


def _raw_log_prob(model, src, lengths, mask, row: int, tokens: list[int]) -> float:
    """Sum of the model's log-probabilities of ``tokens`` for sentence ``row``."""
    n = int(lengths[row])
    tgt_in = torch.tensor([[BOS_ID, *tokens[:-1]]])
    with torch.no_grad():
        out = model(
            src[row : row + 1, :n],
            lengths[row : row + 1],
            mask[row : row + 1, :n],
            tgt_in,
        )
    log_probs = F.log_softmax(out.logits[0].float(), dim=-1)
    return float(log_probs.gather(1, torch.tensor(tokens)[:, None]).sum())


@pytest.mark.parametrize("stop", ["bound", "best"])
def test_coverage_penalty_zero_is_todays_search(stop):
    """β = 0 is the search without coverage; a vanishing β runs the coverage code and
    must not change a hypothesis."""
    model, batch = _model(), _batch()
    plain = beam_search(model, *batch, _settings(beam_size=4, n_best=3, stop=stop))
    kw = {"beam_size": 4, "n_best": 3, "stop": stop}
    zero = beam_search(model, *batch, _settings(coverage_penalty=0.0, **kw))
    tiny = beam_search(model, *batch, _settings(coverage_penalty=1e-30, **kw))
    for p, z, t in zip(plain, zero, tiny, strict=True):
        for h, g, u in zip(p, z, t, strict=True):
            assert h.tokens == g.tokens == u.tokens and h.score == g.score
            assert_close(u.score, h.score)


def test_coverage_penalty_matches_a_hand_computation():
    beta, alpha = 0.7, 1.0
    model, batch = _model(sharpen=3.0), _batch((5, 3, 1, 4, 2))
    with torch.no_grad():
        model.decoder.output.proj.bias[EOS_ID] += 2.0  # more finished hypotheses
    src, lengths, mask = batch
    settings = _settings(
        beam_size=4, n_best=3, length_penalty=alpha, coverage_penalty=beta
    )
    nbests = beam_search(model, *batch, settings)
    checked = 0
    for row, hyps in enumerate(nbests):
        for h in hyps:
            if not h.finished:
                continue
            raw = _raw_log_prob(model, src, lengths, mask, row, h.tokens)
            coverage = h.attention.sum(dim=0).clamp(max=1.0)  # (S_real,)
            expected = raw / length_penalty(len(h.tokens), alpha)
            expected += beta * float(coverage.log().sum())
            assert h.score == pytest.approx(expected, rel=1e-4, abs=1e-4)
            checked += 1
    assert checked >= 3
    with pytest.raises(ValueError, match=r"coverage_penalty=-1\.0"):
        beam_search(model, *batch, DecodeConfig(beam_size=2, coverage_penalty=-1.0))
