"""The search's vocabulary projection in bf16 (``decode.vocab_precision``): the math
of the bf16 path, its weights following the model's, where it applies, how ``auto``
resolves, and how the setting reaches the search from the config and the CLI."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from seq2seq.config import AttentionConfig, DecoderConfig, EncoderConfig, ModelConfig
from seq2seq.data.tokenizer import BOS_ID, PAD_ID
from seq2seq.decoding import search as search_module
from seq2seq.decoding.search import (
    beam_search,
    greedy_search,
    rescored_candidates,
    translate_batch,
)
from seq2seq.decoding.translator import decode_settings
from seq2seq.model import device as device_module
from seq2seq.model.decoder import forget_search_tables, vocab_precision
from seq2seq.model.device import resolve_vocab_dtype
from seq2seq.model.seq2seq import build_model

V_SRC, V_TGT = 15, 40
CPU = torch.device("cpu")


def _model(style="bahdanau", tie=False, emb_dim=6):
    cfg = ModelConfig(
        emb_dim=emb_dim,
        encoder=EncoderConfig(hidden_size=4, layers=1),
        decoder=DecoderConfig(style=style, hidden_size=8),
        attention=AttentionConfig(type="bahdanau"),
        tie_embeddings=tie,
    )
    torch.manual_seed(0)
    model = build_model(cfg, V_SRC, V_TGT)
    with torch.no_grad():  # logits of a trained model's scale, so bf16 rounding shows
        model.decoder.output.proj.weight.mul_(20.0)
    return model.eval()


def _batch():
    torch.manual_seed(5)
    lengths = torch.tensor([5, 3, 1, 4])
    mask = torch.arange(5)[None] < lengths[:, None]
    src = torch.randint(4, V_SRC, (4, 5)).masked_fill(~mask, PAD_ID)
    return src, lengths, mask


def _first_step(model, dtype, candidates=0):
    """The first search step's log-probabilities within ``vocab_precision(dtype,
    candidates)``, and its features (the vocabulary projection's input)."""
    src, lengths, mask = _batch()
    prev = torch.full((4,), BOS_ID)
    with torch.inference_mode(), vocab_precision(dtype, candidates):
        state = model.init_state(model.encode(src, lengths, mask))
        feat, *_ = model.decoder.search_features(prev, state)
        log_probs, *_ = model.step(prev, state)
    return log_probs, feat


@pytest.mark.parametrize(
    ("style", "tie", "emb_dim"),
    [("bahdanau", False, 6), ("luong", True, 6), ("luong", True, 8)],
)
def test_bf16_step_is_the_bf16_projection_of_the_fp32_features(style, tie, emb_dim):
    """log-softmax (fp32) of ``W x + b`` with x, W and b rounded to bf16; a tied
    model's projection to the embedding size (emb_dim 6 < hidden 8) stays fp32."""
    model = _model(style, tie, emb_dim)
    out = model.decoder.output
    log_probs, feat = _first_step(model, torch.bfloat16)
    with torch.inference_mode():
        x = out.pre(feat)
        logits = F.linear(
            x.bfloat16(), out.proj.weight.bfloat16(), out.proj.bias.bfloat16()
        )
    assert log_probs.dtype == torch.float32
    assert_close(log_probs, F.log_softmax(logits.float(), dim=-1), rtol=0, atol=0)
    fp32, _ = _first_step(model, None)
    assert not torch.equal(log_probs, fp32)  # the setting does change the projection
    assert_close(log_probs, fp32, rtol=0, atol=0.3)  # by bf16 rounding only


def _near_tie(model):
    """Token V-1 made to beat the first sentence's best first token by 0.001: the
    same weights, a bias of 1.001 against 1.0, which bf16 rounds to a tie (and a
    tie goes to the lower index). Returns that best token."""
    _, feat = _first_step(model, None)
    out = model.decoder.output
    with torch.inference_mode():
        best = int(out(feat)[0].argmax())
    assert best != V_TGT - 1
    with torch.no_grad():
        out.proj.weight[V_TGT - 1] = out.proj.weight[best]
        out.proj.bias[best], out.proj.bias[V_TGT - 1] = 1.0, 1.001
    forget_search_tables(model)
    return best


def test_candidates_are_fp32_and_settle_a_near_tie():
    """The ``candidates`` best logits of each row are fp32's, the others bf16's; so
    the best token is fp32's where bf16 alone picks the wrong one of a near-tie."""
    model = _model()
    best = _near_tie(model)
    fp32, feat = _first_step(model, None)
    pure, _ = _first_step(model, torch.bfloat16)
    mixed, _ = _first_step(model, torch.bfloat16, candidates=4)
    out = model.decoder.output
    with torch.inference_mode():
        x = out.pre(feat)
        exact = out(feat)
        rounded = F.linear(
            x.bfloat16(), out.proj.weight.bfloat16(), out.proj.bias.bfloat16()
        ).float()
    top4 = rounded.topk(4, dim=-1).indices
    want = rounded.scatter(-1, top4, exact.gather(-1, top4))
    assert_close(mixed, F.log_softmax(want, dim=-1), rtol=0, atol=1e-5)
    assert_close(pure, F.log_softmax(rounded, dim=-1), rtol=0, atol=0)
    assert int(pure[0].argmax()) == best  # bf16 alone: the tie, to the lower index
    assert int(mixed[0].argmax()) == int(fp32[0].argmax()) == V_TGT - 1
    assert torch.equal(mixed.argmax(-1), fp32.argmax(-1))


def test_searches_with_candidates_follow_fp32_through_a_near_tie():
    """translate_batch re-scores ``rescored_candidates(K)`` per row: greedy and beam
    search choose fp32's tokens where bf16 alone changes the first sentence."""
    model, (src, lengths, mask) = _model(), _batch()
    _near_tie(model)
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    for k in (1, 3):
        got = [
            [
                h.tokens
                for [h, *_] in translate_batch(
                    model, batch, _decode(beam_size=k, vocab_precision=choice)
                )
            ]
            for choice in ("fp32", "bf16")
        ]
        assert got[0] == got[1]
        with vocab_precision(torch.bfloat16):  # no candidates: bf16 alone
            if k == 1:
                pure = greedy_search(model, src, lengths, mask, 1.5, 5)
            else:
                pure = [hs[0] for hs in beam_search(model, src, lengths, mask, k)]
        assert pure[0].tokens != got[0][0]
    assert rescored_candidates(1) == 4 and rescored_candidates(5) == 10


def test_fp32_step_is_the_output_layer():
    model = _model()
    log_probs, feat = _first_step(model, None)
    with torch.inference_mode():
        want = F.log_softmax(model.decoder.output(feat), dim=-1)
    assert torch.equal(log_probs, want)


def test_bf16_weights_follow_the_model():
    """The bf16 copy is rebuilt when a weight changes in place (a loaded state dict,
    most optimizer steps) and dropped by ``forget_search_tables`` (fused Adam changes
    weights without bumping their version)."""
    model = _model()
    before, _ = _first_step(model, torch.bfloat16)
    with torch.no_grad():
        model.decoder.output.proj.bias.add_(3.0 * torch.arange(V_TGT) / V_TGT)
    changed, feat = _first_step(model, torch.bfloat16)
    assert not torch.equal(before, changed)
    with torch.no_grad():  # unseen by the version: a .data write, as fused Adam does
        model.decoder.output.proj.weight.data.mul_(-1.0)
    stale, _ = _first_step(model, torch.bfloat16)
    assert torch.equal(stale, changed)
    forget_search_tables(model)
    fresh, feat = _first_step(model, torch.bfloat16)
    with torch.inference_mode():
        want = F.log_softmax(model.decoder.output(feat), dim=-1)
    assert_close(fresh, want, rtol=0, atol=0.3)
    assert not torch.equal(fresh, changed)


def test_autograd_keeps_the_model_precision():
    """Only inference in fp32 takes the bf16 copy: a step with gradients (training's
    scheduled sampling, attribution) stays the model's own."""
    model = _model()
    src, lengths, mask = _batch()
    prev = torch.full((4,), BOS_ID)
    with vocab_precision(torch.bfloat16):
        state = model.init_state(model.encode(src, lengths, mask))
        feat, *_ = model.decoder.search_features(prev, state)
        log_probs, *_ = model.step(prev, state)
    assert log_probs.requires_grad
    assert_close(log_probs, F.log_softmax(model.decoder.output(feat), dim=-1))


def _decode(**settings):
    return decode_settings(None, **settings)


def test_translate_batch_searches_in_the_configured_precision():
    model, (src, lengths, mask) = _model(), _batch()
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    for choice, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        got = translate_batch(model, batch, _decode(vocab_precision=choice))
        with vocab_precision(dtype, rescored_candidates(1)):
            want = greedy_search(model, src, lengths, mask, 1.5, 5)
        for [g], w in zip(got, want, strict=True):
            assert g.tokens == w.tokens and g.score == w.score
    fp32 = translate_batch(model, batch, _decode(vocab_precision="fp32"))
    bf16 = translate_batch(model, batch, _decode(vocab_precision="bf16"))
    assert [h.score for [h] in fp32] != [h.score for [h] in bf16]


@pytest.mark.parametrize(
    ("native", "pays"), [(True, True), (True, False), (False, True)]
)
def test_auto_is_bf16_only_where_the_cpu_has_it_and_it_pays(
    native, pays, monkeypatch, caplog
):
    """auto: bf16 where the CPU has it natively and the measured projection of the
    model's shape is faster in bf16; without a shape to measure, fp32."""
    measured = []
    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(
        device_module,
        "bf16_projection_pays",
        lambda *key: measured.append(key) or pays,
    )
    device_module._warn_emulated_vocab_bf16.cache_clear()
    want = torch.bfloat16 if native and pays else None
    assert resolve_vocab_dtype("auto", CPU, (40, 8)) == want
    assert measured == ([(40, 8, torch.get_num_threads())] if native else [])
    assert resolve_vocab_dtype("auto", CPU) is None  # no shape: nothing to measure
    assert resolve_vocab_dtype("auto", torch.device("cuda"), (40, 8)) is None
    assert resolve_vocab_dtype("fp32", CPU) is None
    with caplog.at_level(logging.WARNING, logger="seq2seq.model.device"):
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
    assert caplog.text.count("emulated") == (0 if native else 1)  # once a process
    with pytest.raises(ValueError, match="'fp16' is not a valid VocabPrecision"):
        resolve_vocab_dtype("fp16", CPU)


def test_the_measurement_is_taken_once_per_shape(caplog):
    device_module.bf16_projection_pays.cache_clear()
    with caplog.at_level(logging.INFO, logger="seq2seq.model.device"):
        first = device_module.bf16_projection_pays(40, 8, 1)
        assert device_module.bf16_projection_pays(40, 8, 1) is first
    assert isinstance(first, bool)
    assert caplog.text.count("bf16 projection ×") == 1


def test_translate_batch_measures_the_models_projection(monkeypatch):
    seen = []
    monkeypatch.setattr(
        search_module,
        "resolve_vocab_dtype",
        lambda choice, device, shape=None: seen.append((choice, shape)),
    )
    model, (src, lengths, mask) = _model(), _batch()
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    translate_batch(model, batch, _decode(vocab_precision="auto"))
    assert seen == [("auto", (V_TGT, 8))]


def test_decode_settings_check_and_default_the_choice():
    assert decode_settings(None).vocab_precision == "fp32"  # opt-in
    assert _decode(vocab_precision="fp32").vocab_precision == "fp32"
    with pytest.raises(ValueError, match=r"Invalid value 'half'.*auto, fp32, bf16"):
        _decode(vocab_precision="half")
