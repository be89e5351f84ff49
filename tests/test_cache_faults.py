"""The prepared cache under faults, through the real ``seq2seq-prepare``: two
processes preparing one cache, a kill -9 in the middle of a build, and a cache file
truncated, replaced or garbled. Each ends in a complete cache, equal byte for byte to
an uninterrupted build, and nothing half-written is ever read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import run_script

pytestmark = pytest.mark.slow


def prepare_args(multi30k_dir: Path, cache: Path) -> list[str]:
    return [
        "data=multi30k",
        f"data.local_dir={multi30k_dir}",
        f"data.cache_dir={cache}",
        "tokenizer.vocab_size=1000",
        f"hydra.run.dir={cache.parent / 'run'}",
    ]


def folders(cache: Path) -> list[Path]:
    return [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")]


def checksums(folder: Path) -> dict[str, str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return {name: f["sha256"] for name, f in manifest["files"].items()}


@pytest.fixture(scope="module")
def reference(multi30k_dir, tmp_path_factory) -> dict[str, str]:
    """The files of an uninterrupted build."""
    cache = tmp_path_factory.mktemp("reference") / "cache"
    run_script(cache.parent, "seq2seq-prepare", *prepare_args(multi30k_dir, cache))
    (folder,) = folders(cache)
    return checksums(folder)


def test_two_processes_preparing_one_cache_both_succeed(
    multi30k_dir, tmp_path, reference
):
    cache = tmp_path / "cache"
    command = [str(Path(sys.executable).parent / "seq2seq-prepare")]
    procs = [
        subprocess.Popen(
            [*command, *prepare_args(multi30k_dir, cache)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    logs = [out + err for out, err in outputs]
    assert sum("waiting for" in log for log in logs) == 1  # one built, one waited
    assert all("pairs" in out and "29000" in out for out, _ in outputs)
    (folder,) = folders(cache)
    assert checksums(folder) == reference
    assert not list(cache.glob(".building-*"))


def test_kill_9_while_preparing_then_the_next_run_rebuilds(
    multi30k_dir, tmp_path, reference
):
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "seq2seq-prepare"),
            *prepare_args(multi30k_dir, cache),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not list(cache.glob(".building-*/tokenizer")):  # mid-build: pieces trained
        assert proc.poll() is None, "the build ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not folders(cache)  # nothing that looks prepared
    result = run_script(tmp_path, "seq2seq-prepare", *prepare_args(multi30k_dir, cache))
    assert "(cached)" not in result.stdout
    (folder,) = folders(cache)
    assert checksums(folder) == reference
    assert not list(cache.glob(".building-*"))  # the killed build's leftovers went


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", r"train/src\.ids has \d+ bytes, the manifest \d+"),
        ("replace", r"validation/rows\.npy differs from the file the manifest"),
        ("garble", r"manifest\.json is unreadable"),
    ],
)
def test_a_damaged_cache_is_named_and_rebuilt(
    multi30k_dir, tmp_path, reference, damage, message
):
    cache = tmp_path / "cache"
    args = prepare_args(multi30k_dir, cache)
    run_script(tmp_path, "seq2seq-prepare", *args)
    (folder,) = folders(cache)
    if damage == "truncate":
        path = folder / "train" / "src.ids"
        path.write_bytes(path.read_bytes()[:-10])
    elif damage == "replace":  # same size, other bytes: a foreign file
        path = folder / "validation" / "rows.npy"
        data = bytearray(path.read_bytes())
        data[-8:] = b"\xff" * 8
        path.write_bytes(bytes(data))
    else:
        (folder / "manifest.json").write_text("{")
    result = run_script(tmp_path, "seq2seq-prepare", *args)
    import re

    assert re.search(message, result.stderr), result.stderr
    assert "rebuilding the prepared cache" in result.stderr
    assert "(cached)" not in result.stdout
    assert checksums(folder) == reference
    again = run_script(tmp_path, "seq2seq-prepare", *args)
    assert "(cached)" in again.stdout
