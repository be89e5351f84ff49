"""Every config group and experiment composes, validates against the schemas and
passes the value checks of its command."""

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from seq2seq.config import CONFIG_DIR, register_configs
from tests.conftest import check_command

register_configs()


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def _compose(name: str, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


@pytest.mark.parametrize("app", ["prepare", "train"])
def test_primary_configs_compose(app):
    cfg = _compose(app, [])
    assert cfg.data.name == "phrasebook"
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    check_command(app, cfg)


@pytest.mark.parametrize("app", ["evaluate", "translate", "distill", "align", "serve"])
def test_checkpoint_apps_compose(app, tmp_path):
    ckpt = tmp_path / "x.pt"
    ckpt.touch()
    overrides = [f"checkpoint={ckpt}"] + (["text=a b"] if app == "align" else [])
    overrides += [f"output={tmp_path / 'out'}"] if app == "distill" else []
    cfg = _compose(app, overrides)
    assert cfg.checkpoint == str(ckpt)
    check_command(app, cfg)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("port=70000", "port=70000: must be in [0, 65535]"),
        ("timeout_s=0", "timeout_s=0.0: must be > 0"),
        ("max_texts=0", "max_texts=0: must be at least 1"),
        ("max_wait_ms=-1", "max_wait_ms=-1.0: must be >= 0"),
    ],
)
def test_serve_refuses_settings_out_of_range(override, message, tmp_path):
    from seq2seq.errors import ConfigValueError

    ckpt = tmp_path / "x.pt"
    ckpt.touch()
    cfg = _compose("serve", [f"checkpoint={ckpt}", override])
    with pytest.raises(ConfigValueError, match=re.escape(message)):
        check_command("serve", cfg)


@pytest.mark.parametrize(
    "group,option",
    [
        (group, option)
        for group in [
            "data",
            "tokenizer",
            "model",
            "optim",
            "scheduler",
            "trainer",
            "decode",
        ]
        for option in _options(group)
    ]
    + [("model/attention", option) for option in _options("model/attention")],
)
def test_every_group_option_composes(group, option):
    overrides = [f"{group}={option}"]
    if option == "local":
        overrides += ["data.local_dir=/tmp", "data.src_lang=de", "data.tgt_lang=en"]
    cfg = _compose("train", overrides)
    OmegaConf.to_container(cfg, resolve=True)
    check_command("train", cfg)
    if group == "model/attention":
        assert cfg.model.attention.type == option


@pytest.mark.parametrize("experiment", _options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = _compose("train", [f"experiment={experiment}"])
    OmegaConf.to_container(cfg, resolve=True)
    check_command("train", cfg)


def test_experiment_sets_language_pair():
    cfg = _compose("train", ["experiment=multi30k_en_fr"])
    assert (cfg.data.name, cfg.data.src_lang, cfg.data.tgt_lang) == (
        "multi30k",
        "en",
        "fr",
    )


@pytest.mark.parametrize(
    "override",
    ["trainer.max_epoch=3", "model.encoder.hiden_size=3", "data.batch_tokens=many"],
)
def test_typo_or_bad_type_in_override_fails(override):
    with pytest.raises(ConfigCompositionException):
        _compose("train", [override])


def test_compile_mode_names_torchs_modes():
    assert str(_compose("train", []).trainer.compile_mode) == "default"
    cfg = _compose("train", ["trainer.compile_mode=reduce-overhead"])
    assert str(cfg.trainer.compile_mode) == "reduce-overhead"
    with pytest.raises(ConfigCompositionException, match="compile_mode"):
        _compose("train", ["trainer.compile_mode=max-autotune"])


def test_unknown_group_option_fails():
    with pytest.raises(ConfigCompositionException, match="luong_dott"):
        _compose("train", ["model/attention=luong_dott"])


def test_config_dir_is_the_repositorys():
    assert Path(__file__).resolve().parent.parent / "configs" == CONFIG_DIR


def test_evaluate_adds_a_gold_links_file_to_the_checkpoint_corpus(
    tmp_path, monkeypatch
):
    """seq2seq-evaluate data.alignments.test=FILE: AER on a corpus the checkpoint was
    trained without links for, even from a checkpoint saved before the field."""
    from seq2seq.cli.checks import corpus_settings
    from seq2seq.config import DataConfig

    monkeypatch.chdir(tmp_path)
    Path("gold.txt").write_text("0-0\n")  # the settings' check wants the file
    cfg = _compose("evaluate", ["checkpoint=x.pt", "data.alignments.test=gold.txt"])
    fields = OmegaConf.to_container(
        OmegaConf.structured(DataConfig()), enum_to_str=True
    )
    saved = OmegaConf.create({k: v for k, v in fields.items() if k != "alignments"})
    data = corpus_settings(saved, cfg.data)
    assert data.alignments.test == "gold.txt" and data.name == "phrasebook"
    assert "alignments" not in corpus_settings(
        saved, _compose("evaluate", ["checkpoint=x.pt"]).data
    )
