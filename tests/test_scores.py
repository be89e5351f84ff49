"""sacreBLEU scores with their signatures."""

import pytest

from seq2seq.decoding.scores import score

HYPS = ["the cat sat on the mat today", "a dog runs in the green park"]


def test_identical_is_bleu_100_with_signatures():
    s = score(HYPS, HYPS)
    assert s.bleu == pytest.approx(100.0)
    assert s.chrf == pytest.approx(100.0)
    assert "nrefs:1" in s.bleu_signature and "tok:13a" in s.bleu_signature
    assert "nc:6" in s.chrf_signature and "version:" in s.chrf_signature
    assert s.lc_bleu is None and s.n_sentences == 2
    line = s.summary()
    assert "\n" not in line and "BLEU 100.00" in line and s.bleu_signature in line
    assert s.as_dict()["bleu"] == s.bleu


def test_lowercase_reports_case_insensitive_bleu():
    upper = [h.upper() for h in HYPS]
    s = score(upper, HYPS, lowercase=True)
    assert s.bleu < 10.0
    assert s.lc_bleu == pytest.approx(100.0)
    assert "case:lc" in s.lc_bleu_signature
    assert "lcBLEU 100.00" in s.summary()


def test_length_mismatch_names_both_counts():
    with pytest.raises(ValueError, match=r"2 hypotheses but 3 references"):
        score(HYPS, [*HYPS, "x"])
