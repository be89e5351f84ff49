"""seq2seq-average: the mean of a run's kept checkpoints, usable for inference only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from seq2seq.cli.average import main
from seq2seq.data.prepare import prepare_data
from seq2seq.decoding.translator import Translator
from seq2seq.model.checkpoint import (
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    write_average,
)
from seq2seq.training.trainer import Trainer
from tests.helpers import run_keeping_three, tiny_train_config


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> list[Path]:
    """The three checkpoints a short run keeps with trainer.keep_last=3."""
    run = run_keeping_three(tmp_path_factory.mktemp("average"))
    return sorted((run / "checkpoints").glob("step*.pt"))


def test_the_average_is_the_elementwise_mean_and_loads_for_inference(kept, tmp_path):
    assert [p.name for p in kept] == [
        "step00000004.pt",
        "step00000006.pt",
        "step00000008.pt",
    ]
    out = tmp_path / "avg.pt"
    main([*map(str, kept), "-o", str(out)])

    models = [load_checkpoint(p)["model"] for p in kept]
    state = load_checkpoint(out)
    for name, tensor in state["model"].items():
        expected = sum(m[name].double() for m in models) / 3
        torch.testing.assert_close(tensor, expected.float(), msg=name)
    assert any(not torch.equal(models[0][n], models[2][n]) for n in models[0]), (
        "the kept checkpoints must differ, or the test proves nothing"
    )
    assert state["averaged_from"] == [str(p) for p in kept]
    assert state["step"] == 8 and "optimizer" not in state

    loaded = Translator.from_checkpoint(out, device="cpu")
    assert loaded.step == 8
    assert torch.equal(loaded.model.state_dict()[name], tensor)


def test_resuming_from_an_average_is_refused_with_the_way_out(kept, tmp_path):
    out = write_average(kept, tmp_path / "avg.pt")
    cfg = tiny_train_config(tmp_path / "cache")
    data = prepare_data(cfg.data, cfg.tokenizer, Path(cfg.data.cache_dir))
    trainer = Trainer(cfg, tmp_path / "again", data, torch.device("cpu"))
    with pytest.raises(CheckpointError, match=r"last\.pt"):
        trainer.resume(out)


def test_checkpoints_of_other_vocabularies_and_overwriting_an_input_are_refused(
    kept, tmp_path
):
    foreign = load_checkpoint(kept[0])
    foreign["tokenizer"] = {k: v + b"\x00" for k, v in foreign["tokenizer"].items()}
    other = save_checkpoint(tmp_path / "other.pt", foreign)
    with pytest.raises(CheckpointError, match="different tokenizers"):
        write_average([kept[1], other], tmp_path / "avg.pt")
    resized = load_checkpoint(kept[0])
    resized["config"]["model"]["emb_dropout"] = 0.5
    other = save_checkpoint(tmp_path / "resized.pt", resized)
    with pytest.raises(CheckpointError, match="different model configs"):
        write_average([kept[1], other], tmp_path / "avg.pt")
    with pytest.raises(CheckpointError, match="one of the inputs"):
        write_average(kept, kept[0])


def test_the_cli_reports_errors_without_a_traceback(kept, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(kept[0]), str(tmp_path / "missing.pt"), "-o", str(tmp_path / "a.pt")])
    assert exit_info.value.code == 2
    assert "missing.pt does not exist" in capsys.readouterr().err
