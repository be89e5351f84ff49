"""The bad inputs and faults of docs/reliability.md, each through the real command.

A refusal exits with status 2 and one line ``seq2seq-<command>: error: ...`` on
stderr, naming what was wrong and how to fix it, without a traceback, and loses
nothing: the fixture's checkpoints still load and no temporary file is left. A tiny
model is trained once for the module; the refusals then run two or three processes at
a time (each spends most of its second or three importing torch), so the file stays
well under two minutes.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from seq2seq.model.checkpoint import FORMAT, load_checkpoint
from tests.helpers import TINY, run_script

pytestmark = pytest.mark.slow

FULL_DISK = str(Path(__file__).with_name("full_disk.py"))
WORKERS = 3


@dataclass
class Fixture:
    """The trained run every case uses, and where cases put their files."""

    tmp: Path
    run: Path

    @property
    def best(self) -> Path:
        return self.run / "checkpoints" / "best.pt"

    @property
    def last(self) -> Path:
        return self.run / "checkpoints" / "last.pt"

    def file(self, name: str, data: bytes | str) -> Path:
        path = self.tmp / "inputs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def folder(self, name: str, files: dict[str, bytes | str]) -> Path:
        for rel, data in files.items():
            self.file(f"{name}/{rel}", data)
        return self.tmp / "inputs" / name


@dataclass
class Call:
    """One command line: a console script (or ``python FILE script`` for the full
    disk driver), its arguments, standard input and extra environment."""

    script: str
    args: list[str]
    stdin: bytes | str | None = None
    env: dict[str, str] = field(default_factory=dict)
    driver: list[str] = field(default_factory=list)


def execute(fx: Fixture, call: Call, name: str) -> subprocess.CompletedProcess:
    """Run ``call`` in its own run directory; ``driver`` runs it through Python."""
    own = any(arg.startswith("hydra.run.dir=") for arg in call.args)
    out = [] if own else ["hydra.run.dir=" + str(fx.tmp / "runs" / name)]
    if call.script == "seq2seq-average":
        out = []
    if call.driver:
        proc = subprocess.run(
            [sys.executable, *call.driver, call.script, *call.args, *out],
            cwd=fx.tmp,
            capture_output=True,
            text=True,
            env={**os.environ, **call.env},
            timeout=600,
        )
        return proc
    return run_script(
        fx.tmp,
        call.script,
        *call.args,
        *out,
        stdin=call.stdin,
        check=False,
        env=call.env,
    )


def refused(proc: subprocess.CompletedProcess, script: str, *needles: str) -> str:
    """Exit status 2, no traceback, one error line holding every needle."""
    report = f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 2, report
    assert "Traceback" not in proc.stderr, report
    lines = [x for x in proc.stderr.splitlines() if x.startswith(f"{script}: error: ")]
    assert len(lines) == 1, report
    for needle in needles:
        assert needle in lines[0], report
    return lines[0]


def nothing_lost(fx: Fixture) -> None:
    """The fixture's checkpoints still load; no temporary file anywhere."""
    for path in (fx.best, fx.last):
        assert load_checkpoint(path)["format"] == FORMAT
    assert not [p for p in fx.tmp.rglob("*.tmp") if p.is_file()]


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Fixture:
    tmp = tmp_path_factory.mktemp("reliability")
    proc = run_script(
        tmp,
        "seq2seq-train",
        *TINY,
        f"data.cache_dir={tmp / 'cache'}",
        "trainer.max_steps=10",
        f"hydra.run.dir={tmp / 'run'}",
    )
    assert "tokenized period" not in proc.stderr  # sacreBLEU stays quiet
    return Fixture(tmp, tmp / "run")


def _exploit(fx: Fixture) -> Path:
    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {fx.tmp / 'pwned'}",))

    path = fx.tmp / "inputs" / "evil.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": FORMAT, "format_version": 1, "model": Exploit()}, path)
    return path


def _truncated(fx: Fixture) -> Path:
    return fx.file("truncated.pt", fx.best.read_bytes()[:5000])


def _foreign_torch(fx: Fixture) -> Path:
    path = fx.tmp / "inputs" / "weights.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"weight": torch.zeros(2)}, path)
    return path


def _copy_run(fx: Fixture, name: str) -> Path:
    """A copy of the trained run, to resume (and fail) in."""
    copy = fx.tmp / "inputs" / name
    shutil.copytree(fx.run, copy, ignore=shutil.ignore_patterns("tb", ".hydra"))
    return copy


LATIN1_LINE_3 = b"a\nb\ncaf\xe9\n"
EN_FR = '{"en": "the blue notebook", "fr": "le carnet bleu"}\n'  # one jsonl line
LOCAL = ["data.name=local", "data.src_lang=en", "data.tgt_lang=fr"]
TRAIN = [*TINY]
Setup = Callable[[Fixture], Call]


def _evaluate_on(fx: Fixture, name: str, files: dict[str, bytes | str]) -> Call:
    """seq2seq-evaluate on a local corpus folder of these files."""
    folder = fx.folder(name, files)
    args = [f"checkpoint={fx.best}", *LOCAL, f"data.local_dir={folder}"]
    return Call("seq2seq-evaluate", args)


def _parallel(test_en: bytes | str, test_fr: bytes | str) -> dict[str, bytes | str]:
    """Parallel text files, train and validation sound, test as given."""
    files: dict[str, bytes | str] = {}
    for split in ("train", "validation"):
        files |= {f"{split}.en": "the cat\n", f"{split}.fr": "le chat\n"}
    return {**files, "test.en": test_en, "test.fr": test_fr}


# name: (what to run, the command, what its error line must say)
REFUSALS: dict[str, tuple[Setup, str, tuple[str, ...]]] = {
    "typo in a setting": (
        lambda fx: Call("seq2seq-train", ["trainer.max_epoch=3"]),
        "seq2seq-train",
        ("no such setting in TrainerConfig", "did you mean trainer.max_epochs?"),
    ),
    "typo added with +": (
        lambda fx: Call("seq2seq-train", ["+trainer.max_epoch=3"]),
        "seq2seq-train",
        ("trainer.max_epoch", "did you mean trainer.max_epochs?"),
    ),
    "value outside a choice": (
        lambda fx: Call("seq2seq-train", ["decode.stop=bset"]),
        "seq2seq-train",
        ("decode.stop=bset", "expected one of [bound, best]"),
    ),
    "split=tset": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint={fx.best}", "split=tset"]),
        "seq2seq-evaluate",
        ("split=tset", "expected one of [train, validation, test]"),
    ),
    "wrong type": (
        lambda fx: Call("seq2seq-train", ["optim.lr=fast"]),
        "seq2seq-train",
        ("optim.lr=fast", "could not be converted to Float"),
    ),
    "optim.lr=-1": (
        lambda fx: Call("seq2seq-train", ["optim.lr=-1"]),
        "seq2seq-train",
        ("optim.lr=-1.0: must be > 0",),
    ),
    "label smoothing of 1": (
        lambda fx: Call("seq2seq-train", ["trainer.label_smoothing=1"]),
        "seq2seq-train",
        ("trainer.label_smoothing=1.0: must be in [0, 1)",),
    ),
    "dropout above 1": (
        lambda fx: Call("seq2seq-train", ["model.encoder.dropout=1.5"]),
        "seq2seq-train",
        ("model.encoder.dropout=1.5: must be in [0, 1)",),
    ),
    "batch of no tokens": (
        lambda fx: Call("seq2seq-prepare", ["data.batch_tokens=0"]),
        "seq2seq-prepare",
        ("data.batch_tokens=0: must be at least 1",),
    ),
    "n_best above the beam": (
        lambda fx: Call("seq2seq-train", ["decode.n_best=3"]),
        "seq2seq-train",
        ("decode.n_best=3 must not exceed decode.beam_size=1",),
    ),
    "luong_dot between sizes that differ": (
        lambda fx: Call(
            "seq2seq-train",
            ["model/attention=luong_dot", "model.decoder.hidden_size=99"],
        ),
        "seq2seq-train",
        ("luong_dot", "must equal 2 * model.encoder.hidden_size"),
    ),
    "beam_size=0": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint={fx.best}", "beam_size=0"]),
        "seq2seq-evaluate",
        ("beam_size=0: must be at least 1",),
    ),
    "text=''": (
        lambda fx: Call("seq2seq-align", [f"checkpoint={fx.best}", "text="]),
        "seq2seq-align",
        ("text='' is empty",),
    ),
    "neither text nor split": (
        lambda fx: Call("seq2seq-align", [f"checkpoint={fx.best}"]),
        "seq2seq-align",
        ('give text="..." or split=NAME',),
    ),
    "unknown group option": (
        lambda fx: Call("seq2seq-train", ["model/attention=luong_dott"]),
        "seq2seq-train",
        ("Could not find 'model/attention/luong_dott'", "luong_general"),
    ),
    "override without =": (
        lambda fx: Call("seq2seq-train", ["max_epochs"]),
        "seq2seq-train",
        ("cannot parse the override 'max_epochs'", "key=value"),
    ),
    "checkpoint not given": (
        lambda fx: Call("seq2seq-evaluate", []),
        "seq2seq-evaluate",
        ("checkpoint is not set: give checkpoint=",),
    ),
    "phrasebook in another language": (
        lambda fx: Call("seq2seq-prepare", ["data.src_lang=de", "data.tgt_lang=en"]),
        "seq2seq-prepare",
        ("the phrasebook is English–French", "fr→en"),
    ),
    "local corpus without a folder": (
        lambda fx: Call("seq2seq-prepare", ["data=local"]),
        "seq2seq-prepare",
        ("data.name=local needs data.local_dir=DIR",),
    ),
    "data.local_dir not a folder": (
        lambda fx: Call(
            "seq2seq-evaluate",
            [f"checkpoint={fx.best}", *LOCAL, f"data.local_dir={fx.tmp / 'nope'}"],
        ),
        "seq2seq-evaluate",
        ("data.local_dir=", "no such folder"),
    ),
    "missing input file": (
        lambda fx: Call(
            "seq2seq-translate", [f"checkpoint={fx.best}", "input=missing.txt"]
        ),
        "seq2seq-translate",
        ("input=missing.txt: no such file",),
    ),
    "missing checkpoint": (
        lambda fx: Call("seq2seq-evaluate", ["checkpoint=outputs/none/best.pt"]),
        "seq2seq-evaluate",
        ("checkpoint=outputs/none/best.pt: no such file",),
    ),
    "missing member of an ensemble": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint=[{fx.best},gone.pt]"]),
        "seq2seq-evaluate",
        ("checkpoint=gone.pt: no such file",),
    ),
    "attribution of an ensemble": (
        lambda fx: Call(
            "seq2seq-align",
            [f"checkpoint=[{fx.best},{fx.last}]", "text=hi", "attribution=true"],
        ),
        "seq2seq-align",
        ("attribution=true explains one model",),
    ),
    "missing resume checkpoint": (
        lambda fx: Call("seq2seq-train", ["trainer.resume_from=gone/last.pt"]),
        "seq2seq-train",
        ("trainer.resume_from=gone/last.pt: no such file",),
    ),
    "resume with another model size": (
        lambda fx: Call(
            "seq2seq-train",
            [
                *TRAIN,
                f"data.cache_dir={fx.tmp / 'cache'}",
                "trainer.resume=true",
                "trainer.max_steps=11",
                "model.decoder.hidden_size=32",
                f"hydra.run.dir={_copy_run(fx, 'other_size')}",
            ],
        ),
        "seq2seq-train",
        ("model.decoder.hidden_size=64 there, 32 here", "trainer.resume=false"),
    ),
    "empty checkpoint": (
        lambda fx: Call(
            "seq2seq-translate", [f"checkpoint={fx.file('empty.pt', b'')}"], stdin="hi"
        ),
        "seq2seq-translate",
        ("is empty (0 bytes)",),
    ),
    "truncated checkpoint": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint={_truncated(fx)}"]),
        "seq2seq-evaluate",
        ("truncated or corrupt",),
    ),
    "foreign file as checkpoint": (
        lambda fx: Call(
            "seq2seq-align",
            [f"checkpoint={fx.file('notes.pt', 'not a checkpoint')}", "text=hi"],
        ),
        "seq2seq-align",
        ("not a PyTorch checkpoint",),
    ),
    "torch file of another program": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint={_foreign_torch(fx)}"]),
        "seq2seq-evaluate",
        ("not a seq2seq checkpoint",),
    ),
    "malicious pickle": (
        lambda fx: Call("seq2seq-evaluate", [f"checkpoint={_exploit(fx)}"]),
        "seq2seq-evaluate",
        ("unsafe and was not loaded", "posix.system"),
    ),
    "malicious pickle to average": (
        lambda fx: Call(
            "seq2seq-average",
            [str(fx.best), str(_exploit(fx)), "-o", str(fx.tmp / "avg_evil.pt")],
        ),
        "seq2seq-average",
        ("unsafe and was not loaded",),
    ),
    "full disk while training": (
        lambda fx: Call(
            "seq2seq-train",
            [
                *TRAIN,
                f"data.cache_dir={fx.tmp / 'cache'}",
                "trainer.resume=true",
                "trainer.max_steps=11",
                f"hydra.run.dir={_copy_run(fx, 'resumed')}",
            ],
            driver=[FULL_DISK, "4096"],
        ),
        "seq2seq-train",
        ("no space left on device", "last.pt", "previous one is unchanged"),
    ),
    "full disk while averaging": (
        lambda fx: Call(
            "seq2seq-average",
            [str(fx.best), str(fx.last), "-o", str(fx.tmp / "avg_full.pt")],
            driver=[FULL_DISK, "4096"],
        ),
        "seq2seq-average",
        ("no space left on device", "avg_full.pt"),
    ),
    "missing split": (
        lambda fx: _evaluate_on(
            fx, "no_test", {"train.jsonl": EN_FR, "validation.jsonl": EN_FR}
        ),
        "seq2seq-evaluate",
        ("missing split 'test'", "files present"),
    ),
    "corpus line that is not UTF-8": (
        lambda fx: _evaluate_on(
            fx, "latin1", _parallel(b"the cat\nthe caf\xe9\n", "le chat\nle café\n")
        ),
        "seq2seq-evaluate",
        ("test.en:2: invalid UTF-8",),
    ),
    "parallel files of different lengths": (
        lambda fx: _evaluate_on(
            fx, "uneven", _parallel("the cat\nthe dog\n", "le chat\n")
        ),
        "seq2seq-evaluate",
        ("parallel files differ in length", "2 lines", "1 lines"),
    ),
    "empty split": (
        lambda fx: _evaluate_on(
            fx,
            "empty_test",
            {"train.jsonl": EN_FR, "validation.jsonl": EN_FR, "test.jsonl": ""},
        ),
        "seq2seq-evaluate",
        ("split=test", "has no pairs"),
    ),
    "index=[99999]": (
        lambda fx: Call(
            "seq2seq-align",
            [f"checkpoint={fx.best}", "split=validation", "index=[99999]"],
        ),
        "seq2seq-align",
        ("index=[99999] out of range", "split=validation has 40 pairs"),
    ),
    "translate stdin not UTF-8": (
        lambda fx: Call(
            "seq2seq-translate",
            [f"checkpoint={fx.best}"],
            stdin=b"I love you\nthe caf\xe9\n",
        ),
        "seq2seq-translate",
        ("standard input, line 2: not valid UTF-8", "iconv"),
    ),
    "translate file not UTF-8": (
        lambda fx: Call(
            "seq2seq-translate",
            [f"checkpoint={fx.best}", f"input={fx.file('in.txt', LATIN1_LINE_3)}"],
        ),
        "seq2seq-translate",
        ("in.txt, line 3: not valid UTF-8",),
    ),
    "hub out of reach": (
        lambda fx: Call(
            "seq2seq-prepare",
            ["data=multi30k", "data.hub_id=nobody/no-corpus", "data.local_dir=null"],
            env={
                "HF_ENDPOINT": "http://127.0.0.1:9",
                "HF_HUB_OFFLINE": "0",
                "HF_DATASETS_CACHE": str(fx.tmp / "hf_cache"),
            },
        ),
        "seq2seq-prepare",
        ("hub is unreachable", "data.local_dir"),
    ),
}


@pytest.fixture(scope="module")
def outcomes(fx) -> dict[str, tuple[subprocess.CompletedProcess, float]]:
    """Every refusal's process and its wall time, run a few at a time."""

    def timed(name: str, call: Call):
        start = time.monotonic()
        proc = execute(fx, call, re.sub(r"\W+", "_", name))
        return proc, time.monotonic() - start

    calls = {name: setup(fx) for name, (setup, _, _) in REFUSALS.items()}
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {name: pool.submit(timed, name, call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refused_in_one_line_with_status_2(case, fx, outcomes):
    _, script, needles = REFUSALS[case]
    proc, _ = outcomes[case]
    refused(proc, script, *needles)
    nothing_lost(fx)


def test_a_malicious_pickle_runs_nothing(fx, outcomes):
    assert "malicious pickle" in outcomes
    assert not (fx.tmp / "pwned").exists()
    assert not (fx.tmp / "avg_evil.pt").exists()


def test_a_full_disk_keeps_the_checkpoint_before_it(fx, outcomes):
    assert outcomes["full disk while training"][0].returncode == 2
    resumed = fx.tmp / "inputs" / "resumed" / "checkpoints"
    before = load_checkpoint(fx.last)["step"]
    assert load_checkpoint(resumed / "last.pt")["step"] == before
    assert sorted(p.name for p in resumed.iterdir()) == ["best.pt", "last.pt"]
    assert not (fx.tmp / "avg_full.pt").exists()


def test_the_hub_out_of_reach_fails_in_seconds(outcomes):
    proc, seconds = outcomes["hub out of reach"]
    assert "looking for nobody/no-corpus in the local cache only" in proc.stderr
    assert seconds < 20  # datasets alone retries for about 23 s


def test_a_bug_keeps_its_traceback(fx):
    """Not a user error: the traceback stays, and the status is Python's 1."""
    code = (
        "import sys\n"
        "from seq2seq.cli import evaluate\n"
        "def bug(cfg, out_dir):\n"
        "    return 1 / 0\n"
        "evaluate.evaluate_checkpoint = bug\n"
        f"sys.argv = ['seq2seq-evaluate', 'checkpoint={fx.best}',\n"
        f"            'hydra.run.dir={fx.tmp / 'runs' / 'bug'}']\n"
        "evaluate.main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=fx.tmp, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "ZeroDivisionError" in proc.stderr
    assert "error:" not in proc.stderr.replace("ZeroDivisionError", "")


def test_hydra_full_error_shows_the_traceback_of_a_user_error(fx):
    proc = execute(
        fx,
        Call(
            "seq2seq-evaluate",
            [f"checkpoint={fx.best}", "beam_size=0"],
            env={"HYDRA_FULL_ERROR": "1"},
        ),
        "full_error",
    )
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert "ConfigValueError: beam_size=0: must be at least 1" in proc.stderr


@pytest.mark.parametrize(
    "script",
    [
        "seq2seq-prepare",
        "seq2seq-train",
        "seq2seq-evaluate",
        "seq2seq-translate",
        "seq2seq-align",
        "seq2seq-average",
    ],
)
def test_help_names_the_command_says_what_it_does_and_shows_an_example(
    script, tmp_path
):
    out = run_script(tmp_path, script, "--help").stdout
    assert "powered by Hydra" not in out
    first = out.lstrip().splitlines()[0]
    assert script in first
    assert "example" in out.lower() and f"{script} " in out.split(first, 1)[1]
    assert "status 2" in out.replace("\n", " ")


def test_evaluate_takes_data_overrides_without_plus(fx):
    folder = fx.folder(
        "other",
        {f"{s}.jsonl": EN_FR * 2 for s in ("train", "validation", "test")},
    )
    proc = execute(
        fx,
        Call(
            "seq2seq-evaluate",
            [f"checkpoint={fx.best}", *LOCAL, f"data.local_dir={folder}"],
        ),
        "other_corpus",
    )
    assert proc.returncode == 0, proc.stderr
    assert "on local en->fr test (2 sentences" in proc.stdout


def test_the_phrasebook_french_to_english_is_prepared_that_way(fx):
    from seq2seq.data.prepare import prepare_data
    from tests.helpers import tiny_train_config

    flip = ["data.src_lang=fr", "data.tgt_lang=en"]
    proc = execute(
        fx,
        Call(
            "seq2seq-prepare", [*TINY[:6], f"data.cache_dir={fx.tmp / 'cache'}", *flip]
        ),
        "fr_en",
    )
    assert proc.returncode == 0, proc.stderr
    assert "corpus phrasebook fr→en" in proc.stdout
    cache = fx.tmp / "cache"
    forward = tiny_train_config(cache)
    backward = tiny_train_config(cache, *flip)
    en_fr = prepare_data(forward.data, forward.tokenizer, cache).splits["train"]
    fr_en = prepare_data(backward.data, backward.tokenizer, cache)
    assert fr_en.cached  # what seq2seq-prepare wrote, as seq2seq-train reads it
    assert list(fr_en.splits["train"].src_text) == list(en_fr.tgt_text)
    assert list(fr_en.splits["train"].tgt_text) == list(en_fr.src_text)
    first = en_fr.alignment[0].split()[0]  # e.g. "0-0"; transposed below
    i, j = first.replace("?", "-").split("-")
    assert any(
        link.replace("?", "-") == f"{j}-{i}"
        for link in fr_en.splits["train"].alignment[0].split()
    )


def test_an_overlong_line_is_truncated_with_a_warning(fx):
    line = " ".join(["the blue notebook"] * 30)
    proc = execute(
        fx,
        Call(
            "seq2seq-translate",
            [f"checkpoint={fx.best}", "max_input_pieces=8"],
            stdin=f"I love you\n{line}\n",
        ),
        "overlong",
    )
    assert proc.returncode == 0, proc.stderr
    assert "line 2 has" in proc.stderr and "translating only the first 8" in proc.stderr
    assert len(proc.stdout.split("\n")) == 3
    assert "Traceback" not in proc.stderr


def test_translate_on_a_terminal_answers_each_line_as_it_is_typed(fx):
    """stdin a pseudo-terminal: the first translation arrives before end of input."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "seq2seq-translate"),
            f"checkpoint={fx.last}",
            f"hydra.run.dir={fx.tmp / 'runs' / 'interactive'}",
        ],
        cwd=fx.tmp,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    try:
        os.write(leader, b"I love you\n")
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no translation before the end of input"
        first = proc.stdout.readline()
        assert first.endswith(b"\n")
        os.write(leader, b"the small blue chairs\n")
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout.readline().endswith(b"\n")
        os.write(leader, b"\x04")  # Ctrl-D: end of input
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert b"Ctrl-D ends" in proc.stderr.read()
    batched = execute(
        fx,
        Call("seq2seq-translate", [f"checkpoint={fx.last}"], stdin="I love you\n"),
        "batched",
    )
    assert first.decode() == batched.stdout  # the same translation either way
