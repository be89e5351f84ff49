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


def test_moses_tokenization_of_the_paper_scale():
    from seq2seq.decoding.scores import moses_tokenize

    assert moses_tokenize(["Ein Mann, der Rot-Wein „trinkt“."], "de") == [
        'ein mann , der rot @-@ wein " trinkt " .'
    ]


def test_paper_bleu_ignores_case_and_tokenization_but_not_words():
    refs = ["A man, in a red-ish hat, sits.", "Two dogs play in the snow!"]
    same = ["a man , in a RED-ish hat , sits .", "TWO DOGS PLAY IN THE SNOW !"]
    s = score(same, refs, paper_lang="en")
    assert s.paper_bleu == pytest.approx(100.0)
    assert s.bleu < 50  # the cased 13a score sees other tokens
    assert "tok:none" in s.paper_bleu_signature
    assert "moses-lc-norm-tok-a:en|sacremoses:" in s.paper_bleu_signature
    assert f"paperBLEU {s.paper_bleu_signature}" in s.summary()
    worse = score(
        ["a man sits .", "two cats play in the snow !"], refs, paper_lang="en"
    )
    assert worse.paper_bleu < 60
    assert score(HYPS, HYPS).paper_bleu is None


def test_ter_is_zero_for_identical_and_counts_edits():
    assert score(HYPS, HYPS).ter == pytest.approx(0.0)
    # one substitution in 7 + 7 reference words: 1 edit / 14 words
    edited = ["the cat sat on the mat tomorrow", HYPS[1]]
    s = score(edited, HYPS)
    assert s.ter == pytest.approx(100 / 14)
    assert "tok:tercom" in s.ter_signature and f"TER {s.ter_signature}" in s.summary()


def test_tokenized_periods_score_without_sacrebleu_warning(caplog):
    """The phrasebook ends every sentence with " .": no warning at each validation,
    and the same score and signature as sacreBLEU's default."""
    from sacrebleu.metrics import BLEU

    hyps = [f"the cat number {k} sat ." for k in range(150)]
    refs = [f"the cat number {k} sits ." for k in range(150)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        s = score(hyps, refs, lowercase=True, paper_lang="en")
    assert not caplog.records
    default = BLEU()
    assert s.bleu == pytest.approx(default.corpus_score(hyps, [refs]).score)
    assert s.bleu_signature == str(default.get_signature())
