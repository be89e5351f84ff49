"""The search's vocabulary projection in bf16 or int8 (``decode.vocab_precision``):
the math of each path against a reference, its weights following the model's, where
it applies, how ``auto`` resolves, and how the setting reaches the search."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from seq2seq.config import AttentionConfig, DecoderConfig, EncoderConfig, ModelConfig
from seq2seq.data.tokenizer import BOS_ID, PAD_ID
from seq2seq.decoding import quantized
from seq2seq.decoding import search as search_module
from seq2seq.decoding import vocab as vocab_module
from seq2seq.decoding.quantized import Int8Projection
from seq2seq.decoding.search import beam_search, greedy_search, translate_batch
from seq2seq.decoding.settings import decode_settings
from seq2seq.decoding.shortcuts import SearchStep
from seq2seq.decoding.vocab import rescored_candidates, resolve_vocab_dtype
from seq2seq.errors import ConfigValueError
from seq2seq.model.seq2seq import build_model

V_SRC, V_TGT = 15, 40
CPU = torch.device("cpu")
needs_int8 = pytest.mark.skipif(
    not quantized.int8_available(), reason="this torch has no CPU int8 kernels"
)


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
    """The first search step's log-probabilities with the projection in ``dtype``
    and ``candidates`` rescored (a fresh run's ``SearchStep``), and its features
    (the vocabulary projection's input)."""
    src, lengths, mask = _batch()
    prev = torch.full((4,), BOS_ID)
    step = SearchStep(model, dtype, candidates)
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths, mask))
        feat, *_ = step.features(prev, state)
        log_probs, *_ = step(prev, state)
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


def _int8_reference(x, weight, bias):
    """``F.linear`` of x and weight as int8 rounds them: the weight per row to
    [-127, 127]·s (symmetric), x per tensor to 7 bits [0, 127] with a zero point."""
    s_w = weight.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / 127  # a PAD row: 0
    w = (weight / s_w).round().clamp(-128, 127) * s_w
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    s_x = (hi - lo) / 127
    zero = round(-lo / s_x)
    xq = ((x / s_x).round() + zero).clamp(0, 127)
    return F.linear((xq - zero) * s_x, w, bias)


@needs_int8
def test_int8_projection_is_the_linear_of_the_rounded_operands():
    torch.manual_seed(0)
    weight, bias = torch.randn(40, 8) * 3, torch.randn(40)
    x = torch.randn(4, 8).tanh()
    got = Int8Projection(weight, bias)(x)
    assert_close(got, _int8_reference(x, weight, bias), rtol=0, atol=1e-5)
    fp32 = F.linear(x, weight, bias)
    assert (got - fp32).abs().max() > 1e-3  # it is int8, not fp32 again


@needs_int8
@pytest.mark.parametrize(("style", "tie"), [("bahdanau", False), ("luong", True)])
def test_int8_step_projects_in_int8_and_rescores_the_candidates(style, tie):
    """log-softmax of the int8 logits, with each row's ``candidates`` best (by the
    int8 logits) replaced by fp32's."""
    model = _model(style, tie)
    proj = model.decoder.output.proj
    fp32, feat = _first_step(model, None)
    pure, _ = _first_step(model, torch.qint8)
    mixed, _ = _first_step(model, torch.qint8, candidates=4)
    with torch.inference_mode():
        x = model.decoder.output.pre(feat)
        rounded = _int8_reference(x, proj.weight, proj.bias)
        exact = model.decoder.output(feat)
    assert_close(pure, F.log_softmax(rounded, dim=-1), rtol=0, atol=1e-4)
    top4 = pure.topk(4, dim=-1).indices
    want = rounded.scatter(-1, top4, exact.gather(-1, top4))
    assert_close(mixed, F.log_softmax(want, dim=-1), rtol=0, atol=1e-4)
    assert not torch.equal(pure, fp32)
    assert torch.equal(mixed.argmax(-1), fp32.argmax(-1))


def _best_tokens(model, batch, beam_size, choice):
    """Each sentence's best tokens from ``translate_batch`` in ``choice``."""
    settings = _decode(beam_size=beam_size, vocab_precision=choice)
    return [h.tokens for [h, *_] in translate_batch(model, batch, settings)]


@needs_int8
def test_int8_searches_choose_fp32_tokens():
    model, (src, lengths, mask) = _model(), _batch()
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    for k in (1, 3):
        got = [_best_tokens(model, batch, k, choice) for choice in ("fp32", "int8")]
        assert got[0] == got[1]


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
        got = [_best_tokens(model, batch, k, choice) for choice in ("fp32", "bf16")]
        assert got[0] == got[1]
        bf16 = SearchStep(model, torch.bfloat16)  # no candidates: bf16 alone
        if k == 1:
            pure = greedy_search(model, src, lengths, mask, step=bf16)
        else:
            nbests = beam_search(model, src, lengths, mask, _decode(beam_size=k), bf16)
            pure = [hs[0] for hs in nbests]
        assert pure[0].tokens != got[0][0]
    assert rescored_candidates(1) == 4 and rescored_candidates(5) == 10


def test_fp32_step_is_the_output_layer():
    model = _model()
    log_probs, feat = _first_step(model, None)
    with torch.inference_mode():
        want = F.log_softmax(model.decoder.output(feat), dim=-1)
    assert torch.equal(log_probs, want)


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, pytest.param(torch.qint8, marks=needs_int8)]
)
def test_lowered_weights_follow_the_model(dtype):
    """Each run's bf16 or int8 copy is made from the weights as they are then: after
    an in-place change (a loaded state dict, an optimizer step) and after a ``.data``
    write that bumps no version (as fused Adam does), with nothing to forget."""
    model = _model()
    before, _ = _first_step(model, dtype)
    with torch.no_grad():
        model.decoder.output.proj.bias.add_(3.0 * torch.arange(V_TGT) / V_TGT)
    changed, feat = _first_step(model, dtype)
    assert not torch.equal(before, changed)
    with torch.no_grad():  # unseen by the version: a .data write, as fused Adam does
        model.decoder.output.proj.weight.data.mul_(-1.0)
    fresh, feat = _first_step(model, dtype)
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
    step = SearchStep(model, torch.bfloat16)
    state = model.init_state(model.encode(src, lengths, mask))
    feat, *_ = step.features(prev, state)
    log_probs, *_ = step(prev, state)
    assert log_probs.requires_grad
    assert_close(log_probs, F.log_softmax(model.decoder.output(feat), dim=-1))


def _decode(**settings):
    return decode_settings(None, **settings)


@pytest.mark.parametrize(
    ("lowered", "lowered_dtype"),
    [("bf16", torch.bfloat16), pytest.param("int8", torch.qint8, marks=needs_int8)],
)
def test_translate_batch_searches_in_the_configured_precision(lowered, lowered_dtype):
    model, (src, lengths, mask) = _model(), _batch()
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    for choice, dtype in (("fp32", None), (lowered, lowered_dtype)):
        got = translate_batch(model, batch, _decode(vocab_precision=choice))
        step = SearchStep(model, dtype, rescored_candidates(1))
        want = greedy_search(model, src, lengths, mask, step=step)
        for [g], w in zip(got, want, strict=True):
            assert g.tokens == w.tokens and g.score == w.score
    fp32 = translate_batch(model, batch, _decode(vocab_precision="fp32"))
    other = translate_batch(model, batch, _decode(vocab_precision=lowered))
    assert [h.score for [h] in fp32] != [h.score for [h] in other]


@pytest.mark.parametrize("fastest", [None, torch.bfloat16, torch.qint8])
def test_auto_is_the_measured_fastest_on_cpu(fastest, monkeypatch):
    """auto: what ``fastest_projection`` measured for the model's shape and this
    thread count, on CPU; without a shape to measure, and on CUDA, fp32 (None)."""
    measured = []
    monkeypatch.setattr(
        vocab_module,
        "fastest_projection",
        lambda *key: measured.append(key) or fastest,
    )
    assert resolve_vocab_dtype("auto", CPU, (40, 8)) == fastest
    assert measured == [(40, 8, torch.get_num_threads())]
    assert resolve_vocab_dtype("auto", CPU) is None  # no shape: nothing to measure
    assert resolve_vocab_dtype("auto", torch.device("cuda"), (40, 8)) is None
    assert len(measured) == 1


@pytest.mark.parametrize("native", [True, False])
def test_explicit_choices_resolve_and_warn(native, monkeypatch, caplog):
    monkeypatch.setattr(vocab_module, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(quantized, "int8_available", lambda: True)
    vocab_module._warn_emulated_vocab_bf16.cache_clear()
    assert resolve_vocab_dtype("fp32", CPU) is None
    assert resolve_vocab_dtype("int8", CPU) == torch.qint8
    with caplog.at_level(logging.WARNING, logger="seq2seq.decoding.vocab"):
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
    assert caplog.text.count("emulated") == (0 if native else 1)  # once a process
    with pytest.raises(ValueError, match="'fp16' is not a valid VocabPrecision"):
        resolve_vocab_dtype("fp16", CPU)


def test_int8_is_refused_where_it_cannot_run(monkeypatch):
    with pytest.raises(ConfigValueError, match="int8 runs on the CPU only"):
        resolve_vocab_dtype("int8", torch.device("cuda"))
    monkeypatch.setattr(quantized, "int8_available", lambda: False)
    with pytest.raises(ConfigValueError, match="no CPU int8 kernels"):
        resolve_vocab_dtype("int8", CPU)


@pytest.mark.parametrize("native", [True, False])
@needs_int8
def test_the_measurement_times_what_the_cpu_has_once_per_shape(
    native, monkeypatch, caplog
):
    """int8 is timed where torch has its kernels, bf16 only where the CPU has it
    natively; the result is one of them or None, measured once per key."""
    monkeypatch.setattr(vocab_module, "cpu_has_native_bf16", lambda: native)
    vocab_module.fastest_projection.cache_clear()
    with caplog.at_level(logging.INFO, logger="seq2seq.decoding.vocab"):
        first = vocab_module.fastest_projection(40, 8, 1)
        assert vocab_module.fastest_projection(40, 8, 1) is first
    vocab_module.fastest_projection.cache_clear()
    assert first in (None, torch.qint8, torch.bfloat16)
    assert caplog.text.count("int8 projection ×") == 1
    assert caplog.text.count("bf16 projection ×") == (1 if native else 0)
    if not native:
        assert first != torch.bfloat16


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
    with pytest.raises(
        ValueError, match=r"Invalid value 'half'.*auto, fp32, bf16, int8"
    ):
        _decode(vocab_precision="half")
