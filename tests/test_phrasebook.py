import re

import pytest

from seq2seq.config import PhrasebookConfig
from seq2seq.data.corpus import CorpusError, read_corpus
from seq2seq.phrasebook.generator import (
    Tok,
    french_surface,
    generate_phrasebook,
    phrasebook_columns,
    transpose_links,
)
from seq2seq.phrasebook.lexicon import lexicon
from tests.helpers import phrasebook_config


@pytest.fixture(scope="module")
def corpus():
    cfg = PhrasebookConfig()
    return phrasebook_columns(
        cfg.train_size, cfg.validation_size, cfg.test_size, cfg.seed
    )


def parse(alignment):
    return [tuple(map(int, re.split(r"[-?]", link))) for link in alignment.split()]


def pairs(corpus):
    for split in corpus.values():
        yield from zip(split["src"], split["tgt"], split["alignment"], strict=True)


def test_sizes_and_dataset_dict():
    dd = generate_phrasebook(50, 10, 10, seed=1)
    assert {s: dd[s].num_rows for s in dd} == {
        "train": 50,
        "validation": 10,
        "test": 10,
    }
    assert dd["train"].column_names == ["src", "tgt", "alignment"]


def test_deterministic_for_a_seed():
    assert phrasebook_columns(100, 10, 10, 7) == phrasebook_columns(100, 10, 10, 7)
    assert phrasebook_columns(100, 10, 10, 7) != phrasebook_columns(100, 10, 10, 8)


def test_held_out_splits_do_not_depend_on_train_size_and_are_disjoint(corpus):
    small = phrasebook_columns(10, 500, 500, 1234)
    assert small["validation"] == corpus["validation"]
    train = set(corpus["train"]["src"])
    assert not train & set(corpus["validation"]["src"])
    assert not train & set(corpus["test"]["src"])


def test_alignments_in_range_and_every_token_aligned(corpus):
    for src, tgt, alignment in pairs(corpus):
        links = parse(alignment)
        n_src, n_tgt = len(src.split()), len(tgt.split())
        assert all(0 <= i < n_src and 0 <= j < n_tgt for i, j in links), (src, tgt)
        assert {i for i, _ in links} == set(range(n_src)), (src, alignment)
        assert {j for _, j in links} == set(range(n_tgt)), (tgt, alignment)
        assert src.endswith(" .") and tgt.endswith(" .")


def has(corpus, src_pattern, tgt_pattern):
    return any(
        re.search(src_pattern, s) and re.search(tgt_pattern, t)
        for s, t, _ in pairs(corpus)
    )


def test_phenomena_occur_in_default_corpus(corpus):
    # post-nominal adjective with agreement; pre-nominal petit/grand/beau
    colours_en = r"(blue|green|black|white|grey)"
    colours_fr = r"(bleues|vertes|noires|blanches|grises)"
    assert has(
        corpus,
        rf"\bthe small {colours_en} \w+s\b",
        rf"\bles petites \w+es {colours_fr}\b",
    )
    assert has(corpus, r"\bthe blue notebook\b", r"\ble carnet bleu\b")
    assert has(corpus, r"\b(an?|the) old \w+", r"\b(vieil|vieille|vieux) ")
    # reversed compound
    assert has(corpus, r"\bthe meeting room\b", r"\bla salle de réunion\b")
    # object pronouns before the verb, with elision and participle agreement
    assert has(corpus, r"^I love you\b", r"^je t'aime\b")
    assert has(corpus, r"\bsees them\b", r"\bles voit\b")
    assert has(corpus, r"\bsaw them\b", r"\bles a vus\b")
    # negation around a compound tense
    assert has(
        corpus, r"did not leave the \w+ notebook", r"n'a pas laissé le carnet \w+"
    )
    assert has(corpus, r"\bdoes not \w+", r"\bne \w+ pas\b")
    # time adverbs
    assert has(corpus, r"\byesterday \.", r"\bhier \.")
    assert has(corpus, r"\b\w+ days ago \.", r"\bil y a \w+ jours \.")
    assert has(corpus, r"\blast week \.", r"\bla semaine dernière \.")


def test_names_are_copied(corpus):
    names = {name for name, _ in lexicon().names}
    seen = 0
    for src, tgt, _ in pairs(corpus):
        for word in set(src.split()) & names:
            assert word in tgt.split()
            seen += 1
    assert seen > 1000


def test_elision_and_contraction_rules():
    toks = french_surface(
        [Tok("à", {0}, kind="prep"), Tok("le", {1}, kind="art"), Tok("marché", {2})]
    )
    assert [t.word for t in toks] == ["au", "marché"] and toks[0].sure == {0, 1}
    toks = french_surface(
        [Tok("je", {0}), Tok("ne", {2}), Tok("la", {3}), Tok("aime", {1})]
    )
    assert [t.word for t in toks] == ["je", "ne", "l'aime"] and toks[2].sure == {1, 3}
    toks = french_surface([Tok("ce", {0}, vowel_form="cet"), Tok("hôtel", {1})])
    assert [t.word for t in toks] == ["cet", "hôtel"]


def test_links_transpose_sure_and_possible():
    assert transpose_links("0-0 0-1 2?1 3-2") == "0-0 1-0 1?2 2-3"
    assert transpose_links(transpose_links("0-1 1?0 2-2")) == "0-1 1?0 2-2"


def test_french_to_english_swaps_the_sides_and_transposes_the_links():
    cfg = phrasebook_config(30, 5, 5)
    en_fr = read_corpus(cfg).splits
    cfg.src_lang, cfg.tgt_lang = "fr", "en"
    fr_en = read_corpus(cfg).splits
    for split in ("train", "validation", "test"):
        forward, backward = en_fr[split], fr_en[split]
        assert backward["src"] == forward["tgt"]
        assert backward["tgt"] == forward["src"]
        assert backward["alignment"] == [
            transpose_links(links) for links in forward["alignment"]
        ]
    # every link still points at real tokens, source (now French) index first
    for src, tgt, links in zip(
        *(fr_en["train"][c] for c in fr_en["train"].column_names), strict=True
    ):
        for i, j in parse(links):
            assert i < len(src.split()) and j < len(tgt.split())


def test_other_languages_are_refused():
    cfg = phrasebook_config(30, 5, 5)
    cfg.src_lang = "de"
    with pytest.raises(CorpusError, match="English–French"):
        read_corpus(cfg)


def test_the_generated_pairs_are_those_of_the_generator_version():
    """Prepared caches are keyed by ``GENERATOR_VERSION``, not by the generator's
    source: a change that alters the generated pairs must bump the version (and then
    this digest), and a change that does not (a comment, a refactoring) leaves every
    cache valid."""
    import hashlib
    import json

    from seq2seq.phrasebook import GENERATOR_VERSION

    columns = phrasebook_columns(40, 10, 10, 1234)
    digest = hashlib.sha256(json.dumps(columns, ensure_ascii=False).encode())
    assert (GENERATOR_VERSION, digest.hexdigest()) == (
        1,
        "bc367702d810feb951877f96fd08e6164b0790b9f2933486d01ff83d21b6e699",
    )
