"""A write the file system refuses, for each writer: the prepared cache (the Arrow
tables ``datasets`` writes included), a checkpoint, hypotheses, pictures, links.

``tests/full_disk.py`` makes the writes of the chosen files fail with ``ENOSPC``,
``EDQUOT`` or ``EROFS`` once a few bytes are in. Each writer must end in one
``UserError`` naming what it wrote, the path, and the free space there, and leave no
partial file behind (no temporary file, no half-built cache).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from seq2seq.alignment.export import write_npy, write_png
from seq2seq.alignment.maps import AttentionMap
from seq2seq.cli.app import describe, is_user_error
from seq2seq.config import DataConfig, TokenizerConfig
from seq2seq.data.prepare import prepare_data
from seq2seq.data.splits import write_lines
from seq2seq.disk import REFUSALS, WriteRefused, refused_error, written
from seq2seq.errors import UserError
from seq2seq.model.checkpoint import CheckpointError, save_checkpoint
from tests.full_disk import simulate_full_disk
from tests.helpers import phrasebook_config

CODES = [errno.ENOSPC, errno.EDQUOT, errno.EROFS]
NAMES = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EROFS: "EROFS"}


def said(err: BaseException, code: int, *needles: str) -> str:
    """One line: the reason, the free space (on a disk that is full or over quota),
    each needle; a user error at the command boundary."""
    text = describe(err)
    assert is_user_error(err)
    assert "\n" not in text
    assert text.startswith(REFUSALS[code]), text
    if code == errno.EROFS:  # no room would help: neither the space nor "free some"
        assert "free" not in text, text
    else:
        assert " free there" in text and ": free some space, or " in text, text
    for needle in needles:
        assert needle in text, text
    return text


def no_partial_files(folder: Path) -> None:
    left = [p for p in folder.rglob("*") if p.name.endswith(".tmp")]
    left += list(folder.rglob(".building-*"))
    assert not left, left


def local_corpus(folder: Path) -> DataConfig:
    folder.mkdir()
    for split, n in (("train", 60), ("validation", 5), ("test", 5)):
        lines = [
            json.dumps({"de": f"ein Haus {i} und {i % 7}", "en": f"a house {i} and"})
            for i in range(n)
        ]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return DataConfig(name="local", local_dir=str(folder), src_lang="de", tgt_lang="en")


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
@pytest.mark.parametrize(
    "files",
    [
        r"\.arrow$",  # datasets' Arrow tables, the issue's case
        r"/src\.ids$",  # the encoded ids
        r"manifest\.json\.\d+\.tmp$",  # the manifest, written last
    ],
    ids=["datasets Arrow", "ids", "manifest"],
)
def test_a_refused_cache_write_names_the_disk_not_the_corpus(
    tmp_path, monkeypatch, code, files
):
    cfg = local_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    simulate_full_disk(monkeypatch, limit=64, pattern=files, code=code)
    with pytest.raises(WriteRefused) as info:
        prepare_data(cfg, TokenizerConfig(vocab_size=40), cache)
    text = said(info.value, code, str(cache), "the prepared cache", "data.cache_dir")
    assert "could not be read" not in text and "train.jsonl" not in text
    assert info.value.errno == code
    no_partial_files(cache)
    monkeypatch.undo()
    assert not prepare_data(cfg, TokenizerConfig(vocab_size=40), cache).cached


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
def test_a_refused_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch, code):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"model": {"w": torch.ones(2)}})
    simulate_full_disk(monkeypatch, code=code)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(path, {"model": {"w": torch.zeros(1000)}})
    said(info.value, code, "checkpoint", str(path), "the previous one is unchanged")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["last.pt"]


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
def test_refused_hypotheses_leave_no_file(tmp_path, monkeypatch, code):
    path = tmp_path / "hyps" / "test.txt"
    simulate_full_disk(monkeypatch, limit=100, pattern=r"test\.txt", code=code)
    with pytest.raises(WriteRefused) as info:
        write_lines(path, [f"a sentence {i}" for i in range(100)])
    said(info.value, code, "hypotheses", str(path), "hydra.run.dir")
    no_partial_files(tmp_path)
    assert not path.exists()


def attention_maps(n: int) -> list[AttentionMap]:
    rng = np.random.default_rng(0)
    return [
        AttentionMap(
            ["a", "b", "</s>"], ["x", "</s>"], rng.dirichlet(np.ones(3), size=2)
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
@pytest.mark.parametrize("writer", ["png", "npy"])
def test_refused_pictures_leave_only_complete_files(
    tmp_path, monkeypatch, code, writer
):
    folder = tmp_path / "alignments"
    pattern = r"alignment_1\.(png|npy)"  # the second of three files
    simulate_full_disk(monkeypatch, limit=100, pattern=pattern, code=code)
    write = write_png if writer == "png" else write_npy
    with pytest.raises(WriteRefused) as info:
        write(attention_maps(3), folder)
    said(info.value, code, f"alignment_1.{writer}")
    no_partial_files(tmp_path)
    monkeypatch.undo()
    assert sorted(p.name for p in folder.iterdir()) == [f"alignment_0.{writer}"]
    if writer == "npy":
        assert np.load(folder / "alignment_0.npy").shape == (2, 3)


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
def test_refused_links_leave_no_file(tmp_path, monkeypatch, code):
    from seq2seq.alignment.pipeline import emit

    path = tmp_path / "links.txt"
    cfg = OmegaConf.create({"output": str(path)})
    simulate_full_disk(monkeypatch, limit=10, pattern=r"links\.txt", code=code)
    with pytest.raises(WriteRefused) as info:
        emit(cfg, tmp_path, "alignments.txt", "0-0 1-1 2-2\n" * 10)
    said(info.value, code, "the alignments", str(path), "output=PATH")
    no_partial_files(tmp_path)
    assert not path.exists()


def test_a_raw_refused_write_at_the_boundary_says_where_and_how_much_is_free():
    err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/tmp/some/file")
    text = said(err, errno.ENOSPC, "/tmp/some/file", "hydra.run.dir=DIR")
    assert text.count("free") == 2  # the space there, and "free some space"
    read_only = describe(OSError(errno.EROFS, "Read-only file system", "/x"))
    assert read_only == (
        "read-only file system while writing /x: write elsewhere "
        "(hydra.run.dir=DIR, output=PATH)"
    )


def test_completed_writes_are_listed(tmp_path):
    before = len(written())
    path = write_lines(tmp_path / "a.txt", ["x"])
    assert written()[before:] == [path]
    assert path.read_text() == "x\n"


def test_refused_error_is_a_user_error_and_an_oserror():
    err = refused_error(errno.EDQUOT, "/tmp/x", "hypotheses", "write elsewhere")
    assert isinstance(err, UserError) and isinstance(err, OSError)
    assert err.errno == errno.EDQUOT
    assert str(err).startswith("disk quota exceeded while writing hypotheses /tmp/x (")
    assert str(err).endswith(" free there): free some space, or write elsewhere")


def refuse_mkdir(monkeypatch, code: int) -> None:
    """Every new folder refused, as on a full or read-only file system."""

    def mkdir(self, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "mkdir", mkdir)


@pytest.mark.parametrize("code", CODES, ids=NAMES.get)
def test_a_refused_folder_is_named_for_what_it_holds(tmp_path, monkeypatch, code):
    refuse_mkdir(monkeypatch, code)
    with pytest.raises(WriteRefused) as info:
        write_png(attention_maps(1), tmp_path / "pictures")
    said(info.value, code, f"pictures {tmp_path / 'pictures'}", "output=PATH")
    with pytest.raises(WriteRefused) as info:  # the cache's lock folder, first of all
        prepare_data(phrasebook_config(20, 5, 5), TokenizerConfig(40), tmp_path / "c")
    said(info.value, code, "the prepared cache", "data.cache_dir=DIR")
