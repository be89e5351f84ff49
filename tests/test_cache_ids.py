"""Ids outside the vocabulary never reach the model, and damage that the fast path
trusts is found by ``verify``.

The cache hit compares each file's size, inode and times with the manifest's (hashing
4.5M pairs' files at every start would cost seconds). Bytes changed by a program move
the change time, which nothing sets back, so they are hashed even with the
modification time put back (``rsync -a`` from a damaged source). Bytes changed beneath
the kernel (a disk's silent error) keep every time: out-of-range ids must then end in
one line naming the split, pair and file (the batch check), and ids inside the
vocabulary are found by ``seq2seq-prepare verify=true``, which hashes every file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from seq2seq.config import TokenizerConfig
from seq2seq.data.batching import VocabCheck, collate, make_loader
from seq2seq.data.prepare import prepare_data
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.store import FORMAT_VERSION, MANIFEST, check_store
from seq2seq.errors import CacheError
from tests.helpers import TINY, phrasebook_config, run_script


@pytest.fixture
def prepared(tmp_path):
    data = prepare_data(phrasebook_config(200, 20, 20), TokenizerConfig(100), tmp_path)
    return data


def flip(path: Path, value: int, nbytes: int = 4096, at: int = 0) -> None:
    """Overwrite ``nbytes`` of the uint16 ids file ``path`` at byte ``at`` with
    ``value``, keeping its size and modification time (as ``rsync -a`` from a damaged
    source would)."""
    stat = path.stat()
    ids = np.fromfile(path, dtype=np.uint16)
    assert ids.nbytes >= at + nbytes, "the split is too small for this test"
    ids[at // 2 : (at + nbytes) // 2] = value
    ids.tofile(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def rot(path: Path, value: int, nbytes: int = 4096) -> None:
    """``flip`` as a disk's silent error would do it: the bytes change and every
    time the manifest recorded stays (here: the manifest is stamped with the file's
    new change time, which a program cannot put back)."""
    flip(path, value, nbytes)
    cache = next(p for p in path.parents if (p / MANIFEST).is_file())
    manifest = json.loads((cache / MANIFEST).read_text())
    record = manifest["files"][str(path.relative_to(cache))]
    record["ctime_ns"] = path.stat().st_ctime_ns
    (cache / MANIFEST).write_text(json.dumps(manifest))


def test_the_manifest_keeps_each_ids_files_largest_id(prepared):
    manifest = json.loads((prepared.cache_dir / "manifest.json").read_text())
    assert manifest["format"] == FORMAT_VERSION == 3
    for split, encoded in prepared.splits.items():
        for side, pieces in (("src", encoded.src_ids), ("tgt", encoded.tgt_ids)):
            want = max(max(ids) for ids in pieces)
            assert manifest["max_ids"][f"{split}/{side}.ids"] == want
    assert max(manifest["max_ids"].values()) < prepared.tokenizer.src_vocab_size


def test_a_manifest_whose_ids_pass_the_tokenizer_is_rebuilt(prepared, caplog):
    path = prepared.cache_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    size = prepared.tokenizer.tgt_vocab_size
    manifest["max_ids"]["train/tgt.ids"] = size  # one past the last piece
    path.write_text(json.dumps(manifest))
    again = prepare_data(
        phrasebook_config(200, 20, 20), TokenizerConfig(100), path.parent.parent
    )
    assert not again.cached
    said = f"train/tgt.ids holds ids up to {size}, the tokenizer has {size} pieces"
    assert caplog.text.count(said) == 1


def test_an_older_manifest_is_rebuilt_saying_why(prepared, caplog):
    path = prepared.cache_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format"] = 2
    del manifest["max_ids"]
    path.write_text(json.dumps(manifest))
    again = prepare_data(
        phrasebook_config(200, 20, 20), TokenizerConfig(100), path.parent.parent
    )
    assert not again.cached
    assert "format 2, not 3 (format 3 records each ids file's largest id" in caplog.text


def test_bytes_changed_with_their_time_put_back_are_hashed(prepared):
    ids = prepared.cache_dir / "train" / "src.ids"
    flip(ids, 5, nbytes=64)
    manifest, why = check_store(prepared.cache_dir)
    assert manifest is None  # the change time moved: hashed, found
    assert why == f"{ids} differs from the file the manifest recorded"


def test_a_fresh_cache_is_trusted_a_copy_hashed_once(prepared, monkeypatch):
    from seq2seq.data import store

    copy = prepared.cache_dir.with_name("copy")
    shutil.copytree(prepared.cache_dir, copy)  # new inodes, times kept (copy2)
    hashed: list[str] = []
    digest = store._digest
    monkeypatch.setattr(store, "_digest", lambda p: hashed.append(p.name) or digest(p))
    assert check_store(prepared.cache_dir)[0] is not None
    assert hashed == []  # as built: stat calls only
    assert check_store(copy)[0] is not None
    files = json.loads((copy / MANIFEST).read_text())["files"]
    assert len(hashed) == len(files)  # every file, once
    hashed.clear()
    assert check_store(copy)[0] is not None
    assert hashed == []  # its new inodes and times were recorded
    assert check_store(copy, verify=True)[0] is not None
    assert len(hashed) == len(files)


def test_in_range_garbage_beneath_the_kernel_is_trusted_and_found_by_verify(prepared):
    ids = prepared.cache_dir / "train" / "src.ids"
    rot(ids, 5, nbytes=64)
    assert check_store(prepared.cache_dir)[0] is not None  # every stamp agrees
    manifest, why = check_store(prepared.cache_dir, verify=True)
    assert manifest is None
    assert why == f"{ids} differs from the file the manifest recorded"


def test_a_batch_with_an_id_outside_the_vocabulary_names_split_pair_and_file(
    prepared,
):
    train = prepared.splits["train"]
    check = VocabCheck.of(train, "train", prepared.tokenizer)
    assert check.src_file.endswith("train/src.ids")
    examples = [(i, list(train.src_ids[i]), list(train.tgt_ids[i])) for i in range(4)]
    assert check(collate(examples)).src.shape[0] == 4  # a good batch passes
    size = prepared.tokenizer.tgt_vocab_size
    examples[2] = (7, examples[2][1], [*examples[2][2][:-1], size])
    with pytest.raises(CacheError) as info:
        check(collate(examples))
    text = str(info.value)
    assert text.startswith(f"train pair 7: target id {size} is outside the vocabulary")
    assert "train/tgt.ids is damaged; run seq2seq-prepare verify=true" in text


def test_the_loader_checks_each_batch(prepared):
    good = EncodedSplit(["a", "b"], ["c", "d"], [[4, 5], [6]], [[7], [8, 9]])
    bad = EncodedSplit(["a", "b"], ["c", "d"], [[4, 5], [6, 99]], [[7], [8, 9]])
    vocab = VocabCheck("validation", 60, 60)
    assert len(list(make_loader(good, 100, False, 0, vocab=vocab))) == 1
    with pytest.raises(CacheError, match=r"validation pair 1: source id 99 .*'s ids"):
        list(make_loader(bad, 100, False, 0, vocab=vocab))
    unchecked = next(iter(make_loader(bad, 100, False, 0)))
    assert int(unchecked.src.max()) == 99  # without a check the id goes through
    assert torch.equal(next(iter(make_loader(good, 100, False, 0, vocab=vocab))).src,
                       next(iter(make_loader(good, 100, False, 0))).src)  # fmt: skip


@pytest.mark.slow
def test_the_issues_case_flipped_ids_with_their_time_put_back(tmp_path):
    """4 KB of ``train/src.ids`` out of range, time put back: ``seq2seq-prepare``
    hashes the file and rebuilds. The same bytes changed beneath the kernel (every
    time kept) are loaded by the fast path, and ``seq2seq-train`` stops in one line
    naming the file (exit 2, no traceback); in-range garbage is found by
    ``verify=true``."""
    args = [*TINY, f"data.cache_dir={tmp_path / 'cache'}"]
    first = run_script(tmp_path, "seq2seq-prepare", *args, "hydra.run.dir=p1")
    assert "prepared and cached" in first.stdout
    (folder,) = (tmp_path / "cache").glob("phrasebook-*")
    ids = folder / "train" / "src.ids"
    flip(ids, 0xFFFF)
    moved = run_script(tmp_path, "seq2seq-prepare", *args, "hydra.run.dir=p1b")
    assert f"rebuilding the prepared cache: {ids} differs" in moved.stderr
    assert "prepared and cached" in moved.stdout
    rot(ids, 0xFFFF)
    hit = run_script(tmp_path, "seq2seq-prepare", *args, "hydra.run.dir=p2")
    assert "loaded from the cache" in hit.stdout
    train = run_script(
        tmp_path,
        "seq2seq-train",
        *args,
        "trainer.max_steps=2",
        "hydra.run.dir=t1",
        check=False,
    )
    report = f"exit {train.returncode}\n{train.stdout}\n{train.stderr}"
    assert train.returncode == 2, report
    assert "Traceback" not in train.stderr and "IndexError" not in train.stderr, report
    (line,) = [x for x in train.stderr.splitlines() if "seq2seq-train: error:" in x]
    assert "train pair " in line and "source id 65535 is outside the vocabulary" in line
    assert f"the ids file {ids} is damaged" in line
    assert "seq2seq-prepare verify=true" in line

    rot(ids, 5)  # inside the vocabulary: only a hash finds it
    hit = run_script(tmp_path, "seq2seq-prepare", *args, "hydra.run.dir=p3")
    assert "loaded from the cache" in hit.stdout
    checked = run_script(
        tmp_path, "seq2seq-prepare", *args, "verify=true", "hydra.run.dir=p4"
    )
    assert f"rebuilding the prepared cache: {ids} differs" in checked.stderr
    assert checked.stderr.count("rebuilding the prepared cache") == 1  # said once
    assert "prepared and cached" in checked.stdout
    again = run_script(
        tmp_path, "seq2seq-prepare", *args, "verify=true", "hydra.run.dir=p5"
    )
    assert "verified (every file's SHA-256 as the manifest records)" in again.stdout
