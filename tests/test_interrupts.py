"""Decoding commands stopped by SIGINT or SIGTERM mid-run: one line saying what was
written, exit status 130 or 143, and no partial output file.

Each command runs its real entry point in its own process through
``tests/pause_driver.py``, which pauses at a chosen call (the decoding, the fsync of
an output file, the second picture) so the signal lands mid-run every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import build_trainer, tiny_train_config

pytestmark = pytest.mark.slow

DRIVER = str(Path(__file__).with_name("pause_driver.py"))
DECODING = "seq2seq.decoding.translator:Translator.search"  # every decoding command


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("interrupts")
    cfg = tiny_train_config(tmp / "cache", "trainer.max_steps=2")
    build_trainer(cfg, tmp / "run").fit()
    return tmp / "run" / "checkpoints" / "last.pt"


def interrupt(
    tmp: Path, pause: str, n: int, script: str, *args: str, sig: int
) -> tuple[int, list[str]]:
    """Run ``script``, signal it once it pauses; its exit status and stderr lines."""
    proc = subprocess.Popen(
        [sys.executable, DRIVER, pause, str(n), script, *args],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        # as from a terminal: a shell's background job (CI under `&`) ignores SIGINT,
        # and Python raises KeyboardInterrupt only where SIGINT starts at its default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = []
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))
        if line.startswith("PAUSED"):
            break
    else:
        proc.wait()
        pytest.fail(f"never paused (exit {proc.returncode}):\n" + "\n".join(lines))
    proc.send_signal(sig)
    _, rest = proc.communicate(timeout=120)
    return proc.returncode, lines + rest.splitlines()


def said(lines: list[str], script: str) -> str:
    report = "\n".join(lines)
    assert not any("Traceback" in x for x in lines), report
    ours = [x for x in lines if x.startswith(f"{script}: ")]
    assert len(ours) == 1, report
    return ours[0]


def no_temporary_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*.tmp")], list(folder.rglob("*.tmp"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_an_interrupted_evaluation_says_nothing_was_written(checkpoint, tmp_path, sig):
    run = tmp_path / "run"
    status, lines = interrupt(
        tmp_path,
        DECODING,
        1,
        "seq2seq-evaluate",
        f"checkpoint={checkpoint}",
        "split=test",
        f"hydra.run.dir={run}",
        sig=sig,
    )
    assert status == 128 + sig
    line = said(lines, "seq2seq-evaluate")
    assert line == "seq2seq-evaluate: interrupted: nothing written"
    assert not (run / "hyps").exists()
    no_temporary_files(tmp_path)


def test_a_translation_interrupted_while_its_file_is_written_leaves_none(
    checkpoint, tmp_path
):
    """Paused at the fsync of the output's temporary file: written but not renamed."""
    source = tmp_path / "input.txt"
    source.write_text("".join(f"hello friend number {i}\n" for i in range(2000)))
    out = tmp_path / "out" / "translations.txt"
    status, lines = interrupt(
        tmp_path,
        "os:fsync",
        1,
        "seq2seq-translate",
        f"checkpoint={checkpoint}",
        f"input={source}",
        f"output={out}",
        f"hydra.run.dir={tmp_path / 'run'}",
        sig=signal.SIGTERM,
    )
    assert status == 143
    assert said(lines, "seq2seq-translate") == (
        "seq2seq-translate: interrupted: nothing written"
    )
    assert not out.exists()
    no_temporary_files(tmp_path)


def test_an_interrupted_translation_while_decoding(checkpoint, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("hello\ngood morning\n")
    out = tmp_path / "translations.txt"
    status, lines = interrupt(
        tmp_path,
        DECODING,
        1,
        "seq2seq-translate",
        f"checkpoint={checkpoint}",
        f"input={source}",
        f"output={out}",
        f"hydra.run.dir={tmp_path / 'run'}",
        sig=signal.SIGINT,
    )
    assert status == 130
    assert said(lines, "seq2seq-translate").endswith("interrupted: nothing written")
    assert not out.exists()


def test_an_interrupted_alignment_names_the_pictures_it_finished(checkpoint, tmp_path):
    folder = tmp_path / "pictures"
    status, lines = interrupt(
        tmp_path,
        "seq2seq.alignment.export:figure_to_png",
        2,  # the first picture is written, the second is being drawn
        "seq2seq-align",
        f"checkpoint={checkpoint}",
        "split=test",
        "index=[0,1,2]",
        "format=png",
        f"output={folder}",
        f"hydra.run.dir={tmp_path / 'run'}",
        sig=signal.SIGTERM,
    )
    assert status == 143
    line = said(lines, "seq2seq-align")
    assert line == f"seq2seq-align: interrupted: wrote {folder / 'alignment_0.png'}"
    assert sorted(p.name for p in folder.iterdir()) == ["alignment_0.png"]
    assert (folder / "alignment_0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_temporary_files(tmp_path)
