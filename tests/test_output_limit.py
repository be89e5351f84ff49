"""The maximum output length: fitted on the training pairs, saved with the run, and
the fallback where nothing was fitted."""

import random
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from seq2seq.config import DecodeConfig, TrainConfig
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import EOS_ID
from seq2seq.decoding.search import translate_batch
from seq2seq.decoding.settings import (
    DEFAULT_MAX_LEN_A,
    DEFAULT_MAX_LEN_B,
    decode_settings,
    fit_max_len_a,
    max_lengths,
)
from seq2seq.errors import ConfigValueError
from seq2seq.training.pipeline import fit_output_limit
from tests.test_search import _batch, _model


def _covered(a, src, tgt, b):
    limits = max_lengths(torch.tensor(src), a, b)
    return float((torch.tensor(tgt) <= limits).double().mean())


def test_fit_against_a_hand_example():
    # pairs need a >= (T - b) / S: 1.0, 2.0, 1.0, 1.0 with b = 1
    src, tgt = [2, 4, 5, 10], [3, 9, 6, 11]
    assert fit_max_len_a(src, tgt, b=1, coverage=0.75) == 1.0
    assert fit_max_len_a(src, tgt, b=1, coverage=1.0) == 2.0
    # a limit that b alone covers needs no a at all
    assert fit_max_len_a([3, 3], [2, 4], b=5, coverage=1.0) == 0.0


def test_fit_is_the_smallest_hundredth_that_covers():
    rng = random.Random(0)
    src = [rng.randint(1, 40) for _ in range(2000)]
    tgt = [max(1, round(s * rng.uniform(0.6, 1.6))) for s in src]
    for b, coverage in [(5, 0.999), (5, 0.95), (0, 0.9), (10, 1.0)]:
        a = fit_max_len_a(src, tgt, b, coverage)
        assert _covered(a, src, tgt, b) >= coverage
        assert _covered(a - 0.01, src, tgt, b) < coverage


def test_limit_survives_float_rounding():
    # 0.29 · 100 is 28.999… in binary floating point
    assert max_lengths(torch.tensor([100]), 0.29, 0).tolist() == [29]


def test_fit_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="one target length per source length"):
        fit_max_len_a([1, 2], [1], b=5, coverage=0.9)


def _split(pairs):
    return EncodedSplit(
        src_text=["x"] * len(pairs),
        tgt_text=["y"] * len(pairs),
        src_ids=[[4] * s for s, _ in pairs],
        tgt_ids=[[4] * t for _, t in pairs],
    )


def test_training_fits_the_limit_into_its_config_and_keeps_a_given_one():
    cfg = OmegaConf.structured(TrainConfig)
    assert cfg.decode.max_len_a is None
    # pieces without EOS: (S, T) = (1, 2), (3, 8), (4, 5), (9, 10); with their EOS
    # the hand example above, whose widest pair needs a = (9 - 1) / 4 = 2.0 (without
    # the EOS it would be (8 - 1) / 3, so 2.34)
    train = _split([(1, 2), (3, 8), (4, 5), (9, 10)])
    cfg.decode.max_len_b = 1
    cfg.decode.max_len_coverage = 1.0
    fit_output_limit(cfg, train)
    assert cfg.decode.max_len_a == 2.0
    cfg.decode.max_len_a = 1.7
    fit_output_limit(cfg, train)
    assert cfg.decode.max_len_a == 1.7


def test_unfitted_limit_reads_as_the_default():
    model = _model()
    with torch.no_grad():
        model.decoder.output.proj.bias[EOS_ID] = -50.0  # never ends: runs to the limit
    src, lengths, mask = _batch()
    batch = SimpleNamespace(src=src, src_lengths=lengths, src_mask=mask)
    assert DecodeConfig().max_len_b == DEFAULT_MAX_LEN_B
    for beam in (1, 3):
        cfg = decode_settings(beam_size=beam)
        hyps = [h for [h] in translate_batch(model, batch, cfg)]
        expect = max_lengths(lengths, DEFAULT_MAX_LEN_A, DEFAULT_MAX_LEN_B).tolist()
        assert [len(h.tokens) for h in hyps] == expect


@pytest.mark.parametrize("value", [0.0, 1.5])
def test_coverage_outside_the_unit_interval_is_refused(value):
    with pytest.raises(ConfigValueError, match="max_len_coverage"):
        decode_settings(max_len_coverage=value)
