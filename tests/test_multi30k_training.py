"""A short Multi30k de→en run on a slice: validation loss falls and BLEU is non-zero."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers import build_trainer, tiny_train_config

pytestmark = pytest.mark.slow

SLICE = {"train": 4000, "validation": 100, "test": 100}


def _slice(multi30k_dir: Path, out: Path) -> Path:
    """The first pairs of each split, written to ``out`` (a temporary folder)."""
    out.mkdir()
    for split, n in SLICE.items():
        with open(multi30k_dir / f"{split}.jsonl", encoding="utf-8") as f:
            (out / f"{split}.jsonl").write_text("".join(islice(f, n)), encoding="utf-8")
    return out


def test_short_multi30k_run_learns(multi30k_dir, tmp_path):
    corpus = _slice(multi30k_dir, tmp_path / "multi30k")
    cfg = tiny_train_config(
        tmp_path / "cache",
        "data=multi30k",
        f"data.local_dir={corpus}",
        "data.src_lang=de",
        "data.tgt_lang=en",
        "data.batch_tokens=2000",
        "tokenizer.vocab_size=2000",
        "model.emb_dim=64",
        "model.encoder.hidden_size=64",
        "model.decoder.hidden_size=128",
        "trainer.max_steps=160",
        "trainer.max_epochs=20",
        "trainer.valid_every=null",
        "trainer.valid_max_sentences=100",
        "trainer.threads=2",
        "optim.lr=0.003",
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    assert len(trainer.data.splits["train"]) == SLICE["train"]
    result = trainer.fit()
    history = result.progress.history
    epoch = len(trainer.sampler)  # validations at every epoch end and at the last step
    expected = [*range(epoch, 160, epoch), 160]
    assert len(expected) >= 3 and [h["step"] for h in history] == expected
    assert history[-1]["loss"] < history[0]["loss"] - 0.5
    assert history[-1]["bleu"] > 0.0
    acc = EventAccumulator(str(tmp_path / "run" / "tb"))
    acc.Reload()
    assert len(acc.Scalars("valid/bleu")) == len(history)
