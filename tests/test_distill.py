"""Sequence-level distillation: chunked, resumable decoding of a split and the
distilled corpus folder that ``data=local`` reads (``seq2seq-distill``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from seq2seq.data.splits import encode_corpus_split
from seq2seq.decoding.distill import (
    ChunkFolder,
    decode_in_chunks,
    decoding_identity,
    distilled_rows,
)
from seq2seq.decoding.translator import Translator
from tests.helpers import TINY, build_trainer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def teacher(tiny_checkpoint):
    # beam 2: the tiny model's beam of 5 prefers the empty translation
    translator = Translator.from_checkpoint(
        tiny_checkpoint, beam_size=2, device="cpu", precision="fp32"
    )
    split = encode_corpus_split(translator.config.data, translator.tokenizer, "train")
    return translator, split.head(45)


class Killed(Exception):
    pass


def test_a_killed_decoding_resumes_to_the_uninterrupted_output(
    teacher, tiny_checkpoint, tmp_path
):
    translator, split = teacher
    identity = decoding_identity([tiny_checkpoint], split, translator.decode, 10)
    whole = decode_in_chunks(translator, split, ChunkFolder(tmp_path / "a", identity))
    assert len(whole) == 45 and any(whole)
    assert len(list((tmp_path / "a").glob("chunk-*.txt"))) == 5

    calls = []

    class Dies:  # the translator, killed while decoding its third chunk
        def hypotheses(self, part):
            if len(calls) == 2:
                raise Killed
            calls.append(len(part))
            return translator.hypotheses(part)

        def detokenize(self, hyps):
            return translator.detokenize(hyps)

    folder = ChunkFolder(tmp_path / "b", identity)
    with pytest.raises(Killed):
        decode_in_chunks(Dies(), split, folder)
    assert sorted(p.name for p in folder.folder.glob("chunk-*")) == [
        "chunk-00000.txt",
        "chunk-00001.txt",
    ]  # finished chunks kept, no partial one
    resumed_calls = []

    class Counts:
        def hypotheses(self, part):
            resumed_calls.append(len(part))
            return translator.hypotheses(part)

        def detokenize(self, hyps):
            return translator.detokenize(hyps)

    assert decode_in_chunks(Counts(), split, folder) == whole
    assert resumed_calls == [10, 10, 5]  # only the chunks the killed run left


def test_chunks_of_another_checkpoint_are_never_reused(
    teacher, tiny_checkpoint, tmp_path
):
    translator, split = teacher
    changed = tmp_path / "changed.pt"
    shutil.copy(tiny_checkpoint, changed)
    with open(changed, "ab") as handle:
        handle.write(b"\0")
    old = decoding_identity([tiny_checkpoint], split, translator.decode, 10)
    new = decoding_identity([changed], split, translator.decode, 10)
    assert old != new
    assert old != decoding_identity(
        [tiny_checkpoint], split.head(44), translator.decode, 10
    )
    wider = translator.with_decoding(beam_size=4).decode
    assert old != decoding_identity([tiny_checkpoint], split, wider, 10)
    bf16 = decoding_identity(
        [tiny_checkpoint], split, translator.decode, 10, "cpu bf16"
    )
    assert old != bf16

    folder = tmp_path / "chunks"
    assert ChunkFolder(folder, old).open() == []
    (folder / "chunk-00000.txt").write_text("stale\n" * 10)
    assert ChunkFolder(folder, old).open() == [0]  # same identity: kept
    assert ChunkFolder(folder, new).open() == []  # another: deleted
    assert not (folder / "chunk-00000.txt").exists()
    assert json.loads((folder / "manifest.json").read_text()) == new


def test_distilled_rows_replace_or_add():
    from seq2seq.data.splits import EncodedSplit

    split = EncodedSplit(
        ["a", "b", "c"], ["A", "B", "C"], [[1], [2], [3]], [[], [], []]
    )
    assert distilled_rows(split, ["x", "", "z"], "replace") == (["a", "c"], ["x", "z"])
    assert distilled_rows(split, ["x", "", "z"], "add") == (
        ["a", "b", "c", "a", "c"],
        ["A", "B", "C", "x", "z"],
    )


def distill_command(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``seq2seq-distill`` as a module (the console script once installed)."""
    return subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.distill", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_distill_writes_a_corpus_a_student_trains_on(tiny_checkpoint, tmp_path):
    out = tmp_path / "distilled"
    args = [
        f"checkpoint=[{tiny_checkpoint},{tiny_checkpoint}]",  # an ensemble
        f"output={out}",
        "beam_size=2",  # the tiny model's beam of 5 prefers the empty translation
        "device=cpu",
        "precision=fp32",
        "mode=add",
        "chunk_sentences=16",
        "data.phrasebook.train_size=40",
        f"hydra.run.dir={tmp_path / 'log'}",
    ]
    proc = distill_command(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert f"data.local_dir={out}" in proc.stdout
    rows = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert 40 < len(rows) <= 80 and set(rows[0]) == {"en", "fr"}
    assert len(list((out / "chunks").glob("chunk-*.txt"))) == 3
    valid = (out / "validation.jsonl").read_text().splitlines()
    assert len(valid) == 40  # TINY's validation split, unchanged

    again = distill_command(tmp_path, *args)  # every chunk done: nothing decoded
    assert again.returncode == 0 and "resuming: 3 of 3 chunks" in again.stderr

    student = [x for x in TINY if not x.startswith("data")] + [
        "data=local",
        f"data.local_dir={out}",
        "data.src_lang=en",
        "data.tgt_lang=fr",
        "data.batch_tokens=600",
    ]
    cfg = _student_config(tmp_path, student)
    build_trainer(cfg, tmp_path / "student").fit()
    assert (tmp_path / "student" / "checkpoints" / "last.pt").is_file()


def _student_config(tmp_path: Path, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    from seq2seq.config import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(
            config_name="train",
            overrides=[
                *overrides,
                f"data.cache_dir={tmp_path / 'cache'}",
                "trainer.max_steps=2",
                "trainer.valid_every=2",
                "trainer.valid_max_sentences=4",
                "trainer.alignment_samples=0",
                "evaluate_test=false",
            ],
        )


def test_bad_settings_end_in_one_line(tiny_checkpoint, tmp_path):
    proc = distill_command(
        tmp_path,
        f"checkpoint={tiny_checkpoint}",
        f"output={tmp_path / 'd'}",
        "chunk_sentences=0",
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("seq2seq-distill: error: chunk_sentences")
    assert len(proc.stderr.strip().splitlines()) == 1
    missing = distill_command(tmp_path, f"output={tmp_path / 'd'}", "checkpoint=no.pt")
    assert missing.returncode == 2 and "no.pt" in missing.stderr
