"""scripts/score_run.py: choose on validation, score test once, keep every score."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers import run_keeping_three

spec = importlib.util.spec_from_file_location(
    "score_run", REPO_ROOT / "scripts" / "score_run.py"
)
score_run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(score_run)

ARGS = ["--last", "3", "--alphas", "0.6", "1.4", "--beam", "2", "--device", "cpu"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A short run that keeps three epoch checkpoints (trainer.keep_last=3)."""
    return run_keeping_three(tmp_path_factory.mktemp("score_run"))


def _count_decodes(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = score_run.Scorer.decode

    def spy(self, key, checkpoint, split, options):
        seen.append(f"{split}: {key}")
        return real(self, key, checkpoint, split, options)

    monkeypatch.setattr(score_run.Scorer, "decode", spy)
    return seen


def test_chooses_on_validation_then_scores_test_once_and_keeps_it(run, monkeypatch):
    seen = _count_decodes(monkeypatch)
    result = score_run.main([str(run), *ARGS])

    keys = ["best.pt α0.6", "best.pt α1.4", "avg3.pt α0.6", "avg3.pt α1.4"]
    assert list(result["validation"]) == keys
    bleu = {k: s["bleu"] for k, s in result["validation"].items()}
    assert bleu[result["choice"]] == max(bleu.values())
    beam, greedy = result["test"]["beam"], result["test"]["greedy"]
    assert {"bleu", "chrf", "lc_bleu", "paper_bleu"} <= beam.keys()
    assert "lc_bleu" not in greedy  # greedy is cased BLEU only
    choice = result["choice"].split()[0]
    assert seen == [f"validation: {k}" for k in keys] + [
        f"test: {result['choice']}",
        f"test: {choice} greedy",
    ]
    assert (run / "checkpoints" / "avg3.pt").is_file()
    saved = json.loads((run / "scores.json").read_text())
    assert saved["validation"] == result["validation"]
    assert saved["test"][result["choice"]] == beam
    hyps = run / "scores" / "test" / f"{choice}_greedy" / "hyps" / "test.txt"
    assert len(hyps.read_text().splitlines()) == 40

    # A second call decodes nothing and says the same; a rewritten checkpoint
    # (a newer file) is decoded again, and only its entries are.
    seen.clear()
    assert score_run.main([str(run), *ARGS]) == result
    assert seen == []
    best = run / "checkpoints" / "best.pt"
    stamp = best.stat().st_mtime + 10
    os.utime(best, (stamp, stamp))
    again = score_run.main([str(run), *ARGS, "--validation-only"])
    assert seen == ["validation: best.pt α0.6", "validation: best.pt α1.4"]
    assert again["validation"]["best.pt α0.6"]["bleu"] == bleu["best.pt α0.6"]
    assert again["test"] == {}


def test_greedy_decoding_tries_one_length_penalty(run, monkeypatch):
    seen = _count_decodes(monkeypatch)
    greedy = ["--last", "3", "--alphas", "0.6", "1.4", "--beam", "1", "--device", "cpu"]
    result = score_run.main([str(run), *greedy, "--validation-only"])
    assert list(result["validation"]) == ["best.pt α0.6", "avg3.pt α0.6"]
    # decoded anew: the scores kept from beam 2 are not reused for beam 1
    assert seen == ["validation: best.pt α0.6", "validation: avg3.pt α0.6"]
    assert result["validation"]["best.pt α0.6"]["options"]["beam_size"] == 1


def test_a_tie_goes_to_the_first_listed():
    scores = {"best.pt α0.6": 30.0, "best.pt α1.0": 31.5, "avg5.pt α0.6": 31.5}
    validation = {k: {"bleu": b} for k, b in scores.items()}
    assert score_run.choose(validation) == "best.pt α1.0"
    validation["avg5.pt α1.4"] = {"bleu": 31.6}
    assert score_run.choose(validation) == "avg5.pt α1.4"


def test_too_few_kept_checkpoints_or_no_run_is_one_clear_error(run, tmp_path):
    with pytest.raises(
        SystemExit,
        match=r"3 step\*.pt checkpoints, --last 5 needs 5: "
        r"train with trainer.keep_last=5, or pass --last 3",
    ):
        score_run.main([str(run), "--last", "5"])
    with pytest.raises(SystemExit, match=r"no checkpoints/best\.pt"):
        score_run.main([str(tmp_path)])


def test_an_ensemble_of_runs_is_decoded_together_and_kept_apart(run, monkeypatch):
    single = score_run.main([str(run), *ARGS, "--validation-only"])
    checkpoints = []
    real = score_run.Scorer.decode

    def spy(self, key, checkpoint, split, options):
        checkpoints.append(checkpoint)
        return real(self, key, checkpoint, split, options)

    monkeypatch.setattr(score_run.Scorer, "decode", spy)
    # the run with itself: the mixture of two equal models is that model
    result = score_run.main(
        [str(run), *ARGS, "--ensemble", str(run), "--validation-only"]
    )
    keys = ["best.pt×2 α0.6", "best.pt×2 α1.4", "avg3.pt×2 α0.6", "avg3.pt×2 α1.4"]
    assert list(result["validation"]) == keys
    ckpts = run / "checkpoints"
    assert checkpoints[0] == [ckpts / "best.pt"] * 2
    assert checkpoints[2] == [ckpts / "avg3.pt"] * 2
    for key in keys:
        alone = single["validation"][key.replace("×2", "")]
        assert result["validation"][key]["bleu"] == pytest.approx(
            alone["bleu"], abs=1.0
        )
    saved = json.loads((run / "scores.json").read_text())["validation"]
    assert set(keys) <= set(saved) and "best.pt α0.6" in saved  # side by side
    checkpoints.clear()
    assert score_run.main(
        [str(run), *ARGS, "--ensemble", str(run), "--validation-only"]
    )
    assert checkpoints == []  # kept: decoded once
