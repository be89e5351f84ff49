"""End to end through the console scripts: train → evaluate → translate → align."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from seq2seq.cli import evaluate, translate
from seq2seq.config import EvaluateConfig, TranslateConfig
from seq2seq.decoding.translator import Translator
from tests.helpers import TINY, outside_urls, run_script

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("cli")
    run_dir = tmp / "run"
    proc = run_script(
        tmp,
        "seq2seq-train",
        *TINY,
        f"data.cache_dir={tmp / 'cache'}",
        "trainer.max_epochs=5",  # ~35 steps: a model that writes something
        "trainer.max_steps=40",
        f"hydra.run.dir={run_dir}",
    )
    assert "test: BLEU" in proc.stdout
    assert "tensorboard --logdir" in proc.stdout
    assert (run_dir / "alignments" / "valid_0.png").is_file()
    assert (run_dir / "hyps" / "test.txt").is_file()
    # Nothing lands in the working directory: only the cache and run dir we named.
    assert sorted(p.name for p in tmp.iterdir()) == ["cache", "run"]
    best = run_dir / "checkpoints" / "best.pt"
    # the output limit fitted on the training pairs travels with the checkpoint
    assert isinstance(Translator.from_checkpoint(best).decode.max_len_a, float)
    return tmp, best


def test_evaluate_prints_scores_with_signatures(trained):
    tmp, ckpt = trained
    proc = run_script(
        tmp,
        "seq2seq-evaluate",
        f"checkpoint={ckpt}",
        "split=validation",
        "beam_size=3",
        "stop=best",
        "lowercase=true",
        f"hydra.run.dir={tmp / 'eval'}",
    )
    assert "BLEU" in proc.stdout and "chrF" in proc.stdout
    assert "nrefs:1" in proc.stdout  # sacreBLEU signature
    hyps = (tmp / "eval" / "hyps" / "validation.txt").read_text().splitlines()
    assert len(hyps) == 40


def test_evaluate_and_translate_decode_under_the_requested_precision(
    trained, tmp_path, monkeypatch
):
    """``precision=bf16`` reaches the search's autocast; ``auto`` is fp32 on CPU."""
    _, ckpt = trained
    seen = []
    real = Translator.search

    def spy(translator, split, *args, **kwargs):
        seen.append(translator.amp_dtype)
        return real(translator, split, *args, **kwargs)

    monkeypatch.setattr(Translator, "search", spy)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # bf16 sets oneDNN caps
    for precision in ("bf16", "auto"):
        cfg = OmegaConf.structured(
            EvaluateConfig(
                checkpoint=str(ckpt),
                split="validation",
                beam_size=2,
                precision=precision,
                device="cpu",
            )
        )
        evaluate.evaluate_checkpoint(cfg, tmp_path / precision)
        hyps = (tmp_path / precision / "hyps" / "validation.txt").read_text()
        assert len(hyps.splitlines()) == 40
    source = tmp_path / "in.txt"
    source.write_text("I love you\n")
    cfg = OmegaConf.structured(
        TranslateConfig(
            checkpoint=str(ckpt),
            input=str(source),
            output=str(tmp_path / "out.txt"),
            precision="bf16",
            device="cpu",
        )
    )
    assert len(translate.translate_file(cfg)) == 1
    assert seen == [torch.bfloat16, None, torch.bfloat16]
    with pytest.raises(ValueError, match="fp16 autocast needs CUDA"):
        cfg.precision = "fp16"
        translate.translate_file(cfg)


def test_evaluate_on_another_corpus(trained, tmp_path):
    tmp, ckpt = trained
    (tmp_path / "test.jsonl").write_text(
        "\n".join(
            json.dumps({"en": s, "fr": t})
            for s, t in [
                ("the blue notebook", "le carnet bleu"),
                ("I love you", "je t'aime"),
            ]
        )
        + "\n"
    )
    for split in ("train", "validation"):
        (tmp_path / f"{split}.jsonl").write_text((tmp_path / "test.jsonl").read_text())
    proc = run_script(
        tmp,
        "seq2seq-evaluate",
        f"checkpoint={ckpt}",
        "+data.name=local",
        f"+data.local_dir={tmp_path}",
        f"hydra.run.dir={tmp / 'eval2'}",
    )
    assert "(2 sentences" in proc.stdout


def test_translate_keeps_empty_lines_and_truncates_long_ones(trained):
    tmp, ckpt = trained
    last = ckpt.parent / "last.pt"  # best.pt of so short a run may write nothing
    long_line = " ".join(["the blue notebook"] * 60)
    proc = run_script(
        tmp,
        "seq2seq-translate",
        f"checkpoint={last}",
        "max_input_pieces=20",
        f"hydra.run.dir={tmp / 'tr'}",
        stdin=f"I love you\n\nthe small blue chairs\n{long_line}\n",
    )
    lines = proc.stdout.split("\n")
    assert len(lines) == 5 and lines[-1] == ""
    assert lines[1] == ""
    assert "translating only the first 20" in proc.stderr
    # Each output stays on its input's line: the same inputs in the other order.
    assert lines[0] != lines[2], "the check below needs two different outputs"
    swapped = run_script(
        tmp,
        "seq2seq-translate",
        f"checkpoint={last}",
        f"hydra.run.dir={tmp / 'tr2'}",
        stdin="the small blue chairs\nI love you\n",
    )
    assert swapped.stdout.split("\n") == [lines[2], lines[0], ""]


@pytest.mark.parametrize("fmt", ["png", "html", "terminal", "pharaoh", "json", "npy"])
def test_align_every_format(trained, fmt):
    tmp, ckpt = trained
    out_dir = tmp / f"align_{fmt}"
    proc = run_script(
        tmp,
        "seq2seq-align",
        f"checkpoint={ckpt}",
        "text=the small blue chairs",
        f"format={fmt}",
        f"hydra.run.dir={out_dir}",
    )
    assert "not a causal explanation" in proc.stdout
    if fmt == "png":
        assert (out_dir / "alignments" / "alignment_0.png").stat().st_size > 1000
    elif fmt == "html":
        page = (out_dir / "alignments.html").read_text()
        assert "chair" in page and outside_urls(page) == []
    elif fmt == "terminal":
        assert "chair" in proc.stdout
    elif fmt == "pharaoh":
        links = (out_dir / "alignments.txt").read_text().split()
        assert links and all("-" in link for link in links)
    elif fmt == "json":
        record = json.loads((out_dir / "alignments.json").read_text())[0]
        weights = np.array(record["weights"])
        assert weights.shape == (len(record["tgt_tokens"]), len(record["src_tokens"]))
        np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)
    else:
        assert np.load(out_dir / "alignments" / "alignment_0.npy").ndim == 2


def test_align_from_split_with_reference_and_merged_words(trained):
    tmp, ckpt = trained
    proc = run_script(
        tmp,
        "seq2seq-align",
        f"checkpoint={ckpt}",
        "text=the blue notebook",
        "reference=le carnet bleu",
        "merge_subwords=true",
        "format=terminal",
        "scale=log",
        f"hydra.run.dir={tmp / 'align_ref'}",
    )
    assert "carnet" in proc.stdout and "(log scale)" in proc.stdout
    run_script(
        tmp,
        "seq2seq-align",
        f"checkpoint={ckpt}",
        "split=validation",
        "index=[0,3]",
        "format=png",
        f"hydra.run.dir={tmp / 'align_split'}",
    )
    assert (tmp / "align_split" / "alignments" / "alignment_1.png").is_file()


def test_multirun_sweep_runs_one_job_per_value(tmp_path):
    run_script(
        tmp_path,
        "seq2seq-train",
        "-m",
        *TINY,
        f"data.cache_dir={tmp_path / 'cache'}",
        "trainer.max_steps=3",
        "trainer.alignment_samples=1",
        "model/attention=luong_dot,luong_concat",
        "model.decoder.hidden_size=64",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )
    for job in ("0", "1"):
        assert (tmp_path / "sweep" / job / "checkpoints" / "best.pt").is_file()
