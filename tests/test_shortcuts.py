"""The search's step (``decoding/shortcuts.py``) equals the model's: its shortcut
features equal ``reference_step`` and its log-probabilities ``Seq2Seq.step``, for every
attention × style × input feeding, with beams; each run builds its tables anew."""

import pytest
import torch
from torch.testing import assert_close

from seq2seq.data.tokenizer import BOS_ID
from seq2seq.decoding.shortcuts import SearchStep
from tests.test_decoder import V_TGT, _model, tiny_batch, tiny_config


@pytest.mark.parametrize(
    ("attention", "style", "feeding"),
    [
        (att, style, feeding)
        for att in ("bahdanau", "luong_general", "multihead", "none")
        for style, feeding in (("bahdanau", False), ("luong", False), ("luong", True))
    ],
)
def test_search_step_equals_reference_step_for_beams(attention, style, feeding):
    """Three beams per source: the context's shares come from the sources' projected
    values (one weighted read each), the embeddings' from the tables."""
    model = _model(tiny_config(attention, style, feeding))
    dec, (src, lengths, mask, _) = model.decoder, tiny_batch()
    step = SearchStep(model)
    torch.manual_seed(1)
    with torch.inference_mode():
        state = model.init_state(model.encode(src, lengths, mask))
        state = state.select_beams(torch.arange(3).repeat_interleave(3))
        for _ in range(3):
            prev = torch.randint(4, V_TGT, (9,))
            feat, fast, att = step.features(prev, state)
            want, ref, ref_att = dec.reference_step(dec.embed(prev), state)
            assert_close(feat, want)
            assert_close(fast.hidden, ref.hidden)
            assert_close(att.weights, ref_att.weights)
            log_probs, _, weights = step(prev, state)
            ref_log_probs, _, ref_weights = model.step(prev, state)
            assert_close(log_probs, ref_log_probs)
            assert_close(weights, ref_weights)
            state = fast
    projected = state.keys.projected
    assert (projected is not None) == (attention in ("bahdanau", "luong_general"))


@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_each_runs_tables_follow_the_weights(style):
    """A search's step is built per run: after the weights change (an optimizer
    step, fused Adam included), the next run's step reads them as they are."""
    model = _model(tiny_config("bahdanau", style))
    dec, (src, lengths, mask, _) = model.decoder, tiny_batch()
    prev = torch.full((3,), BOS_ID)
    for _ in range(2):
        with torch.inference_mode():
            state = model.init_state(model.encode(src, lengths, mask))
            feat, *_ = SearchStep(model).features(prev, state)
            want, *_ = dec.reference_step(dec.embed(prev), state)
        assert_close(feat, want)
        with torch.no_grad():  # as an optimizer step would
            dec.feature.bias.add_(1.0)
            dec.embedding.weight.mul_(2.0)
