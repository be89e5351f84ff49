"""seq2seq-serve with a reverse model, in-process: ``/attention`` answers the reverse
model's attention and both directions' word links, the links ``seq2seq-align
reverse_checkpoint=... format=pharaoh words=true`` writes for the same pair; without
a reverse model the fields are absent; a reverse model trained the same way is
refused in one line."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from omegaconf import OmegaConf

from seq2seq.alignment.pipeline import symmetrized_lines
from seq2seq.alignment.twoway import readout_for
from seq2seq.config import AlignConfig, AlignFormat, Symmetrize, TwoWayReadout
from seq2seq.decoding.translator import Translator
from seq2seq.serve.app import Serving, create_app
from seq2seq.serve.engine import Engine, Limits
from seq2seq.serve.twoway import BothWays
from tests.helpers import run_script

TEXTS = ["the small blue chairs", "a red car", "the cat sleeps", "two green books"]


@pytest.fixture(scope="module")
def forward(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint, device="cpu")


@pytest.fixture(scope="module")
def reverse(tiny_reverse_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_reverse_checkpoint, device="cpu")


@pytest.fixture(scope="module")
def client(forward, reverse):
    readout = readout_for(TwoWayReadout(), forward.config.data)  # the default
    both = BothWays(reverse, readout, Symmetrize.geometric, ["fr_en.pt"])
    engine = Engine(forward, Limits(max_input_pieces=30), ["en_fr.pt"], both)
    with TestClient(create_app(engine, Serving())) as c:
        yield c


def align_lines(forward, reverse, text: str, reference: str | None = None) -> str:
    """What ``seq2seq-align reverse_checkpoint=...`` writes for one text."""
    cfg = OmegaConf.structured(
        AlignConfig(
            checkpoint="forward.pt",
            text=text,
            reference=reference,
            format=AlignFormat.pharaoh,
            words=True,
            reverse_checkpoint="reverse.pt",
        )
    )
    return symmetrized_lines(cfg, forward, reverse)[0]


def test_two_way_links_equal_seq2seq_aligns(client, forward, reverse):
    read = 0
    for text in TEXTS:
        res = client.post("/attention", json={"text": text})
        assert res.status_code == 200, res.text
        rec = res.json()
        expected = align_lines(forward, reverse, text)
        if rec["two_way"] is None:  # a piece that is not a word: both leave it out
            assert expected == ""
            continue
        read += 1
        two = rec["two_way"]
        assert two["links"] == expected
        assert two["rule"] == "geometric" and two["readout"].startswith("lexicon 0.4")
        words_t, words_s = len(rec["translation"].split()), len(text.split())
        assert len(two["forward_attention"]) == words_t
        assert len(two["reverse_attention"][0]) == words_s
        back = rec["reverse"]  # the reverse model reads the translation
        assert back["text"] == rec["translation"] and back["translation"] == text
        assert back["tgt_tokens"][-1] == "</s>"
        assert [w["text"] for w in back["tgt_words"]] == text.split()
        assert len(back["weights"]) == len(back["tgt_tokens"])
        assert len(back["weights"][0]) == len(back["src_tokens"])
    assert read >= 2, "the tiny models read too few of the texts both ways"


def test_a_forced_reference_is_read_both_ways_as_seq2seq_align_does(
    client, forward, reverse
):
    text, ref = "the small blue chairs", "les petites chaises bleues"
    rec = client.post("/attention", json={"text": text, "reference": ref}).json()
    assert rec["forced"] and rec["reverse"]["text"] == ref
    expected = align_lines(forward, reverse, text, ref)
    assert (rec["two_way"] or {}).get("links", "") == expected


def test_without_a_reverse_model_the_fields_are_absent(forward):
    engine = Engine(forward, Limits(max_input_pieces=30))
    with TestClient(create_app(engine, Serving())) as c:
        rec = c.post("/attention", json={"text": TEXTS[0]}).json()
        info = c.get("/info").json()
    assert "reverse" not in rec and "two_way" not in rec
    assert rec["heads"] is None  # the other optional fields stay null
    assert info["reverse"] is None


def test_info_names_the_reverse_model(client):
    info = client.get("/info").json()["reverse"]
    assert info["languages"] == {"source": "fr", "target": "en"}
    assert info["checkpoints"] == ["fr_en.pt"] and info["symmetrize"] == "geometric"


@pytest.mark.slow
def test_serve_refuses_a_reverse_model_trained_the_same_way(tiny_checkpoint, tmp_path):
    proc = run_script(
        tmp_path,
        "seq2seq-serve",
        f"checkpoint={tiny_checkpoint}",
        f"reverse_checkpoint={tiny_checkpoint}",
        "port=0",
        f"hydra.run.dir={tmp_path / 'run'}",
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("seq2seq-serve: error: reverse_checkpoint=")
    assert "read the other way" in lines[0] and "data.src_lang" in lines[0]
