import json

from seq2seq.config import DataConfig, TokenizerConfig
from seq2seq.data.batching import make_loader
from seq2seq.data.prepare import format_stats, prepare_data, resolve_cache_root
from tests.helpers import phrasebook_config


def small_phrasebook():
    return phrasebook_config(300, 40, 40)


def test_phrasebook_prepare_and_cache_hit(tmp_path):
    tok_cfg = TokenizerConfig(vocab_size=300)
    first = prepare_data(small_phrasebook(), tok_cfg, tmp_path)
    assert not first.cached
    assert {s: len(first.splits[s]) for s in first.splits} == {
        "train": 300, "validation": 40, "test": 40,
    }  # fmt: skip
    split = first.splits["train"]
    assert split.alignment is not None and len(split.alignment) == 300
    assert first.tokenizer.decode_src(split.src_ids[0]) == split.src_text[0]
    second = prepare_data(small_phrasebook(), tok_cfg, tmp_path)
    assert second.cached and second.cache_dir == first.cache_dir
    assert second.splits["validation"] == first.splits["validation"]
    assert second.tokenizer.to_bytes() == first.tokenizer.to_bytes()
    assert second.stats["seconds"] < 1.0
    assert (
        json.loads((first.cache_dir / "stats.json").read_text())["src_vocab_size"] > 4
    )


def test_cache_miss_when_a_setting_changes(tmp_path):
    base = prepare_data(small_phrasebook(), TokenizerConfig(vocab_size=300), tmp_path)
    other_vocab = prepare_data(
        small_phrasebook(), TokenizerConfig(vocab_size=200), tmp_path
    )
    assert not other_vocab.cached and other_vocab.cache_dir != base.cache_dir
    cfg = small_phrasebook()
    cfg.phrasebook.seed = 99
    assert not prepare_data(cfg, TokenizerConfig(vocab_size=300), tmp_path).cached


def write_corpus(folder, extra=""):
    for split, n in (("train", 30), ("validation", 5), ("test", 5)):
        src = [f"ein kleiner Hund Nummer {i}" for i in range(n)]
        tgt = [f"a small dog number {i}" for i in range(n)]
        if split == "train":
            src.append("sehr " * 40 + "lang")
            tgt.append("very " * 40 + "long" + extra)
        (folder / f"{split}.de").write_text("\n".join(src) + "\n")
        (folder / f"{split}.en").write_text("\n".join(tgt) + "\n")


def test_cache_miss_when_corpus_changes_and_long_pairs_filtered_in_train(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_corpus(corpus)
    cfg = DataConfig(
        name="local", local_dir=str(corpus), src_lang="de", tgt_lang="en", max_len=20
    )
    tok_cfg = TokenizerConfig(vocab_size=60)
    first = prepare_data(cfg, tok_cfg, tmp_path / "cache")
    assert first.stats["splits"]["train"]["filtered"] == {"empty": 0, "too_long": 1}
    assert len(first.splits["train"]) == 30
    assert prepare_data(cfg, tok_cfg, tmp_path / "cache").cached
    write_corpus(corpus, extra=" indeed")
    changed = prepare_data(cfg, tok_cfg, tmp_path / "cache")
    assert not changed.cached and changed.cache_dir != first.cache_dir
    text = format_stats(changed.stats)
    assert "too_long 1" in text and "padding" in text


def test_validation_and_test_keep_long_pairs(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_corpus(corpus)
    (corpus / "test.de").write_text("sehr " * 40 + "\n")
    (corpus / "test.en").write_text("very " * 40 + "\n")
    cfg = DataConfig(
        name="local", local_dir=str(corpus), src_lang="de", tgt_lang="en", max_len=20
    )
    prepared = prepare_data(cfg, TokenizerConfig(vocab_size=60), tmp_path / "cache")
    assert len(prepared.splits["test"]) == 1
    assert len(prepared.splits["test"].src_ids[0]) > 20


def test_multi30k_de_en_padding_at_default_budget(multi30k_dir, tmp_path):
    cfg = DataConfig(
        name="multi30k", local_dir=str(multi30k_dir), src_lang="de", tgt_lang="en"
    )
    prepared = prepare_data(cfg, TokenizerConfig(), tmp_path)
    stats = prepared.stats
    assert stats["batch_tokens"] == 4096
    assert stats["padding_fraction"] <= 0.10
    assert stats["splits"]["train"]["pairs"] == 29000
    loader = make_loader(prepared.splits["train"], 4096, shuffle=True, seed=0)
    batch = next(iter(loader))
    pad = (~batch.src_mask).sum().item() / batch.src_mask.numel()
    assert pad <= 0.25
    assert max(batch.src.numel(), batch.tgt_out.numel()) <= 4096


def test_resolve_cache_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_cache_root("data/cache") == tmp_path.resolve() / "data/cache"
    assert resolve_cache_root(tmp_path / "x") == tmp_path / "x"
