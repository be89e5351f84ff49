import gzip
import json
import re

import datasets
import pytest

from seq2seq.cli.app import describe
from seq2seq.config import DataConfig
from seq2seq.data.corpus import CorpusError, read_corpus
from seq2seq.errors import HubError, SplitChoiceError
from tests.helpers import phrasebook_config

PAIRS = {
    "train": [("ein Hund", "a dog"), ("eine Katze", "a cat"), ("ein Haus", "a house")],
    "validation": [("ein Baum", "a tree")],
    "test": [("ein Auto", "a car"), ("ein Boot", "a boat")],
}


def write_jsonl(folder, name, pairs, keys=("de", "en")):
    lines = [
        json.dumps(dict(zip(keys, pair, strict=True)), ensure_ascii=False)
        for pair in pairs
    ]
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_text(folder, stem, pairs, gz=False):
    for k, lang in enumerate(("de", "en")):
        data = "".join(pair[k] + "\n" for pair in pairs).encode()
        if gz:
            (folder / f"{stem}.{lang}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / f"{stem}.{lang}").write_bytes(data)


def local(folder, src="de", tgt="en", name="local"):
    return DataConfig(name=name, local_dir=str(folder), src_lang=src, tgt_lang=tgt)


def assert_matches(dd):
    for split, pairs in PAIRS.items():
        assert list(zip(dd[split]["src"], dd[split]["tgt"], strict=True)) == pairs


def test_local_jsonl(tmp_path):
    for split, pairs in PAIRS.items():
        write_jsonl(tmp_path, f"{split}.jsonl", pairs)
    assert_matches(read_corpus(local(tmp_path)).splits)
    reverse = read_corpus(local(tmp_path, "en", "de")).splits
    assert reverse["train"]["src"][0] == "a dog"


@pytest.mark.parametrize("ext,sep", [("tsv", "\t"), ("csv", ",")])
def test_local_tsv_and_csv(tmp_path, ext, sep):
    for split, pairs in PAIRS.items():
        rows = ["en" + sep + "de"] + [t + sep + s for s, t in pairs]
        (tmp_path / f"{split}.{ext}").write_text("\n".join(rows) + "\n")
    assert_matches(read_corpus(local(tmp_path)).splits)


def test_local_parallel_text_with_gzip_and_split_aliases(tmp_path):
    write_text(tmp_path, "train", PAIRS["train"], gz=True)
    write_text(tmp_path, "val", PAIRS["validation"])
    write_text(tmp_path, "test_2016_flickr", PAIRS["test"], gz=True)
    assert_matches(read_corpus(local(tmp_path)).splits)


def test_hub_code_path_with_local_dataset_in_hub_layout(tmp_path):
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
        write_jsonl(tmp_path, f"{name}.jsonl", PAIRS[split], keys=("de", "en"))
    cfg = DataConfig(
        name="multi30k", hub_id=str(tmp_path), src_lang="de", tgt_lang="en"
    )
    assert_matches(read_corpus(cfg).splits)
    cfg.tgt_lang = "fr"
    with pytest.raises(
        CorpusError, match="no column for language 'fr'; columns present"
    ):
        read_corpus(cfg)


def test_hub_unreachable_is_a_hub_error_that_the_command_completes(monkeypatch):
    """The library says what failed; the command boundary adds the setting that
    reads a folder instead."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cfg = DataConfig(name="multi30k", src_lang="de", tgt_lang="en")
    with pytest.raises(HubError, match=r"bentrevett/multi30k") as caught:
        read_corpus(cfg)
    assert "data." not in str(caught.value)
    shown = describe(caught.value)
    assert re.search(r"bentrevett/multi30k.*; data\.local_dir=DIR", shown)


def test_hub_out_of_reach_fails_at_once_naming_local_dir(monkeypatch, caplog):
    """No network: one short probe, then the local cache only, not 23 s of retries."""
    import time
    import urllib.error
    import urllib.request

    def no_network(request, timeout):
        assert timeout <= 5
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_DATASETS_CACHE", "/nonexistent-cache")
    cfg = DataConfig(name="multi30k", hub_id="nobody/no-such-corpus")
    start = time.monotonic()
    with pytest.raises(HubError, match=r"unreachable.*not in the local cache"):
        read_corpus(cfg)
    assert time.monotonic() - start < 10
    assert "looking for nobody/no-such-corpus in the local cache" in caplog.text
    assert datasets.config.HF_HUB_OFFLINE is False  # restored


def test_missing_split(tmp_path):
    for split in ("train", "test"):
        write_jsonl(tmp_path, f"{split}.jsonl", PAIRS[split])
    with pytest.raises(CorpusError, match=r"missing split 'validation'.*files present"):
        read_corpus(local(tmp_path))


def test_missing_language_in_parallel_text(tmp_path):
    for split, pairs in PAIRS.items():
        write_text(tmp_path, split, pairs)
    with pytest.raises(
        CorpusError, match=r"language 'fr'.*train\.fr\.gz.*present: \['de', 'en'\]"
    ):
        read_corpus(local(tmp_path, "de", "fr"))


def test_missing_key_in_jsonl_names_file_and_line(tmp_path):
    for split, pairs in PAIRS.items():
        write_jsonl(tmp_path, f"{split}.jsonl", pairs)
    with (tmp_path / "train.jsonl").open("a") as handle:
        handle.write(json.dumps({"de": "nur Deutsch"}) + "\n")
    with pytest.raises(CorpusError, match=r"train\.jsonl:4: no key for language 'en'"):
        read_corpus(local(tmp_path))


def test_missing_column_in_tsv(tmp_path):
    for split, pairs in PAIRS.items():
        rows = ["de\ten"] + [f"{s}\t{t}" for s, t in pairs]
        (tmp_path / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    with pytest.raises(
        CorpusError, match=r"train\.tsv: no column for language 'fr'.*\['de', 'en'\]"
    ):
        read_corpus(local(tmp_path, "de", "fr"))


def test_line_count_mismatch_names_both_files(tmp_path):
    for split, pairs in PAIRS.items():
        write_text(tmp_path, split, pairs)
    (tmp_path / "train.en").write_text("a dog\na cat\n")
    with pytest.raises(
        CorpusError, match=r"train\.de has 3 lines, .*train\.en has 2 lines"
    ):
        read_corpus(local(tmp_path))


def test_invalid_utf8_names_file_and_line(tmp_path):
    for split, pairs in PAIRS.items():
        write_text(tmp_path, split, pairs)
    (tmp_path / "test.en").write_bytes(b"a car\na b\xffat\n")
    with pytest.raises(CorpusError, match=r"test\.en:2: invalid UTF-8"):
        read_corpus(local(tmp_path))


def test_empty_pairs_are_filtered_and_counted(tmp_path, caplog):
    for split, pairs in PAIRS.items():
        write_text(tmp_path, split, pairs)
    (tmp_path / "train.de").write_text("ein Hund\n  \neine Katze\n")
    loaded = read_corpus(local(tmp_path))
    assert loaded.filtered["train"] == {"empty": 1}
    assert loaded.splits["train"]["src"] == ["ein Hund", "eine Katze"]
    assert "filtered 1 pairs with an empty side" in caplog.text


def test_no_corpus_files_and_unknown_name(tmp_path):
    with pytest.raises(CorpusError, match="found no corpus files"):
        read_corpus(local(tmp_path))
    with pytest.raises(ValueError, match="'wmt' is not a valid Corpus"):
        read_corpus(DataConfig(name="wmt"))


def test_multi30k_local_dir(multi30k_dir):
    dd = read_corpus(local(multi30k_dir, "de", "en", name="multi30k")).splits
    assert [dd[s].num_rows for s in ("train", "validation", "test")] == [
        29000,
        1014,
        1000,
    ]
    assert dd["train"][0]["tgt"].startswith("Two young, White males")


def test_multi30k_raw_parallel_text(multi30k_dir):
    dd = read_corpus(local(multi30k_dir / "raw", "en", "fr")).splits
    assert [dd[s].num_rows for s in ("train", "validation", "test")] == [
        29000,
        1014,
        1000,
    ]


def test_phrasebook_source_has_alignments():
    dd = read_corpus(phrasebook_config(20, 5, 5)).splits
    assert dd["train"].column_names == ["src", "tgt", "alignment"]
    assert dd["validation"].num_rows == 5


def test_alignment_files_attach_links_and_name_the_bad_line(tmp_path):
    from seq2seq.data.links_file import LinksFileError
    from seq2seq.data.splits import encode_corpus_split

    for split, pairs in PAIRS.items():
        write_jsonl(tmp_path, f"{split}.jsonl", pairs)
    links = tmp_path / "train.links"
    links.write_text("0-0 1-1\n0-0 1?1\n\n")  # an empty line: a pair without links
    cfg = local(tmp_path)
    cfg.alignments.train = str(links)
    dd = read_corpus(cfg).splits
    assert dd["train"]["alignment"] == ["0-0 1-1", "0-0 1?1", ""]
    assert "alignment" not in dd["test"].column_names
    # Only the splits asked for read their file: a test split needs no training links.
    links.unlink()
    assert (
        "alignment"
        not in read_corpus(cfg, links_for=("test",)).splits["train"].column_names
    )
    with pytest.raises(LinksFileError, match=r"no such links file \(for the train"):
        read_corpus(cfg)
    for text, message in (
        ("0-0\n0-0\n", r"train.links: 2 lines, but the train split has 3 pairs"),
        ("0-0\n0-0 1:1\n0-0\n", r"train.links:2: '1:1' is not a link"),
        ("0-0\n0-0\n0-2\n", r"train.links:3: link 0-2 is outside the pair's 2 source"),
    ):
        links.write_text(text)
        with pytest.raises(LinksFileError, match=message):
            read_corpus(cfg)
    # A gold test file makes AER possible on any corpus.
    gold = tmp_path / "test.links"
    gold.write_text("0-0 1-1\n1-1\n")
    cfg.alignments.train, cfg.alignments.test = None, str(gold)

    class Words:
        def encode_src(self, texts):
            return [[4] * len(t.split()) for t in texts]

        encode_tgt = encode_src

    assert encode_corpus_split(cfg, Words(), "test").alignment == ["0-0 1-1", "1-1"]


def test_an_alignment_file_replaces_the_phrasebook_gold(tmp_path):
    cfg = phrasebook_config(6, 2, 2)
    gold = read_corpus(cfg).splits["train"]
    lines = ["0-0"] * gold.num_rows
    (tmp_path / "train.links").write_text("\n".join(lines) + "\n")
    cfg.alignments.train = str(tmp_path / "train.links")
    dd = read_corpus(cfg).splits
    assert dd["train"]["alignment"] == lines != gold["alignment"]
    assert (
        dd["test"]["alignment"]
        == read_corpus(phrasebook_config(6, 2, 2)).splits["test"]["alignment"]
    )


def test_a_byte_order_mark_is_read_as_such(tmp_path):
    """Windows tools start UTF-8 files with a BOM: the first key is still 'de'."""
    for split, pairs in PAIRS.items():
        write_jsonl(tmp_path, f"{split}.jsonl", pairs)
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert_matches(read_corpus(local(tmp_path)).splits)


def test_a_command_reads_only_the_split_it_needs(tmp_path):
    """Evaluating the test split neither needs nor reads the training file."""
    write_jsonl(tmp_path, "test.jsonl", PAIRS["test"])
    (tmp_path / "train.jsonl").write_text("not json at all\n")
    dd = read_corpus(local(tmp_path), splits=("test",)).splits
    assert list(dd) == ["test"]
    assert dd["test"]["src"] == ["ein Auto", "ein Boot"]
    with pytest.raises(CorpusError, match=r"train\.jsonl:1: invalid JSON"):
        read_corpus(local(tmp_path), splits=("train",))


def test_split_names_of_the_corpus_are_chosen_with_data_splits(tmp_path):
    for name, pairs in (
        ("train", PAIRS["train"]),
        ("dev", PAIRS["validation"]),
        ("test_2016", PAIRS["test"]),
        ("test_2017", PAIRS["train"]),
    ):
        write_jsonl(tmp_path, f"{name}.jsonl", pairs)  # fmt: skip
    cfg = local(tmp_path)
    with pytest.raises(SplitChoiceError, match=r"several files could be split 'test'"):
        read_corpus(cfg)
    cfg.splits.test = "test_2016"
    assert_matches(read_corpus(cfg).splits)
    cfg.splits.test = "test_2018"
    with pytest.raises(SplitChoiceError, match=r"no split named 'test_2018'") as caught:
        read_corpus(cfg)
    assert caught.value.split == "test" and "data." not in str(caught.value)
    assert describe(caught.value).endswith("with data.splits.test=NAME)")


def test_a_hub_dataset_with_a_configuration_and_a_translation_column(tmp_path):
    """WMT14's shape: ``load_dataset("wmt14", "de-en")`` with a ``translation``
    column; here a local folder in the hub's layout, its configurations declared in
    its README as on the hub."""
    names = {"train": "train", "validation": "newstest2013", "test": "newstest2014"}
    files = "\n".join(
        f"  - split: {split}\n    path: de-en/{name}.jsonl"
        for split, name in (("train", "train"), ("validation", "validation"),
                            ("test", "test"))
    )  # fmt: skip
    (tmp_path / "README.md").write_text(
        f"---\nconfigs:\n- config_name: de-en\n  data_files:\n{files}\n---\n"
    )
    (tmp_path / "de-en").mkdir()
    for split, pairs in PAIRS.items():
        lines = [
            json.dumps({"translation": {"de": de, "en": en}}, ensure_ascii=False)
            for de, en in pairs
        ]
        (tmp_path / "de-en" / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    cfg = DataConfig(name="hub", hub_id=str(tmp_path), hub_config="de-en",
                     src_lang="de", tgt_lang="en")  # fmt: skip
    assert_matches(read_corpus(cfg).splits)
    cfg.splits.validation = names["validation"]
    with pytest.raises(SplitChoiceError, match=r"no split named 'newstest2013'"):
        read_corpus(cfg)
    cfg.splits.validation, cfg.tgt_lang = None, "fr"
    with pytest.raises(CorpusError, match=r"no column for language 'fr'.*'de', 'en'"):
        read_corpus(cfg)
