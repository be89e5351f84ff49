"""seq2seq-align's what-ifs (attribution=occlusion in every format, knock-outs with
the change in the original translation's log-probability) and occlusion beside the
attention in TensorBoard's validation images."""

import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from seq2seq.alignment.occlusion import attach_occlusion, shares
from seq2seq.alignment.pipeline import run_align
from seq2seq.cli.align import check_align
from seq2seq.config import AlignConfig
from seq2seq.decoding.maps import forced_split
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import occlusion_maps
from seq2seq.errors import ConfigValueError
from seq2seq.training.validation import log_occlusion

TEXT = "the small blue chairs"


@pytest.fixture(scope="module")
def translator(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint, device="cpu")


def _cfg(ckpt, **kw):
    cfg = OmegaConf.structured(AlignConfig(checkpoint=str(ckpt), text=TEXT, **kw))
    check_align(cfg)
    return cfg


def test_shares_keep_positive_drops_per_row():
    drops = np.array([[2.0, -1.0, 2.0], [-1.0, -2.0, 0.0]])
    assert np.allclose(shares(drops), [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("fmt", ["json", "npy", "png", "terminal"])
def test_align_draws_occlusion_beside_attention(
    translator, tiny_checkpoint, tmp_path, capsys, fmt
):
    cfg = _cfg(tiny_checkpoint, attribution="occlusion", format=fmt)
    out = run_align(cfg, tmp_path, translator, None)
    printed = capsys.readouterr().out
    assert "Spearman rho(attention, occlusion)" in printed
    assert "Spearman rho(gradient, occlusion)" in printed  # each pair of the maps
    if fmt == "json":
        (record,) = json.loads(out.read_text())
        assert record["attribution_method"] == "occlusion"
        assert set(record["correlations"]) == {
            "attention~occlusion",
            "attention~gradient",
            "gradient~occlusion",
        }
        assert record["correlations"]["attention~occlusion"] == record["spearman"]
        split = translator.encode([TEXT])
        split = forced_split(split, [h.tokens for h in translator.hypotheses(split)])
        drops = occlusion_maps(translator, split)[0].numpy()
        assert np.allclose(record["attribution"], shares(drops), atol=1e-6)
    elif fmt == "npy":
        assert (out / "attribution_0.npy").is_file()
    elif fmt == "png":
        assert len(list(out.glob("*.png"))) == 1
    else:
        assert "attribution (occlusion):" in printed


def test_align_knocks_out_and_says_the_change(
    translator, tiny_checkpoint, tmp_path, capsys
):
    cfg = _cfg(tiny_checkpoint, format="json")
    cfg.knockout.words = [0, 2]
    out = run_align(cfg, tmp_path, translator, None)
    printed = capsys.readouterr().out
    assert "knocked out word 0, word 2: log p(original" in printed
    (record,) = json.loads(out.read_text())
    src = record["src_tokens"]
    starts = [k for k, p in enumerate(src) if p.startswith("\u2581")]
    for col in (starts[0], starts[2]):  # the words' first pieces get nothing
        assert all(row[col] == 0 for row in record["weights"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"attribution": "shap"}, r"attribution=shap: give true \(gradient"),
        ({"attribution": "occlusion", "view": "self"}, "give view=cross"),
    ],
)
def test_align_refuses_bad_whatifs(tiny_checkpoint, overrides, message):
    with pytest.raises(ConfigValueError, match=message):
        _cfg(tiny_checkpoint, **overrides)


def test_align_refuses_attribution_with_a_knockout(tiny_checkpoint):
    cfg = OmegaConf.structured(
        AlignConfig(checkpoint=str(tiny_checkpoint), text=TEXT, attribution=True)
    )
    cfg.knockout.words = [0]
    with pytest.raises(ConfigValueError, match="drop it or the knockout"):
        check_align(cfg)


class _Tracker:
    def __init__(self):
        self.logged = {}

    def scalars(self, values, step):
        self.logged.update(values)


def test_validation_draws_occlusion_and_logs_its_rho(translator):
    split = translator.encode(["the small blue chairs", "a red car"])
    shown = forced_split(split, [h.tokens for h in translator.hypotheses(split)])
    maps = translator.attention_maps(shown)
    tracker = _Tracker()
    log_occlusion(translator, shown, maps, tracker, step=1)
    assert all(m.attribution_method == "occlusion" for m in maps)
    rhos = [m.spearman for m in maps]
    assert tracker.logged["valid/spearman_occlusion"] == pytest.approx(np.mean(rhos))
    again = attach_occlusion(translator, shown, translator.attention_maps(shown))
    assert all(d.shape == m.weights.shape for d, m in zip(again, maps, strict=True))


def test_method_agreement_on_gold(translator):
    from seq2seq.alignment.agreement import method_agreement, word_maps
    from seq2seq.alignment.error import alignment_scores
    from seq2seq.data.splits import encode_corpus_split

    split = encode_corpus_split(translator.config.data, translator.tokenizer, "test")
    split = split.select(list(range(12)))
    assert split.alignment is not None
    report = method_agreement(translator, split)
    assert set(report.agree) == {
        "attention=occlusion",
        "attention=gradient",
        "occlusion=gradient",
    }
    # the attention's AER is the one alignment_scores reads on the same references
    assert report.aer["attention"] == pytest.approx(
        alignment_scores(translator, split).aer
    )
    # agreement counts target words whose argmaxes coincide
    maps = [m for m in word_maps(translator, split) if m is not None]
    same = sum(
        int((m["attention"].argmax(1) == m["occlusion"].argmax(1)).sum()) for m in maps
    )
    assert report.n_words == sum(len(m["attention"]) for m in maps)
    assert report.agree["attention=occlusion"] == pytest.approx(same / report.n_words)
    assert all(0 <= v <= 1 for v in report.aer.values())
    assert "same argmax source word" in report.summary()


def test_training_draws_occlusion_in_tensorboard(tmp_path):
    from tests.test_train import _events, _trainer

    trainer = _trainer(
        tmp_path,
        "run",
        "trainer.valid_every=10",
        "trainer.max_steps=10",
        "trainer.alignment_occlusion=true",
    )
    trainer.fit()
    acc = _events(tmp_path / "run")
    assert [e.step for e in acc.Scalars("valid/spearman_occlusion")] == [10]
    assert [e.step for e in acc.Images("alignment/0")] == [10]
