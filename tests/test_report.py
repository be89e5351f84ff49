"""The corpus report (seq2seq-align report=DIR): its per-sentence numbers against
hand-computed references, its packed matrices, and the command on a tiny model's
phrasebook split (gold links, so AER is there)."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
import sacrebleu
from omegaconf import OmegaConf

from seq2seq.alignment.pipeline import run_align
from seq2seq.alignment.report_metrics import (
    attention_entropy,
    coverage,
    coverage_deviation,
    coverage_outliers,
    disagreement,
    sentence_aer,
)
from seq2seq.alignment.report_page import TINY, packed
from seq2seq.cli.align import check_align
from seq2seq.config import AlignConfig
from seq2seq.decoding.scores import sentence_scores
from seq2seq.errors import ConfigValueError
from tests.helpers import outside_urls

# three source words, the first of two pieces; two target words; EOS last on both
SRC = ["▁gr", "een", "▁b", "▁c"]
TGT = ["▁x", "▁y"]
# rows: x, y, the EOS step; columns: gr, een, b, c, the source EOS
WEIGHTS = np.array(
    [
        [0.5, 0.3, 0.2, 0.0, 0.0],
        [0.6, 0.0, 0.0, 0.2, 0.2],
        [0.0, 0.0, 0.0, 0.0, 1.0],
    ]
)


def test_entropy_is_the_mean_row_entropy_in_nats():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert attention_entropy(a) == pytest.approx(math.log(2) / 2)
    assert attention_entropy(np.full((3, 4), 0.25)) == pytest.approx(math.log(4))


def test_coverage_sums_a_words_pieces_over_target_words():
    # word "green" = pieces gr + een: 0.8 from x, 0.6 from y; b 0.2; c 0.2; the EOS
    # step and the source EOS are no words
    np.testing.assert_allclose(coverage(WEIGHTS, SRC, TGT), [1.4, 0.2, 0.2])
    # |1.4 - 1| + |0.2 - 1| + |0.2 - 1| = 2.0 over 3 words
    assert coverage_deviation(WEIGHTS, SRC, TGT) == pytest.approx(2.0 / 3)
    assert coverage_outliers(WEIGHTS, SRC, TGT) == 2  # b and c under 0.5; 1.4 ≤ 1.5
    once = np.array([[0.0, 0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    assert coverage_deviation(once, SRC, TGT) == pytest.approx((0 + 0 + 1) / 3)


def test_disagreement_is_the_share_of_target_words_with_another_argmax():
    # attention: x -> green (0.8), y -> green (0.6); attribution: x -> c, y -> green
    attribution = np.array(
        [
            [0.1, 0.0, 0.2, 0.7, 0.0],
            [0.5, 0.4, 0.0, 0.1, 0.0],
            [0.3, 0.3, 0.3, 0.1, 0.0],
        ]
    )
    assert disagreement(WEIGHTS, attribution, SRC, TGT) == pytest.approx(0.5)
    assert disagreement(WEIGHTS, WEIGHTS, SRC, TGT) == 0.0


def test_sentence_aer_of_the_argmax_links():
    # links (0, 0) and (0, 1); sure {(0, 0)}, possible {(1, 1)}:
    # AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|) = 1 - (1 + 1) / (2 + 1)
    assert sentence_aer(WEIGHTS, SRC, TGT, "0-0 1?1") == pytest.approx(1 / 3)
    assert sentence_aer(WEIGHTS, SRC, TGT, "0-0 0-1") == 0.0


def test_sentence_scores_are_sacrebleus_sentence_scores():
    hyps, refs = ["a man rides a bike .", "two dogs"], ["a man rides a bicycle .", "x"]
    got = sentence_scores(hyps, refs)
    for (bleu, chrf), h, r in zip(got, hyps, refs, strict=True):
        assert bleu == pytest.approx(sacrebleu.sentence_bleu(h, [r]).score)
        assert chrf == pytest.approx(sacrebleu.sentence_chrf(h, [r]).score)


def test_packed_matrices_keep_three_digits_and_the_support():
    w = np.array([[0.123456, 1e-9, 0.0], [0.5, 0.25, 0.999]])
    rec = packed(w)
    back = np.frombuffer(base64.b64decode(rec["f16"]), dtype="<f2").reshape(
        rec["shape"]
    )
    assert rec["shape"] == [2, 3]
    np.testing.assert_allclose(back, np.maximum(w, (w > 0) * TINY), atol=5e-4)
    assert ((back > 0) == (w > 0)).all()  # 1e-9 stays above 0, 0 stays 0


def _cfg(ckpt, folder, **kw):
    cfg = OmegaConf.structured(
        AlignConfig(checkpoint=str(ckpt), report=str(folder), **kw)
    )
    check_align(cfg)
    return cfg


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"text": "a red car"}, "give split=NAME"),
        ({"split": "test", "references": True}, "drop references=true"),
        ({"split": "test", "view": "self"}, "drop view=self"),
    ],
)
def test_report_refuses_what_it_cannot_show(tmp_path, kw, message):
    (tmp_path / "model.pt").write_bytes(b"")
    with pytest.raises(ConfigValueError, match=message):
        _cfg(tmp_path / "model.pt", tmp_path, **kw)


def test_report_command_writes_the_page_and_the_table(tiny_checkpoint, tmp_path):
    from seq2seq.decoding.translator import Translator

    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    cfg = _cfg(tiny_checkpoint, tmp_path / "rep", split="test", index=[0, 3, 5])
    page = run_align(cfg, tmp_path, tr, None)
    text = page.read_text(encoding="utf-8")
    assert "<script src" not in text and outside_urls(text) == []
    lines = (tmp_path / "rep" / "sentences.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    assert [line.split("\t")[0] for line in lines[1:]] == ["0", "3", "5"]
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=True))
        assert 0 <= float(row["disagreement"]) <= 1  # occlusion, by default
        assert 0 <= float(row["aer"]) <= 1  # the phrasebook has gold links
        assert 0 <= float(row["chrf"]) <= 100
