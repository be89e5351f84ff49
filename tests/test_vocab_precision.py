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
from seq2seq.decoding.search import greedy_search, translate_batch
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


def _first_step(model, dtype):
    """The first search step's log-probabilities within ``vocab_precision(dtype)``,
    and its features (the vocabulary projection's input)."""
    src, lengths, mask = _batch()
    prev = torch.full((4,), BOS_ID)
    with torch.inference_mode(), vocab_precision(dtype):
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
        with vocab_precision(dtype):
            want = greedy_search(model, src, lengths, mask, 1.5, 5)
        for [g], w in zip(got, want, strict=True):
            assert g.tokens == w.tokens and g.score == w.score
    fp32 = translate_batch(model, batch, _decode(vocab_precision="fp32"))
    bf16 = translate_batch(model, batch, _decode(vocab_precision="bf16"))
    assert [h.score for [h] in fp32] != [h.score for [h] in bf16]


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_only_where_the_cpu_has_it(native, monkeypatch, caplog):
    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: native)
    device_module._warn_emulated_vocab_bf16.cache_clear()
    assert resolve_vocab_dtype("auto", CPU) == (torch.bfloat16 if native else None)
    assert resolve_vocab_dtype("auto", torch.device("cuda")) is None  # autocast's
    assert resolve_vocab_dtype("fp32", CPU) is None
    with caplog.at_level(logging.WARNING, logger="seq2seq.model.device"):
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
        assert resolve_vocab_dtype("bf16", CPU) == torch.bfloat16
    assert caplog.text.count("emulated") == (0 if native else 1)  # once a process
    with pytest.raises(ValueError, match="'fp16' is not a valid VocabPrecision"):
        resolve_vocab_dtype("fp16", CPU)


def test_decode_settings_check_and_default_the_choice():
    assert decode_settings(None).vocab_precision == "fp32"  # opt-in
    assert _decode(vocab_precision="fp32").vocab_precision == "fp32"
    with pytest.raises(ValueError, match=r"Invalid value 'half'.*auto, fp32, bf16"):
        _decode(vocab_precision="half")
