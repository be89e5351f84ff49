"""Helpers of scripts/benchmarks/bench_compare.py that its figures depend on."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location(
    "bench_compare", REPO_ROOT / "scripts" / "benchmarks" / "bench_compare.py"
)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_peer_checkpoint_is_the_highest_step_not_the_last_name(tmp_path):
    for step in (100, 900, 1000):
        (tmp_path / f"model_step_{step}.pt").touch()
    assert bench.peer_checkpoint("onmt", tmp_path).name == "model_step_1000.pt"
    (tmp_path / "model").mkdir()
    for step in (147, 1000, 99):
        (tmp_path / "model" / f"{step}.ckpt").touch()
    (tmp_path / "model" / "latest.ckpt").touch()
    assert bench.peer_checkpoint("joey", tmp_path).name == "1000.ckpt"
    assert bench.peer_checkpoint("onmt", tmp_path / "model") is None


def test_flops_per_token_counts_the_reference_model():
    """Decoder only (no source): Bahdanau GRU gates over [e; c] and h, the query
    projection, the deep output over [s; c; e] and the vocabulary projection."""
    e, c, h, v = 256, 512, 512, 8004
    want = 2 * 3 * h * (e + c + h) + 2 * h * h + 2 * h * (h + c + e) + 2 * h * v
    assert bench.flops_per_token("bahdanau", 0.0, 0.0) == want
    per_source = 2 * 2 * 3 * 256 * (e + 256) + 2 * c * h  # both directions + keys
    with_source = bench.flops_per_token("bahdanau", 1.0, 0.0)
    assert with_source - want == pytest.approx(per_source)


def test_decoding_ratios_against_opennmt_pair_each_search_with_theirs():
    ours = {"greedy_sent_s": 300.0, "beam5_sent_s": 90.0, "beam5_best_sent_s": 120.0}
    onmt = {"greedy_sent_s": 200.0, "beam5_sent_s": 60.0}  # their one stop rule
    pairs = bench.DECODING_VS_PEERS
    assert [bench.decoding_ratio(ours, onmt, a, b) for a, b in pairs] == [1.5, 1.5, 2.0]
    assert bench.decoding_ratio(ours, {}, "greedy", "greedy") is None  # peer not run


def test_race_report_takes_medians_and_ends_with_the_ratios():
    ours = {
        "steps": 2529,
        "batch": "4096 tokens",
        "greedy_rates": [400.0, 420.0, 380.0],
        "beam5_rates": [90.0, 60.0, 75.0],
        "beam5_best_rates": [100.0],
        "greedy_quality": {"bleu": 36.9, "words": 12.3},
    }
    onmt = {"steps": 2800, "greedy_rates": [200.0, 250.0], "beam5_rates": [50.0]}
    report = bench.race_report({"seq2seq ref": ours, "opennmt": onmt}, "seq2seq ref")
    rows = report.splitlines()
    assert rows[2].startswith("| seq2seq ref | 2,529 | 4096 tokens | 400.0 | 36.90 |")
    assert "| opennmt | 2,800 | None | 225.0 |" in rows[3]  # median of two rounds
    assert rows[-1] == (
        "greedy_vs_opennmt=1.78 beam5_vs_opennmt=1.50 beam5_best_vs_opennmt=2.00 "
        "greedy_vs_joeynmt=n/a beam5_vs_joeynmt=n/a beam5_best_vs_joeynmt=n/a"
    )


def test_peer_decoding_states_its_batch(tmp_path):
    cmd = bench.peer_decode_cmd("onmt", tmp_path, tmp_path / "m.pt", 5, tmp_path, 128)
    assert cmd[cmd.index("-batch_size") + 1] == 128
    (tmp_path / "config.yaml").write_text(
        "testing:\n    beam_size: 1 \n    batch_size: 64\n"
    )
    bench.peer_decode_cmd("joey", tmp_path, tmp_path / "1.ckpt", 5, tmp_path, 128)
    cfg = (tmp_path / "test5.yaml").read_text()
    assert "beam_size: 5" in cfg and "batch_size: 128" in cfg and "1.ckpt" in cfg
