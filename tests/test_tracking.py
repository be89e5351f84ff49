import io

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import (
    IMAGES,
    SCALARS,
    TENSORS,
    EventAccumulator,
)
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from seq2seq.alignment.render import plot_alignment
from seq2seq.training.tracking import Tracker, progress_bar


def read(log_dir) -> EventAccumulator:
    acc = EventAccumulator(
        str(log_dir), size_guidance={SCALARS: 0, IMAGES: 0, TENSORS: 0}
    )
    acc.Reload()
    return acc


def test_tracker_writes_what_tensorboard_reads(tmp_path):
    log_dir = tmp_path / "tb"
    fig = plot_alignment(np.eye(3), ["a", "b", "c"], ["x", "y", "z"])
    with Tracker(log_dir) as tracker:
        for step in (1, 2, 3):
            tracker.scalars({"train/loss": 4.0 / step, "train/lr": 1e-3}, step)
        tracker.figure("alignment/0", fig, 10)
        tracker.text("valid/samples", "**hyp**: a house", 10)
        tracker.config("model:\n  emb_dim: 256\n")
        tracker.hparams(
            {"optim": {"lr": 1e-3, "betas": [0.9, 0.99]}, "attention": "bahdanau"},
            {"hparam/best_bleu": 21.5},
        )
        tracker.flush()
    acc = read(log_dir)
    tags = acc.Tags()
    assert {"train/loss", "train/lr", "hparam/best_bleu"} <= set(tags["scalars"])
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [1, 2, 3]
    assert loss[-1].value == pytest.approx(4.0 / 3)
    assert acc.Scalars("hparam/best_bleu")[0].value == pytest.approx(21.5)
    assert tags["images"] == ["alignment/0"]
    (event,) = acc.Images("alignment/0")
    assert event.step == 10
    with Image.open(io.BytesIO(event.encoded_image_string)) as img:
        assert img.size == (event.width, event.height) and img.width > 100
    assert {"valid/samples/text_summary", "config/resolved/text_summary"} <= set(
        tags["tensors"]
    )
    text = acc.Tensors("valid/samples/text_summary")[0]
    assert text.step == 10 and b"a house" in text.tensor_proto.string_val[0]
    content = acc.PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    logged = start.session_start_info.hparams
    assert logged["optim.lr"].number_value == pytest.approx(1e-3)
    assert logged["optim.betas"].string_value == "[0.9, 0.99]"
    assert logged["attention"].string_value == "bahdanau"


def test_disabled_tracker_is_a_noop(tmp_path):
    log_dir = tmp_path / "tb"
    tracker = Tracker(log_dir, enabled=False)
    fig = plot_alignment(np.eye(2), ["a", "b"], ["x", "y"])
    tracker.scalars({"train/loss": 1.0}, 1)
    tracker.figure("alignment/0", fig, 1)
    tracker.text("t", "x", 1)
    tracker.config("a: 1")
    tracker.hparams({"lr": 1.0}, {"m": 1.0})
    tracker.flush()
    tracker.close()
    assert not log_dir.exists()
    assert not fig.axes  # closed (cleared) even when not logged


def test_progress_bar(capsys):
    with progress_bar(3, enabled=True, desc="train") as bar:
        bar.update()
        bar.set_postfix(loss=3.14159, lr=1e-3, tok_s=12345.0, epoch=1)
        assert bar.postfix == "loss=3.142, lr=1.0e-03, tok/s=12.3k, epoch=1"
        bar.update(2)
    assert "train" in capsys.readouterr().err
    off = progress_bar(3, enabled=False)
    off.update()
    off.set_postfix(loss=1.0)
    off.close()
    assert off.bar is None


def test_progress_bar_keeps_preformatted_strings():
    with progress_bar(2, desc="x") as bar:
        bar.set_postfix(loss="3.000", lr=2e-4, tok_s=950)
        assert bar.postfix == "loss=3.000, lr=2.0e-04, tok/s=950"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_off_a_terminal_writes_plain_lines():
    """``nohup ... > log``: a line per logging step and one at the end, no ``\\r``
    redraws; a terminal gets tqdm's bar."""
    log = io.StringIO()
    with progress_bar(100, desc="epoch 1", stream=log) as bar:
        for step in range(1, 101):
            bar.update()
            if step % 50 == 0:
                bar.set_postfix(loss=2.5, lr=1e-3, tok_s=1500.0)
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == [
        "epoch 1: 50/100 steps | loss=2.500, lr=1.0e-03, tok/s=1.5k",
        "epoch 1: 100/100 steps | loss=2.500, lr=1.0e-03, tok/s=1.5k",
    ]
    terminal = _Terminal()
    with progress_bar(3, desc="epoch 1", stream=terminal) as bar:
        bar.update(3)
    assert bar.bar is None and "\r" in terminal.getvalue()
    quiet = io.StringIO()
    with progress_bar(7, desc="epoch 2", stream=quiet) as bar:
        bar.update(7)
    assert quiet.getvalue() == "epoch 2: 7/7 steps\n"
