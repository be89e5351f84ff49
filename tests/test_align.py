"""AER on force-decoded references, and seq2seq-align's exports over a whole split."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from seq2seq.alignment.error import alignment_scores
from seq2seq.alignment.maps import AttentionMap
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.translator import Translator
from seq2seq.model.seq2seq import ModelOutput
from tests.helpers import TINY, outside_urls, page_records, run_script


class DiagonalModel(torch.nn.Module):
    """Attends from target step t to source position t (clipped); no parameters."""

    def forward(self, src, src_lengths, src_mask, tgt_in, self_weights=False):
        b, s = src.shape
        t = tgt_in.size(1)
        att = torch.zeros(b, t, s)
        for row in range(b):
            n = int(src_lengths[row])
            for step in range(t):
                att[row, step, min(step, n - 1)] = 1.0
        return ModelOutput(torch.zeros(b, t, 5), att, None)


class WordTokenizer:
    """Each id is one whole word piece ``▁<id>``."""

    src_vocab_size = tgt_vocab_size = 100

    def src_pieces(self, ids):
        return [f"\u2581{i}" for i in ids]

    tgt_pieces = src_pieces


def _split(alignment: list[str]) -> EncodedSplit:
    return EncodedSplit(
        src_text=["a b c", "d e"],
        tgt_text=["x y z", "u v w"],
        src_ids=[[4, 5, 6], [7, 8]],
        tgt_ids=[[9, 10, 11], [12, 13, 14]],
        alignment=alignment,
    )


def _translator(batch_tokens: int = 100) -> Translator:
    device = torch.device("cpu")
    return Translator(
        DiagonalModel(), WordTokenizer(), device, batch_tokens=batch_tokens
    )


def test_forced_attention_cuts_padding_and_keeps_eos():
    mats = _translator().forced_attention(_split(["", ""]))
    # + EOS step, + source EOS
    assert [m.weights.shape for m in mats] == [(4, 4), (4, 3)]
    assert all(m.heads is None for m in mats)


def test_attention_maps_carry_the_pieces_and_gold():
    maps = _translator().attention_maps(_split(["0-0", "1-1"]), ["a", "b"], True)
    assert [m.src_tokens for m in maps] == [
        ["▁4", "▁5", "▁6", "</s>"],
        ["▁7", "▁8", "</s>"],
    ]
    assert maps[1].tgt_tokens == ["▁12", "▁13", "▁14", "</s>"]
    assert [m.gold for m in maps] == ["0-0", "1-1"] and maps[0].title == "a"
    assert isinstance(maps[0], AttentionMap) and maps[0].weights.shape == (4, 4)


def test_aer_of_a_diagonal_attention_by_hand():
    # Sentence 2: targets 0, 1 read source words 0, 1; target 2 reads the source EOS
    # column, which is never a word: argmax over words falls back to word 0.
    split = _split(["0-0 1-1 2-2", "0-0 1-1 1?2"])
    result = alignment_scores(_translator(), split)
    # argmax: A = {00,11,22} ∪ {00,11,02}; |A∩S| = 3 + 2, |A∩P| = 5; |A| = 6, |S| = 5
    assert result.aer == pytest.approx(1 - 10 / 11)
    # shifted reads one step later: target j links to source word j + 1 (or the
    # fallback), off the gold diagonal
    assert result.aer_shifted > result.aer
    assert result.n_sentences == 2 and "AER" in result.summary()
    assert alignment_scores(_translator(9), _split(None)) is None


def test_pairs_that_do_not_regroup_into_the_gold_words_are_skipped():
    split = _split(["0-0", "0-0"])
    split.src_text[0] = "a b c d"  # 4 whitespace words, 3 pieces
    result = alignment_scores(_translator(), split)
    assert result.skipped == 1 and result.n_sentences == 1


class VocabTokenizer:
    """Whole words as pieces ``▁word``; a word outside ``words`` is ``<unk>``."""

    def __init__(self, words: str) -> None:
        self.ids = {w: k for k, w in enumerate(words.split(), start=4)}
        self.words = {k: w for w, k in self.ids.items()}
        self.src_vocab_size = self.tgt_vocab_size = 4 + len(self.ids)

    def encode_src(self, texts):
        return [[self.ids.get(w, 1) for w in text.split()] for text in texts]

    encode_tgt = encode_src

    def src_pieces(self, ids):
        return [f"\u2581{self.words[i]}" if i in self.words else "<unk>" for i in ids]

    tgt_pieces = src_pieces


def _words_translator(words: str) -> Translator:
    return Translator(DiagonalModel(), VocabTokenizer(words), torch.device("cpu"))


def test_two_way_links_read_the_pair_both_ways_and_skip_for_both():
    from seq2seq.alignment.twoway import symmetrized_scores, two_way_links

    split = _split(["0-0 1-1 2-2", "0-0 1-1 1?2"])
    split.src_text, split.tgt_text = ["a b c", "d e"], ["x y z", "u v w"]
    words = "a b c d e x y z u v w"
    forward, reverse = _words_translator(words), _words_translator(words)
    links = two_way_links(forward, reverse, split)
    # Forward: target j reads source j; "w" reads the source EOS, whose row falls back
    # to word 0. Reverse ("u v w" -> "d e"): "d", "e" read "u", "v", transposed.
    assert [(pair.forward, pair.reverse) for pair in links] == [
        ({(0, 0), (1, 1), (2, 2)}, {(0, 0), (1, 1), (2, 2)}),
        ({(0, 0), (1, 1), (0, 2)}, {(0, 0), (1, 1)}),
    ]
    # The word attention, in the forward orientation (target words, source words):
    # "w"'s row is all source EOS, so zero over the words, both ways.
    np.testing.assert_array_equal(links[1].forward_attention, [[1, 0], [0, 1], [0, 0]])
    np.testing.assert_array_equal(links[1].reverse_attention, [[1, 0], [0, 1], [0, 0]])
    # geometric: the product keeps 00 and 11; "w" shares no weight, so no link.
    assert links[1].combined("geometric") == {(0, 0), (1, 1)}
    scores = symmetrized_scores(forward, reverse, split)
    # As in test_aer_of_a_diagonal_attention_by_hand: |A∩S| + |A∩P| = 10, |A| + |S|
    # = 11 forward; the reverse links are all sure links. grow-diag-final-and adds
    # 02 back (diagonal of 11, target 2 unaligned), so it equals the union here.
    assert scores.forward == pytest.approx(1 - 10 / 11)
    assert scores.reverse == 0 and scores.rules["intersection"] == 0
    assert scores.rules["union"] == pytest.approx(1 - 10 / 11)
    assert scores.rules["grow-diag-final-and"] == pytest.approx(1 - 10 / 11)
    assert scores.rules["geometric"] == 0  # {00, 11, 22} and {00, 11}: all sure
    assert list(scores.rules) == [
        "intersection",
        "union",
        "grow-diag-final-and",
        "geometric",
    ]
    assert scores.summary().startswith(
        "AER both directions (argmax; lexicon 0, floor 0, add none) on references "
        "(n=2): forward 9.1% | reverse 0.0%"
    )
    # A lexicon at weight 1 replaces the attention: "x" translates "b" in its
    # training pairs, so x links to b both ways, whatever the attention says.
    from seq2seq.alignment.lexicon import train_lexicon
    from seq2seq.alignment.twoway import Readout

    src, tgt = ["a b c", "b", "a c", "c"], ["y x z", "x", "y z", "z"]
    readout = Readout(1.0, train_lexicon(src, tgt), train_lexicon(tgt, src))
    lexical = two_way_links(forward, reverse, split, readout=readout)[0]
    assert lexical.forward == lexical.reverse == {(1, 0), (0, 1), (2, 2)}
    assert "(argmax; lexicon 1, floor 0, add none) on references" in (
        symmetrized_scores(forward, reverse, split, readout=readout).summary()
    )
    # The reverse model does not know "w": its pieces are not the text's words, so
    # that pair is left out of every score, and counted.
    blind = _words_translator("a b c d e x y z u v")
    assert two_way_links(forward, blind, split)[1] is None
    scores = symmetrized_scores(forward, blind, split)
    assert (scores.n_sentences, scores.skipped) == (1, 1) and scores.forward == 0
    assert "(n=1, 1 skipped)" in scores.summary()
    assert symmetrized_scores(forward, reverse, _split(None)) is None


def _record():
    # Source "le chat noir" (chat in two pieces), target "the black cat", EOS last.
    src = ["▁le", "▁ch", "at", "▁noir", "</s>"]
    tgt = ["▁the", "▁black", "▁cat", "</s>"]
    w = np.array(
        [
            [0.7, 0.1, 0.1, 0.0, 0.1],
            [0.0, 0.1, 0.1, 0.6, 0.2],
            [0.0, 0.3, 0.4, 0.2, 0.1],
            [0.1, 0.0, 0.0, 0.0, 0.9],
        ]
    )
    return AttentionMap(src, tgt, w)


def test_pharaoh_lines_over_pieces_words_threshold_and_shift():
    from seq2seq.alignment.export import pharaoh_line
    from seq2seq.alignment.words import merged

    att = _record()
    assert pharaoh_line(att, words=False, shifted=False, threshold=None) == (
        "0-0 2-2 3-1 4-3"
    )
    assert pharaoh_line(att, True, False, None) == "0-0 1-2 2-1"  # EOS never links
    # Shifted: target j reads row j + 1 (the last word the EOS row, whose best word
    # column is "le").
    assert pharaoh_line(att, True, True, None) == "0-2 1-1 2-0"
    # Threshold over words: chat = 0.1 + 0.1 = 0.2 for "the", 0.7 for "cat".
    assert pharaoh_line(att, True, False, 0.2) == "0-0 1-0 1-1 1-2 2-1 2-2"
    words = merged(att)
    assert words.src_tokens == ["le", "chat", "noir", "</s>"]
    np.testing.assert_allclose(words.weights.sum(1), 1.0)


# ------------------------------------------------------------------ end to end

slow = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("align")
    run_dir = tmp / "run"
    run_script(
        tmp,
        "seq2seq-train",
        *TINY,
        f"data.cache_dir={tmp / 'cache'}",
        "trainer.max_steps=20",
        "trainer.alignment_samples=1",
        "evaluate_test=false",
        f"hydra.run.dir={run_dir}",
    )
    return tmp, run_dir / "checkpoints" / "best.pt"


def _tags(tb_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import (
        EventAccumulator,
    )

    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    return set(acc.Tags()["scalars"])


@slow
def test_training_logs_valid_aer(trained):
    _, ckpt = trained
    tags = _tags(ckpt.parent.parent / "tb")
    assert {"valid/aer", "valid/aer_shifted", "valid/bleu"} <= tags


@slow
def test_evaluate_reports_aer_on_references(trained):
    tmp, ckpt = trained
    proc = run_script(
        tmp,
        "seq2seq-evaluate",
        f"checkpoint={ckpt}",
        "split=test",
        "alignment=true",
        f"hydra.run.dir={tmp / 'eval'}",
    )
    match = re.search(r"AER ([\d.]+)% \(argmax\) ([\d.]+)% \(shifted\)", proc.stdout)
    assert match, proc.stdout
    assert 0 <= float(match.group(1)) <= 100 and "n=40" in proc.stdout


@slow
def test_pharaoh_over_the_whole_split_in_words_and_with_threshold(trained):
    tmp, ckpt = trained
    common = [f"checkpoint={ckpt}", "split=test", "format=pharaoh"]
    out = tmp / "ph"
    run_script(
        tmp,
        "seq2seq-align",
        *common,
        "references=true",
        "words=true",
        f"output={out / 'words.txt'}",
        f"hydra.run.dir={out}",
    )
    run_script(
        tmp,
        "seq2seq-align",
        *common,
        "references=true",
        "words=true",
        "threshold=0.05",
        f"output={out / 'many.txt'}",
        f"hydra.run.dir={out}",
    )
    run_script(
        tmp,
        "seq2seq-align",
        *common,
        "index=[2,5]",
        f"output={out / 'two.txt'}",
        f"hydra.run.dir={out}",
    )
    words = (out / "words.txt").read_text().splitlines()
    many = (out / "many.txt").read_text().splitlines()
    assert len(words) == len(many) == 40
    assert len((out / "two.txt").read_text().splitlines()) == 2
    refs = _test_references(tmp, ckpt)
    for line, ref in zip(words, refs, strict=True):
        links = [tuple(map(int, x.split("-"))) for x in line.split()]
        assert sorted(j for _, j in links) == list(range(len(ref.split())))
    assert sum(len(x.split()) for x in many) >= sum(len(x.split()) for x in words)


def _test_references(tmp: Path, ckpt: Path) -> list[str]:
    from seq2seq.data.splits import encode_corpus_split

    translator = Translator.from_checkpoint(ckpt, device="cpu")
    data = translator.config.data
    return encode_corpus_split(data, translator.tokenizer, "test").tgt_text


@slow
def test_translator_attention_is_one_call_from_texts(trained):
    """Texts in, maps out: of the model's own translation, or forced through given
    references; the same maps as forcing the split by hand."""
    from seq2seq.decoding.maps import forced_split

    translator = Translator.from_checkpoint(trained[1], device="cpu")
    texts, refs = ["the small blue chairs", "I love you"], ["les chaises", "je"]
    split = translator.encode(texts)
    hyps = translator.hypotheses(split)
    cases = [
        (translator.attention(texts), forced_split(split, [h.tokens for h in hyps])),
        (translator.attention(texts, refs), translator.encode(texts, refs)),
    ]
    for maps, forced in cases:
        for m, h in zip(maps, translator.attention_maps(forced), strict=True):
            assert m.src_tokens == h.src_tokens and m.tgt_tokens == h.tgt_tokens
            assert m.tgt_tokens[-1] == "</s>"
            np.testing.assert_allclose(m.weights, h.weights)


@slow
def test_json_npy_html_with_attribution_and_gold(trained):
    tmp, ckpt = trained
    common = [f"checkpoint={ckpt}", "split=test", "index=[0,1,2]", "references=true"]
    out = tmp / "ex"
    proc = run_script(
        tmp,
        "seq2seq-align",
        *common,
        "format=json",
        "attribution=true",
        f"hydra.run.dir={out / 'json'}",
    )
    assert proc.stdout.count("Spearman rho(attention, attribution)") == 3
    records = json.loads((out / "json" / "alignments.json").read_text())
    assert len(records) == 3
    for r in records:
        w, a = np.array(r["weights"]), np.array(r["attribution"])
        assert w.shape == a.shape == (len(r["tgt_tokens"]), len(r["src_tokens"]))
        np.testing.assert_allclose(a.sum(1), 1.0, atol=1e-5)
        assert r["gold"] and -1 <= r["spearman"] <= 1
    run_script(
        tmp,
        "seq2seq-align",
        *common,
        "format=npy",
        "attribution=true",
        f"hydra.run.dir={out / 'npy'}",
    )
    folder = out / "npy" / "alignments"
    assert len(list(folder.glob("attribution_*.npy"))) == 3
    tokens = json.loads((folder / "tokens.json").read_text())
    assert np.load(folder / tokens[2]["file"]).shape == (
        len(tokens[2]["tgt_tokens"]),
        len(tokens[2]["src_tokens"]),
    )
    run_script(
        tmp,
        "seq2seq-align",
        *common,
        "format=html",
        "attribution=true",
        "merge_subwords=true",
        f"hydra.run.dir={out / 'html'}",
    )
    page = (out / "html" / "alignments.html").read_text()
    records = page_records(page)
    assert len(records) == 3 and outside_urls(page) == [] and "AttentionView" in page
    assert any(g[2] == "sure" for r in records for g in r["gold_cells"])
    assert all("attribution" in r and "spearman" in r for r in records)


@pytest.fixture(scope="module")
def reverse(trained) -> Path:
    """A tiny fr→en model on the same phrasebook as ``trained``'s en→fr one."""
    tmp, _ = trained
    run_dir = tmp / "run_fr_en"
    run_script(
        tmp,
        "seq2seq-train",
        *TINY,
        f"data.cache_dir={tmp / 'cache'}",
        "data.src_lang=fr",
        "data.tgt_lang=en",
        "trainer.max_steps=20",
        "trainer.alignment_samples=0",
        "evaluate_test=false",
        f"hydra.run.dir={run_dir}",
    )
    return run_dir / "checkpoints" / "best.pt"


@slow
def test_evaluate_reports_aer_of_both_directions_and_refuses_a_same_way_pair(
    trained, reverse
):
    tmp, ckpt = trained
    common = [f"checkpoint={ckpt}", "split=test", "alignment=true"]
    proc = run_script(
        tmp,
        "seq2seq-evaluate",
        *common,
        f"reverse_checkpoint={reverse}",
        f"hydra.run.dir={tmp / 'eval2'}",
    )
    assert re.search(r"AER [\d.]+% \(argmax\)", proc.stdout)  # today's line stays
    rules = r"intersection [\d.]+% \| union [\d.]+% \| grow-diag-final-and [\d.]+%"
    both = r"\(n=40\): en->fr [\d.]+% \| fr->en [\d.]+% \| " + rules
    assert re.search(both, proc.stdout), proc.stdout
    proc = run_script(
        tmp,
        "seq2seq-evaluate",
        *common,
        f"reverse_checkpoint={ckpt}",
        f"hydra.run.dir={tmp / 'eval3'}",
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"reverse_checkpoint={ckpt} (phrasebook en→fr (train 400" in proc.stderr
    assert f"is not checkpoint={ckpt} (phrasebook en→fr" in proc.stderr


@slow
def test_align_writes_symmetrized_word_links(trained, reverse):
    from seq2seq.alignment.symmetrize import grow_diag_final_and
    from seq2seq.alignment.twoway import readout_for, two_way_links
    from seq2seq.config import TwoWayReadout
    from seq2seq.data.splits import encode_corpus_split

    tmp, ckpt = trained
    out = tmp / "sym"
    common = [f"checkpoint={ckpt}", f"reverse_checkpoint={reverse}", "split=test"]
    common += ["references=true", "format=pharaoh", "words=true"]
    for rule in ("intersection", "grow-diag-final-and", "geometric"):
        run_script(
            tmp,
            "seq2seq-align",
            *common,
            f"symmetrize={rule}",
            f"output={out / rule}.txt",
            f"hydra.run.dir={out}",
        )
    # A text without a reference: the forward model's hypothesis is read both ways.
    run_script(
        tmp,
        "seq2seq-align",
        *common[:2],
        "text=the small blue chairs .",
        "format=pharaoh",
        "words=true",
        f"output={out / 'text.txt'}",
        f"hydra.run.dir={out}",
    )
    assert len((out / "text.txt").read_text().splitlines()) == 1
    inter = (out / "intersection.txt").read_text().splitlines()
    grown = (out / "grow-diag-final-and.txt").read_text().splitlines()
    geo = (out / "geometric.txt").read_text().splitlines()
    assert len(inter) == len(grown) == len(geo) == 40
    forward = Translator.from_checkpoint(ckpt, device="cpu")
    backward = Translator.from_checkpoint(reverse, device="cpu")
    split = encode_corpus_split(forward.config.data, forward.tokenizer, "test")
    # The command's default readout: the lexicon mixed in, geometric's thresholds.
    readout = readout_for(TwoWayReadout(), forward.config.data)
    assert readout.lexicon > 0 and readout.floor > 0 and readout.add is not None
    links = two_way_links(forward, backward, split, readout=readout)
    for k, (line_i, line_g) in enumerate(zip(inter, grown, strict=True)):
        got_i = {tuple(map(int, x.split("-"))) for x in line_i.split()}
        got_g = {tuple(map(int, x.split("-"))) for x in line_g.split()}
        assert got_i <= got_g
        if links[k] is not None:  # the command wrote what the library computes
            assert got_g == grow_diag_final_and(links[k].forward, links[k].reverse)
            got_geo = {tuple(map(int, x.split("-"))) for x in geo[k].split()}
            assert got_geo == links[k].combined("geometric", readout)
            assert max(i for i, _ in got_g) < len(split.src_text[k].split())
            assert max(j for _, j in got_g) < len(split.tgt_text[k].split())
