"""The value checks of the schemas (config_checks.py) and of each command, in-process:
each rule refuses a bad value with a message naming the key, and the defaults of
every command pass."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from seq2seq.cli.checks import check_reverse
from seq2seq.config import CONFIG_DIR, DataConfig, ModelConfig, register_configs
from seq2seq.decoding.settings import decode_settings
from seq2seq.errors import ConfigValueError, UserError
from seq2seq.model.seq2seq import build_model
from tests.conftest import check_command

register_configs()


def _checked(command: str, *overrides: str) -> None:
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=command, overrides=list(overrides))
    check_command(command, cfg)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.max_len=0", "data.max_len=0: must be at least 1"),
        ("data.phrasebook.test_size=0", "data.phrasebook.test_size=0"),
        ("data.tgt_lang=de", "the phrasebook is English–French"),
        ("data.name=local", "needs data.local_dir=DIR"),
        ("data.alignments.train=x.txt", "data.alignments.train=x.txt: no such file"),
        ("tokenizer.vocab_size=4", "must exceed the 4 special pieces"),
        ("tokenizer.character_coverage=0", "must be in (0, 1]"),
        (
            "tokenizer.sampling_alpha=-0.5",
            "tokenizer.sampling_alpha=-0.5: must be >= 0",
        ),
        ("model.emb_dim=0", "model.emb_dim=0: must be at least 1"),
        ("model.word_dropout=1", "model.word_dropout=1.0: must be in [0, 1)"),
        ("model/attention=multihead", "must divide the attention size"),
        ("optim.lr=0", "optim.lr=0.0: must be > 0"),
        ("optim.betas=[0.9]", "must be two values in [0, 1)"),
        ("optim.weight_decay=-1", "must be >= 0"),
        ("scheduler.factor=1", "scheduler.factor=1.0: must be in (0, 1)"),
        ("scheduler.warmup_steps=-5", "scheduler.warmup_steps=-5"),
        ("decode.beam_size=0", "decode.beam_size=0: must be at least 1"),
        ("decode.length_penalty=-1", "decode.length_penalty=-1.0"),
        ("decode.coverage_penalty=-0.2", "decode.coverage_penalty=-0.2: must be >= 0"),
        ("trainer.rdrop=-1", "trainer.rdrop=-1.0: must be >= 0"),
        ("trainer.ema_decay=1", "trainer.ema_decay=1.0: must be in [0, 1)"),
        ("trainer.max_steps=0", "trainer.max_steps=0: must be at least 1"),
        ("trainer.accumulate=0", "trainer.accumulate=0"),
        ("trainer.clip_grad_norm=0", "trainer.clip_grad_norm=0.0: must be > 0"),
        ("trainer.teacher_forcing.min_ratio=2", "must be in [0, 1]"),
        ("trainer.device=gpu", "not a device"),
        ("trainer.guided_alignment=-1", "must be >= 0"),
        ("trainer.compile_bucket=-8", "trainer.compile_bucket=-8: must be >= 0"),
        (
            "trainer.compile_mode=reduce-overhead",
            "trainer.compile_mode=reduce-overhead needs trainer.compile=true",
        ),
    ],
)
def test_train_refuses(override, message):
    overrides = [override]
    if override.startswith("model/attention=multihead"):
        overrides.append("model.attention.heads=3")
    with pytest.raises(ConfigValueError) as info:
        _checked("train", *overrides)
    assert message in str(info.value)


def test_subword_sampling_needs_a_unigram_model_to_train_not_to_prepare():
    bpe = ("tokenizer.model_type=bpe", "tokenizer.sampling_alpha=0.1")
    with pytest.raises(ConfigValueError, match=r"model_type=bpe \(BPE-dropout\)"):
        _checked("train", *bpe)
    _checked("prepare", *bpe)  # preparing never samples
    _checked("train", "tokenizer.model_type=bpe", "tokenizer.sampling_alpha=0")


def test_a_sparse_normalizer_needs_an_attention():
    with pytest.raises(ConfigValueError, match="nothing to normalize"):
        _checked(
            "train", "model.attention.normalizer=sparsemax", "model/attention=none"
        )


def test_guided_alignment_needs_an_attention():
    with pytest.raises(ConfigValueError, match="needs an attention to guide"):
        _checked("train", "trainer.guided_alignment=1", "model/attention=none")


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "best.pt"
    path.touch()
    return f"checkpoint={path}"


@pytest.mark.parametrize(
    ("command", "overrides", "message"),
    [
        ("evaluate", ["batch_tokens=0"], "batch_tokens=0: must be at least 1"),
        ("evaluate", ["length_penalty=-1"], "length_penalty=-1.0"),
        ("translate", ["coverage_penalty=-1"], "coverage_penalty=-1.0: must be >= 0"),
        ("evaluate", ["device=tpu"], "device='tpu': not a device"),
        ("evaluate", ["data.phrasebook.test_size=0"], "data.phrasebook.test_size=0"),
        ("translate", ["max_input_pieces=0"], "max_input_pieces=0"),
        ("align", ["text=a", "split=test"], "not both"),
        ("align", ["text=a", "index=[1]"], "give split=NAME too"),
        ("align", ["split=test", "reference=x"], "reference= goes with text="),
        ("align", ["split=test", "index=[-1]"], "indices count from 0"),
        ("align", ["text=a", "threshold=2"], "threshold=2.0: must be in [0, 1]"),
        ("align", ["text=a", "reference=' '"], "reference=' ' is empty"),
        ("evaluate", ["reverse_checkpoint=no.pt"], "reverse_checkpoint=no.pt: no such"),
        ("align", ["text=a", "reverse_checkpoint=no.pt"], "trained the other way"),
        ("evaluate", ["two_way.lexicon=1.5"], "two_way.lexicon=1.5: must be in [0, 1]"),
        ("align", ["text=a", "two_way.lexicon_iterations=0"], "must be at least 1"),
        ("align", ["text=a", "two_way.add=0"], "two_way.add=0.0: must be in (0, 1]"),
        ("evaluate", ["two_way.floor=-0.1"], "two_way.floor=-0.1"),
    ],
)
def test_decoding_commands_refuse(command, overrides, message, ckpt):
    with pytest.raises(ConfigValueError) as info:
        _checked(command, ckpt, *overrides)
    assert message in str(info.value)


def test_an_ensemble_needs_members_that_exist(ckpt):
    with pytest.raises(ConfigValueError, match="give at least one checkpoint"):
        _checked("evaluate", "checkpoint=[]")
    one = ckpt.split("=", 1)[1]
    _checked("evaluate", f"checkpoint=[{one},{one}]")
    with pytest.raises(ConfigValueError, match=r"checkpoint=nope\.pt: no such file"):
        _checked("translate", f"checkpoint=[{one},nope.pt]")


def test_a_reverse_checkpoint_goes_with_aer_and_with_pharaoh_word_links(ckpt):
    path = ckpt.split("=", 1)[1]
    reverse = f"reverse_checkpoint={path}"
    with pytest.raises(ConfigValueError, match="for AER: add alignment=true"):
        _checked("evaluate", ckpt, reverse)
    _checked("evaluate", ckpt, reverse, "alignment=true")
    _checked("evaluate", ckpt, f"reverse_checkpoint=[{path},{path}]", "alignment=true")
    with pytest.raises(ConfigValueError, match=r"reverse_checkpoint=no\.pt: no such"):
        _checked(
            "evaluate", ckpt, f"reverse_checkpoint=[{path},no.pt]", "alignment=true"
        )
    with pytest.raises(ConfigValueError, match="give format=pharaoh words=true"):
        _checked("align", ckpt, reverse, "split=test", "format=json")
    with pytest.raises(ConfigValueError, match=r"\(format=pharaoh, words=false\)"):
        _checked("align", ckpt, reverse, "split=test", "format=pharaoh")
    word_links = ("split=test", "format=pharaoh", "words=true")
    with pytest.raises(ConfigValueError, match=r"threshold=0\.2 reads many links"):
        _checked("align", ckpt, reverse, *word_links, "threshold=0.2")
    with pytest.raises(ConfigValueError, match="attribution=true explains one"):
        _checked("align", ckpt, reverse, *word_links, "attribution=true")
    _checked("align", ckpt, reverse, *word_links, "symmetrize=union")


def _data(**overrides):
    data = OmegaConf.structured(DataConfig)
    for key, value in overrides.items():
        OmegaConf.update(data, key, value)
    return data


def test_a_reverse_checkpoint_reads_the_same_corpus_the_other_way():
    en_fr, fr_en = _data(), _data(src_lang="fr", tgt_lang="en")
    check_reverse(en_fr, fr_en, "a.pt", "b.pt")
    check_reverse(fr_en, en_fr, "b.pt", "a.pt")
    with pytest.raises(ConfigValueError) as info:
        check_reverse(en_fr, en_fr, "a.pt", "c.pt")
    assert str(info.value).startswith(
        "reverse_checkpoint=c.pt (phrasebook en→fr (train 20000, validation 500, test "
        "500, seed 1234)) is not checkpoint=a.pt (phrasebook en→fr"
    )
    other = _data(src_lang="fr", tgt_lang="en", **{"phrasebook.seed": 7})
    with pytest.raises(ConfigValueError, match=r"fr→en \(train 20000.*seed 7\)"):
        check_reverse(en_fr, other, "a.pt", "d.pt")
    hub = _data(name="multi30k", hub_id="bentrevett/multi30k")
    with pytest.raises(ConfigValueError, match=r"multi30k en→fr \(hub bentrevett"):
        check_reverse(fr_en, hub, "b.pt", "e.pt")


def test_unknown_key_added_with_plus_names_the_nearest_setting():
    with pytest.raises(ConfigValueError, match=r"did you mean trainer\.max_epochs\?"):
        _checked("train", "+trainer.max_epoch=3")
    with pytest.raises(ConfigValueError, match="the settings there: data, tokenizer"):
        _checked("train", "+zzz=1")


def test_python_callers_get_the_same_checks():
    cfg = ModelConfig()
    cfg.encoder.dropout = 1.0
    with pytest.raises(ConfigValueError, match=r"model\.encoder\.dropout=1\.0"):
        build_model(cfg, 10, 10)
    with pytest.raises(ConfigValueError, match=r"decode\.n_best=4 must not exceed"):
        decode_settings(beam_size=2, n_best=4)
    assert issubclass(ConfigValueError, UserError)
    assert issubclass(ConfigValueError, ValueError)  # what callers caught before
