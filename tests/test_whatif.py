"""What-ifs: prefix-constrained search, knock-outs and occlusion.

A prefix is kept and continued, and its score is forced decoding's; a knocked-out
source word is the attention renormalized without it (p'_j = p_j m_j / Σ p_k m_k); a
knocked-out head equals the model with that head's output weights zeroed; occlusion
batched equals one knock-out at a time."""

import pytest
import torch
from torch.testing import assert_close

from seq2seq.data.batching import collate
from seq2seq.data.pieces import word_pieces
from seq2seq.decoding.ensemble import Ensemble
from seq2seq.decoding.forced import forced_outputs, occlusion
from seq2seq.decoding.knockout import Knockout, KnockoutMasks
from seq2seq.decoding.maps import forced_split, without_eos
from seq2seq.decoding.prefix import pad_prefixes
from seq2seq.decoding.search import beam_search, greedy_search
from seq2seq.decoding.search import decode_settings as _settings
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import (
    log_probabilities,
    occlusion_maps,
    step_distributions,
)
from seq2seq.errors import InputError
from tests.test_search import _batch, _model

TEXTS = ["the small blue chairs", "a red car", "the cat sleeps", "two green books"]


@pytest.fixture(scope="module", params=[1, 4], ids=["greedy", "beam4"])
def translator(request, tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(
        tiny_checkpoint, device="cpu", beam_size=request.param
    )


# ------------------------------------------------------------------ prefixes
def test_own_translation_as_prefix_gives_it_back(translator):
    # as piece ids: a text prefix is encoded canonically, and an undertrained
    # model's own pieces need not be (this one writes "ssss…" up to the limit)
    split = translator.encode(TEXTS)
    plain = translator.search(split)
    own = [hs[0].tokens for hs in plain]
    again = translator.search(split, [without_eos(t) for t in own])
    assert [hs[0].tokens for hs in again] == own
    for h, g in zip(plain, again, strict=True):
        assert_close(h[0].score, g[0].score, atol=1e-4, rtol=1e-5)
    # as text: the translation starts with the prefix's pieces
    ids = translator.prefix_ids(split, ["die", "s s", None, "zwei rote"])
    for hs, prefix in zip(translator.search(split, ids), ids, strict=True):
        assert hs[0].tokens[: len(prefix)] == prefix


def test_empty_prefix_changes_nothing(translator):
    plain = translator.nbest(TEXTS, 2)
    assert translator.nbest(TEXTS, 2, prefixes=[""] * len(TEXTS)) == plain
    assert translator.nbest(TEXTS, 2, prefixes=[None, "", None, ""]) == plain


def test_translations_start_with_the_prefix_and_score_it_as_forced_decoding(
    translator,
):
    prefixes = ["die", None, "eine rote", "zwei"]
    out = translator.translate(TEXTS, prefixes=prefixes)
    split = translator.encode(TEXTS)
    ids = translator.prefix_ids(split, prefixes)
    hyps = [hs[0] for hs in translator.search(split, ids)]
    for hyp, prefix in zip(hyps, ids, strict=True):
        assert hyp.tokens[: len(prefix)] == prefix
    assert out[0].startswith("die") and out[2].startswith("eine rote")
    # the search's score of the prefix = forced decoding of the prefix
    forced = translator.forced_passes(forced_split(split, ids))
    for k in (0, 2, 3):
        lp = forced[k].log_probs[: len(ids[k])]  # the prefix's steps, not its EOS
        expect = lp.gather(1, torch.tensor(ids[k])[:, None]).sum()
        assert_close(hyps[k].prefix_score, float(expect), atol=1e-4, rtol=1e-5)
    assert hyps[1].prefix_score == 0.0  # no prefix: nothing forced


def test_a_prefix_past_the_length_limit_is_one_line(translator):
    long = " ".join(["rote"] * 40)
    with pytest.raises(
        InputError, match=r"prefix of text 1 has \d+ pieces, over its output limit"
    ) as err:
        translator.translate(["a", "b"], prefixes=[None, long])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("every", [1, 8], ids=["cpu-checks", "accelerator-checks"])
@pytest.mark.parametrize("beam", [1, 3])
def test_a_batch_with_and_without_prefixes_is_each_sentence_alone(beam, every):
    model = _model(sharpen=3.0)
    src, lengths, mask = _batch()
    settings = _settings(beam_size=beam, n_best=1, length_penalty=0.0)
    prefixes = [[5, 6], [], [7]]

    def search(*args, prefix=None):
        fn = greedy_search if beam == 1 else beam_search
        out = fn(model, *args, settings, check_every=every, prefix=prefix)
        return [h if beam == 1 else h[0] for h in out]

    together = search(src, lengths, mask, prefix=pad_prefixes(prefixes, src.device))
    for i, prefix in enumerate(prefixes):
        one = (src[i : i + 1], lengths[i : i + 1], mask[i : i + 1])
        alone = search(*one, prefix=pad_prefixes([prefix], src.device))[0]
        assert together[i].tokens == alone.tokens
        assert together[i].tokens[: len(prefix)] == prefix
        assert_close(together[i].score, alone.score, atol=1e-5, rtol=1e-5)


def test_an_ensemble_keeps_a_prefix(tiny_checkpoint):
    ens = Translator.from_checkpoint([tiny_checkpoint] * 2, device="cpu")
    one = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    prefixes = ["die", None, None, "zwei"]
    assert ens.translate(TEXTS, prefixes) == one.translate(TEXTS, prefixes)


# ----------------------------------------------------------------- knock-outs
def _first_step_weights(model, src, lengths, mask, masks):
    tgt_in = torch.full((src.size(0), 1), 2)  # BOS
    return forced_outputs(model, src, lengths, mask, tgt_in, masks).attention[:, 0]


@pytest.mark.parametrize("attention", ["bahdanau", "multihead"])
def test_a_knocked_out_word_is_the_attention_renormalized_without_it(attention):
    model = _model(
        attention=attention, style="luong" if attention != "bahdanau" else None
    )
    src, lengths, mask = _batch((5, 3))
    pieces = torch.zeros_like(mask)
    pieces[0, [1, 2]] = True  # sentence 0 loses pieces 1 and 2
    with torch.no_grad():
        p = _first_step_weights(model, src, lengths, mask, None)
        q = _first_step_weights(model, src, lengths, mask, KnockoutMasks(pieces))
    keep = (~pieces).float()
    expect = p * keep / (p * keep).sum(dim=1, keepdim=True)  # p'_j = p_j m_j / Σ p m
    if attention == "bahdanau":  # the first query does not depend on the context
        assert_close(q, expect, atol=1e-6, rtol=1e-5)
    assert (q[0, [1, 2]] == 0).all()
    assert_close(q[1], p[1])  # the other sentence is untouched


def test_a_knocked_out_head_is_its_output_weights_zeroed():
    model = _model(attention="multihead", style="luong")
    src, lengths, mask = _batch((5, 3))
    tgt_in = torch.randint(4, 17, (2, 4))
    heads = torch.ones(2, 2)
    heads[:, 1] = 0.0
    with torch.no_grad():
        knocked = forced_outputs(
            model, src, lengths, mask, tgt_in, KnockoutMasks(heads=heads)
        )
        d = model.decoder.attention.context_size // 2
        model.decoder.attention.out_proj.weight[:, d:] = 0.0  # head 1's columns
        zeroed = forced_outputs(model, src, lengths, mask, tgt_in)
    assert_close(knocked.log_probs, zeroed.log_probs, atol=1e-5, rtol=1e-5)


def test_a_knocked_out_self_attention_head_is_its_output_weights_zeroed():
    model = _model(attention="multihead", style="luong", blocks=1)
    src, lengths, mask = _batch((5, 3))
    tgt_in = torch.randint(4, 17, (2, 4))
    selfs = torch.ones(2, 1, 2)
    selfs[:, 0, 0] = 0.0
    with torch.no_grad():
        plain = forced_outputs(model, src, lengths, mask, tgt_in)
        knocked = forced_outputs(
            model, src, lengths, mask, tgt_in, KnockoutMasks(self_heads=selfs)
        )
        block = model.self_attention.blocks[0]
        d = block.out.in_features // 2
        block.out.weight[:, :d] = 0.0  # head 0's columns
        zeroed = forced_outputs(model, src, lengths, mask, tgt_in)
    assert_close(knocked.log_probs, zeroed.log_probs, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(plain.log_probs, knocked.log_probs)
    assert model.self_attention.blocks[0].weights_hook is None  # restored


def test_knockouts_in_the_translator(tiny_checkpoint):
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    plain = tr.translate(TEXTS)
    scores = [c[0][1] for c in tr.nbest(TEXTS)]
    knocked = tr.nbest(TEXTS, knockouts=Knockout(words=(0, 1)))
    assert all(c[0][1] != s for c, s in zip(knocked, scores, strict=True))
    # the attention of the knocked-out model gives the word's pieces nothing
    maps = tr.attention(TEXTS[:1], knockouts=[Knockout(words=(2,))])
    src = tr.encode(TEXTS[:1]).src_ids[0]
    pieces = word_pieces(tr.tokenizer.src_pieces(src))[2]
    assert (maps[0].weights[:, pieces] == 0).all()
    # one knock-out per text; None: that text as it was
    per = tr.nbest(TEXTS, knockouts=[None, Knockout(words=(0,)), None, None])
    assert [per[k][0][1] for k in (0, 2, 3)] == [scores[k] for k in (0, 2, 3)]
    assert per[1][0][1] != scores[1] and per[0][0][0] == plain[0]
    # the change in the original translation's log-probability
    split = tr.encode(TEXTS)
    split = forced_split(split, [h.tokens for h in tr.hypotheses(split)])
    before = log_probabilities(tr, split)
    after = log_probabilities(tr, split, [Knockout(words=(0,))] * len(TEXTS))
    assert all(a != b for a, b in zip(after, before, strict=True))
    again = log_probabilities(tr, split, [None, Knockout(words=(0,)), None, None])
    assert again[0] == before[0] and again[1] == after[1]


@pytest.mark.parametrize(
    ("knockout", "message"),
    [
        (Knockout(words=(9,)), "knock-out word 9: the source has 4 words"),
        (Knockout(heads=(0,)), "attention has no heads"),
        (Knockout(self_heads=((0, 0),)), "encoder has no self-attention"),
    ],
)
def test_a_knockout_the_model_lacks_is_one_line(tiny_checkpoint, knockout, message):
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    with pytest.raises(InputError, match=message):
        tr.translate(TEXTS[:1], knockouts=knockout)


def test_an_ensemble_knocks_out_in_every_member(tiny_checkpoint):
    ens = Translator.from_checkpoint([tiny_checkpoint] * 2, device="cpu")
    one = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    ko = Knockout(words=(1,))
    assert isinstance(ens.model, Ensemble)
    assert ens.translate(TEXTS, knockouts=ko) == one.translate(TEXTS, knockouts=ko)


# ------------------------------------------------------------ distributions
def test_step_distributions_read_the_forced_pass(tiny_checkpoint):
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    split = tr.encode(TEXTS)
    split = forced_split(split, [h.tokens for h in tr.hypotheses(split)])
    for stats, tgt in zip(
        step_distributions(tr, split, k=3), split.tgt_ids, strict=True
    ):
        assert stats.prob.shape == (len(tgt) + 1,)
        assert stats.top_ids.shape == (len(tgt) + 1, 3)
        # greedy's own translation: each piece is its step's most probable one
        # (not the final EOS of a translation cut at the limit, as these are)
        assert_close(stats.prob[:-1], stats.top_probs[:-1, 0])
        assert (stats.top_probs[:, :-1] >= stats.top_probs[:, 1:]).all()
        assert (stats.entropy >= 0).all()


# ------------------------------------------------------------------ occlusion
def test_occlusion_batched_is_one_knockout_at_a_time():
    model = _model(sharpen=2.0)
    src = _batch((5,))[0]
    tgt = [7, 8, 9]
    batch = collate([(0, src[0, :4].tolist(), tgt)])
    groups = [[0], [1, 2], [3]]
    with torch.no_grad():
        drops = occlusion(
            model, batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out, groups
        )
        base = forced_outputs(
            model, batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in
        )
        chosen = base.log_probs[0].gather(1, batch.tgt_out[0][:, None])[:, 0]
        for w, group in enumerate(groups):
            pieces = torch.zeros_like(batch.src_mask)
            pieces[0, group] = True
            one = forced_outputs(
                model,
                batch.src,
                batch.src_lengths,
                batch.src_mask,
                batch.tgt_in,
                KnockoutMasks(pieces),
            )
            lp = one.log_probs[0].gather(1, batch.tgt_out[0][:, None])[:, 0]
            assert_close(drops[:, w], chosen - lp, atol=1e-5, rtol=1e-5)


def test_occlusion_maps_lie_over_the_source_pieces(tiny_checkpoint):
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    split = tr.encode(TEXTS)
    split = forced_split(split, [h.tokens for h in tr.hypotheses(split)])
    maps = occlusion_maps(tr, split)
    attention = tr.attention_maps(split)
    for occ, att in zip(maps, attention, strict=True):
        assert occ.shape == att.weights.shape
        assert (occ[:, -1] == 0).all()  # the source EOS is not a word
        assert occ.abs().sum() > 0


def test_occlusion_maps_of_a_split_equal_one_sentence_at_a_time(tiny_checkpoint):
    """Pairs batched together (padded, several passes) give each pair's
    ``occlusion`` alone."""
    import dataclasses

    from seq2seq.decoding.forced import spread_over_pieces

    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    split = tr.encode([*TEXTS, "a"], [*TEXTS[::-1], "the small blue chairs"])
    small = dataclasses.replace(tr, batch_tokens=40)  # several passes
    for maps in (occlusion_maps(tr, split), occlusion_maps(small, split)):
        for k, got in enumerate(maps):
            src, tgt = split.src_ids[k], split.tgt_ids[k]
            batch = collate([(0, list(src), list(tgt))])
            groups = word_pieces(tr.tokenizer.src_pieces(list(src)))
            with torch.no_grad():
                drops = occlusion(
                    tr.model,
                    batch.src,
                    batch.src_lengths,
                    batch.tgt_in,
                    batch.tgt_out,
                    groups,
                )
            want = spread_over_pieces(drops, groups, len(src) + 1)
            assert_close(got, want, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- the commands
def test_translate_command_keeps_a_prefix_per_line(tiny_checkpoint, tmp_path):
    from omegaconf import OmegaConf

    from seq2seq.cli import translate
    from seq2seq.config import TranslateConfig

    (tmp_path / "in.txt").write_text("a red car\n\nthe cat sleeps\ntwo green books\n")
    (tmp_path / "pre.txt").write_text("die rote\n\n\nrote\n")
    cfg = OmegaConf.structured(
        TranslateConfig(
            checkpoint=str(tiny_checkpoint),
            input=str(tmp_path / "in.txt"),
            prefixes=str(tmp_path / "pre.txt"),
            output=str(tmp_path / "out.txt"),
            device="cpu",
        )
    )
    out = translate.translate_file(cfg)
    assert out[0].startswith("die rote") and out[3].startswith("rote")
    tr = Translator.from_checkpoint(tiny_checkpoint, device="cpu")
    assert out[1] == "" and out[2] == tr.translate(["the cat sleeps"])[0]
    (tmp_path / "pre.txt").write_text("die rote\n")
    with pytest.raises(InputError, match="has 1 lines for 4 input lines"):
        translate.translate_file(cfg)
    (tmp_path / "pre.txt").write_text("\n\n" + " ".join(["rote"] * 40) + "\n\n")
    with pytest.raises(InputError, match=r"prefix of line 3 has \d+ pieces, over"):
        translate.translate_file(cfg)
