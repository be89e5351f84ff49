"""The API's what-ifs against a tiny checkpoint: prefixes on /translate and
/attention, each step's distribution, knock-outs with the change in the original
translation's log-probability, occlusion beside attention and gradient × input, and
each bad what-if refused in one line (422)."""

import pytest
from fastapi.testclient import TestClient

from seq2seq.decoding.knockout import Knockout
from seq2seq.decoding.translator import Translator
from seq2seq.serve.app import Serving, create_app
from seq2seq.serve.engine import Engine, Limits

TEXTS = ["the small blue chairs", "a red car", "the cat sleeps", "two green books"]


@pytest.fixture(scope="module")
def translator(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint, device="cpu")


@pytest.fixture(scope="module")
def client(translator):
    engine = Engine(translator, Limits(max_texts=8, max_input_pieces=30), ["t.pt"])
    with TestClient(create_app(engine, Serving()), raise_server_exceptions=False) as c:
        yield c


def test_translate_with_prefixes(client, translator):
    prefixes = ["die rote", None, "", "rote"]
    res = client.post("/translate", json={"texts": TEXTS, "prefixes": prefixes})
    assert res.status_code == 200, res.text
    got = res.json()["translations"]
    assert got == translator.translate(TEXTS, prefixes)
    assert got[0].startswith("die rote") and got[3].startswith("rote")
    assert got[1:3] == translator.translate(TEXTS[1:3])


def test_attention_continues_a_prefix_and_shows_each_step(client, translator):
    body = {"text": TEXTS[0], "prefix": "die rote", "top_k": 3}
    res = client.post("/attention", json=body)
    assert res.status_code == 200, res.text
    rec = res.json()
    assert rec["translation"].startswith("die rote") and rec["prefix"] == "die rote"
    assert rec["translation"] == translator.translate(TEXTS[:1], ["die rote"])[0]
    steps = rec["steps"]
    assert [s["piece"] for s in steps] == rec["tgt_tokens"]
    for s in steps:
        assert 0 <= s["prob"] <= 1 and s["entropy"] >= 0
        probs = [a["prob"] for a in s["alternatives"]]
        assert len(probs) == 3 and probs == sorted(probs, reverse=True)


def test_choosing_an_alternative_continues_from_it(client):
    rec = client.post("/attention", json={"text": TEXTS[1], "top_k": 4}).json()
    step = rec["steps"][0]
    alt = next(a for a in step["alternatives"] if a["piece"] != step["piece"])
    body = {"text": TEXTS[1], "prefix_pieces": [alt["piece"]]}
    again = client.post("/attention", json=body)
    assert again.status_code == 200, again.text
    assert again.json()["tgt_tokens"][0] == alt["piece"]


def test_a_knockout_gives_its_translation_attention_and_change(client, translator):
    body = {"text": TEXTS[0], "knockout": {"words": [1, 2]}}
    rec = client.post("/attention", json=body).json()
    ko = Knockout(words=(1, 2))
    assert rec["translation"] == translator.translate(TEXTS[:1], knockouts=ko)[0]
    plain = client.post("/attention", json={"text": TEXTS[0]}).json()
    assert rec["knockout"]["original"] == plain["translation"]
    assert rec["knockout"]["knocked_out"] == "word 1, word 2"
    change = rec["knockout"]["knocked_log_prob"] - rec["knockout"]["original_log_prob"]
    assert rec["knockout"]["change"] == pytest.approx(change)
    assert rec["knockout"]["change"] != 0
    words = rec["src_words"]
    cols = words[1]["pieces"] + words[2]["pieces"]
    assert all(row[c] == 0 for row in rec["weights"] for c in cols)


def test_occlusion_beside_attention_and_attribution(client):
    body = {"text": TEXTS[0], "occlusion": True, "attribution": True}
    rec = client.post("/attention", json=body).json()
    occ = rec["occlusion"]
    assert len(occ) == len(rec["tgt_tokens"]) and len(occ[0]) == len(rec["src_tokens"])
    assert set(rec["correlations"]) == {
        "attention~attribution",
        "attention~occlusion",
        "attribution~occlusion",
    }
    assert rec["correlations"]["attention~attribution"] == pytest.approx(
        rec["spearman"]
    )


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/translate",
            {"texts": ["a"], "prefixes": [" ".join(["rote"] * 40)]},
            "the prefix of texts[0] has",
        ),
        ("/translate", {"texts": ["a", "b"], "prefixes": ["x"]}, "1 prefixes for 2"),
        (
            "/attention",
            {"text": "a", "prefix": " ".join(["rote"] * 40)},
            "the prefix of text has",
        ),
        ("/attention", {"text": "a", "prefix": "x", "reference": "y"}, "not both"),
        ("/attention", {"text": "a red car", "knockout": {"words": [5]}}, "3 words"),
        ("/attention", {"text": "a", "knockout": {"heads": [0]}}, "no heads"),
        (
            "/attention",
            {"text": "a", "knockout": {"self_heads": [[0]]}},
            "not a [layer, head] pair",
        ),
        (
            "/attention",
            {"text": "a", "knockout": {"words": [0]}, "occlusion": True},
            "without a knockout",
        ),
        ("/attention", {"text": "a", "top_k": 99}, "top_k"),
        ("/attention", {"text": "a", "prefix_pieces": ["<s>"]}, "not a piece"),
        ("/attention", {"text": "a", "prefix_pieces": ["zzzq"]}, "not a piece"),
    ],
)
def test_bad_whatifs_are_one_line_422(client, path, body, message):
    res = client.post(path, json=body)
    assert res.status_code == 422, res.text
    assert message in res.json()["error"] and "\n" not in res.json()["error"]


def test_the_engine_warms_up(translator):
    Engine(translator, Limits()).warm()  # a translation and an attention map
