"""Self-attention blocks over the encoder's states: each block against a reference
built from torch's MultiheadAttention, the masks, padding, ``layers=0`` as the model
without blocks, and a tiny trained model through search, TensorBoard, averaging,
old checkpoints and ``seq2seq-align view=self``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn
from torch.testing import assert_close

from seq2seq.alignment.attribution import self_attention_attribution
from seq2seq.cli.align import check_model_view
from seq2seq.config import (
    AttentionConfig,
    DecoderConfig,
    EncoderConfig,
    ModelConfig,
    SelfAttentionConfig,
)
from seq2seq.data.batching import collate
from seq2seq.data.tokenizer import PAD_ID
from seq2seq.decoding.ensemble import Ensemble
from seq2seq.decoding.maps import without_eos
from seq2seq.decoding.translator import Translator
from seq2seq.errors import ConfigValueError
from seq2seq.model.checkpoint import load_checkpoint, save_checkpoint, write_average
from seq2seq.model.self_attention import SelfAttentionBlock, SelfAttentionStack
from seq2seq.model.seq2seq import Seq2Seq, build_model
from seq2seq.training.resume import check_resumable
from tests.helpers import build_trainer, run_script, tiny_train_config

V = 19


def _cfg(layers: int = 1, heads: int = 2, attention: str = "bahdanau") -> ModelConfig:
    return ModelConfig(
        emb_dim=6,
        emb_dropout=0.0,
        encoder=EncoderConfig(
            hidden_size=4,
            layers=1,
            self_attention=SelfAttentionConfig(layers=layers, heads=heads, ffn=12),
        ),
        decoder=DecoderConfig(hidden_size=8, dropout=0.0),
        attention=AttentionConfig(type=attention, heads=2),
    )


def _model(layers: int = 1, seed: int = 0, **kw) -> Seq2Seq:
    torch.manual_seed(seed)
    return build_model(_cfg(layers, **kw), V, V).eval()


def _batch(lengths=(6, 4, 1)):
    torch.manual_seed(5)
    lengths = torch.tensor(lengths)
    mask = torch.arange(int(lengths.max()))[None] < lengths[:, None]
    src = torch.randint(4, V, mask.shape).masked_fill(~mask, PAD_ID)
    return src, lengths, mask


# ------------------------------------------------------------------ the block
def _reference(block: SelfAttentionBlock, x, mask):
    """The block written with nn.MultiheadAttention, LayerNorm and Linear layers
    holding copies of its weights; returns (y, per-head weights, modules)."""
    d = x.size(-1)
    mha = nn.MultiheadAttention(d, block.heads, batch_first=True).double()
    ln1, ln2 = nn.LayerNorm(d).double(), nn.LayerNorm(d).double()
    lin1 = nn.Linear(d, block.ffn_in.out_features).double()
    lin2 = nn.Linear(block.ffn_in.out_features, d).double()
    pairs = [
        (mha.in_proj_weight, block.qkv.weight),
        (mha.in_proj_bias, block.qkv.bias),
        (mha.out_proj.weight, block.out.weight),
        (mha.out_proj.bias, block.out.bias),
        (ln1.weight, block.norm_attn.weight),
        (ln1.bias, block.norm_attn.bias),
        (ln2.weight, block.norm_ffn.weight),
        (ln2.bias, block.norm_ffn.bias),
        (lin1.weight, block.ffn_in.weight),
        (lin1.bias, block.ffn_in.bias),
        (lin2.weight, block.ffn_out.weight),
        (lin2.bias, block.ffn_out.bias),
    ]
    with torch.no_grad():
        for mine, theirs in pairs:
            mine.copy_(theirs)
    z = ln1(x)
    att, weights = mha(
        z, z, z, key_padding_mask=~mask, need_weights=True, average_attn_weights=False
    )
    a = x + att
    return a + lin2(torch.relu(lin1(ln2(a)))), weights, pairs


@pytest.mark.parametrize("need_weights", [False, True])
def test_a_block_equals_multihead_attention_layer_norm_and_ffn(need_weights):
    """Values, weights and gradients (input and every parameter) in float64."""
    torch.manual_seed(1)
    block = SelfAttentionBlock(8, 2, 16).double()
    for p in block.parameters():  # non-trivial norms and biases
        nn.init.normal_(p, std=0.3)
    mask = _batch()[2]
    x = torch.randn(3, mask.size(1), 8, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    y, weights = block(x, mask, need_weights)
    y_ref, w_ref, pairs = _reference(block, x_ref, mask)
    keep = mask[:, :, None]
    assert_close(y * keep, y_ref * keep)
    if need_weights:
        assert_close(weights * mask[:, None, :, None], w_ref * mask[:, None, :, None])
    probe = torch.randn_like(y) * keep  # a loss over the real positions only
    (y * probe).sum().backward()
    (y_ref * probe).sum().backward()
    assert_close(x.grad, x_ref.grad)
    for theirs, mine in pairs:
        assert_close(mine.grad, theirs.grad)


def test_fused_and_explicit_attention_paths_agree():
    torch.manual_seed(2)
    stack = SelfAttentionStack(8, 2, 4, 16).eval()
    _, _, mask = _batch()
    x = torch.randn(3, mask.size(1), 8)
    fused, none = stack(x, mask)
    explicit, weights = stack(x, mask, need_weights=True)
    assert none is None and weights.shape == (3, 2, 4, 6, 6)
    assert_close(fused, explicit)


def test_padding_gets_zero_weight_rows_sum_to_one_and_memory_is_zero_there():
    model = _model(layers=2)
    src, lengths, mask = _batch()
    out = model(src, lengths, mask, src[:, :3], self_weights=True)
    w = out.self_attention  # (B, layers, heads, S, S)
    assert w.shape == (3, 2, 2, 6, 6)
    assert (w.masked_select(~mask[:, None, None, None, :]) == 0).all()
    rows = w.sum(-1)
    assert_close(
        rows[mask[:, None, None, :].expand_as(rows)],
        torch.ones(()).expand(int(mask[:, None, None, :].expand_as(rows).sum())),
    )
    enc = model.encode(src, lengths, mask)
    assert (enc.memory[~mask] == 0).all() and enc.memory[mask].abs().sum() > 0
    assert model(src, lengths, mask, src[:, :3]).self_attention is None


def test_a_sentence_alone_equals_it_in_a_padded_batch():
    model = _model(layers=2)
    src, lengths, mask = _batch()
    enc, maps = model.encode_with_weights(src, lengths, mask, weights=True)
    for i, n in enumerate(lengths.tolist()):
        one, alone = model.encode_with_weights(
            src[i : i + 1, :n], lengths[i : i + 1], mask[i : i + 1, :n], weights=True
        )
        assert_close(one.memory[0], enc.memory[i, :n], atol=1e-6, rtol=1e-5)
        assert_close(one.final[0], enc.final[i])
        assert_close(alone[0], maps[i, :, :, :n, :n], atol=1e-6, rtol=1e-5)


def test_layers_zero_is_the_model_without_blocks():
    """Same parameters (keys and values) and outputs as encoder + bridge + decoder
    alone; with blocks, every other parameter is still drawn the same at one seed."""
    plain, with_blocks = _model(layers=0), _model(layers=1)
    assert plain.self_attention is None
    keys = list(plain.state_dict())
    bare = Seq2Seq(plain.encoder, plain.bridge, plain.decoder)
    assert keys == list(bare.state_dict())
    assert not any("self_attention" in k for k in keys)
    for name, value in plain.state_dict().items():
        assert torch.equal(with_blocks.state_dict()[name], value), name
    src, lengths, mask = _batch()
    memory, final = plain.encoder(src, lengths)
    enc = plain.encode(src, lengths, mask)
    assert torch.equal(enc.memory, memory)
    assert torch.equal(enc.final, plain.bridge(final[-1]))
    a, b = plain(src, lengths, mask, src[:, :3]), bare(src, lengths, mask, src[:, :3])
    assert torch.equal(a.logits, b.logits) and a.self_attention is None


def test_an_ensemble_of_one_gives_the_models_self_attention():
    """(Beam search with blocks: tests/test_search.py::test_beam_one_equals_greedy.)"""
    torch.manual_seed(0)
    model = build_model(_cfg(layers=1), V, V).eval()
    src, lengths, mask = _batch()
    one = Ensemble([model]).eval()
    a = model(src, lengths, mask, src[:, :3], self_weights=True)
    b = one(src, lengths, mask, src[:, :3], self_weights=True)
    assert_close(b.self_attention, a.self_attention)
    two = Ensemble([model, model]).eval()
    assert two(src, lengths, mask, src[:, :3], self_weights=True).self_attention is None


def test_bf16_autocast_runs_the_blocks():
    model = _model(layers=1)
    src, lengths, mask = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(src, lengths, mask, src[:, :3], self_weights=True)
    assert torch.isfinite(out.logits.float()).all()
    assert_close(
        out.self_attention.float().sum(-1)[0], torch.ones(1, 2, 6), atol=1e-2, rtol=0
    )


# --------------------------------------------------------------- settings
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("heads", 3, "model.encoder.self_attention.heads=3 does not divide"),
        ("layers", -1, "model.encoder.self_attention.layers=-1: must be >= 0"),
        ("ffn", 0, "model.encoder.self_attention.ffn=0: must be > 0"),
        ("dropout", 1.0, "model.encoder.self_attention.dropout=1.0: must be in [0, 1)"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_key(field, value, message):
    cfg = _cfg()
    setattr(cfg.encoder.self_attention, field, value)
    with pytest.raises(ConfigValueError, match=re.escape(message)) as err:
        build_model(cfg, V, V)
    assert "\n" not in str(err.value)


def test_align_refuses_views_the_model_cannot_show():
    plain = OmegaConf.structured(_cfg(layers=0))
    blocks = OmegaConf.structured(_cfg(layers=2, heads=2))

    def refused(model_cfg, match, **align):
        cfg = OmegaConf.create({"view": "self", "layer": None, "head": None} | align)
        with pytest.raises(ConfigValueError, match=match) as err:
            check_model_view(cfg, model_cfg)
        assert "\n" not in str(err.value)

    refused(plain, r"no self-attention \(model.encoder.self_attention.layers=0\)")
    refused(
        blocks, r"layer=2 is out of range.*layers=2, so layer takes 0 to 1", layer=2
    )
    refused(blocks, r"head=2 is out of range.*heads=2", head=2)
    refused(blocks, r"head=0: this checkpoint's cross-attention", view="cross", head=0)
    ok = OmegaConf.create({"view": "self", "layer": 1, "head": 1})
    check_model_view(ok, blocks)


# ----------------------------------------------------- a tiny trained model
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """4 steps of a tiny phrasebook model with one block, validated once."""
    tmp = tmp_path_factory.mktemp("self_attention")
    cfg = tiny_train_config(
        tmp / "cache",
        "model.encoder.self_attention.layers=1",
        "model.encoder.self_attention.heads=2",
        "trainer.max_steps=4",
        "trainer.valid_every=4",
        "trainer.alignment_samples=1",
        "trainer.valid_max_sentences=8",
        "trainer.keep_last=2",
    )
    build_trainer(cfg, tmp / "run").fit()
    return tmp / "run"


def test_tensorboard_holds_each_heads_self_attention(trained):
    acc = EventAccumulator(str(trained / "tb"), size_guidance={"images": 0})
    acc.Reload()
    tags = acc.Tags()["images"]
    assert {t for t in tags if t.startswith("self_attention/")} == {
        "self_attention/layer0_head0/0",
        "self_attention/layer0_head1/0",
    }
    assert "alignment/0" in tags


def test_translator_maps_carry_the_self_attention_and_averaging_works(
    trained, tmp_path
):
    best = trained / "checkpoints" / "best.pt"
    translator = Translator.from_checkpoint(best, device="cpu")
    [att] = translator.attention(["the small blue chairs"])
    n = len(att.src_tokens)
    assert att.self_attention.shape == (1, 2, n, n)
    np.testing.assert_allclose(att.self_attention.sum(-1), 1.0, atol=1e-5)
    assert np.asarray(att.to_dict()["self_attention"]).shape == (1, 2, n, n)
    kept = sorted((trained / "checkpoints").glob("step*.pt"))
    assert kept, "trainer.keep_last=2 keeps the validated checkpoints"
    avg = write_average([best, *kept], tmp_path / "avg.pt")
    averaged = Translator.from_checkpoint(avg, device="cpu")
    assert averaged.attention(["the small blue chairs"])[0].self_attention is not None


def test_a_checkpoint_from_before_the_setting_loads_and_resumes(trained, tmp_path):
    """A config without ``model.encoder.self_attention`` reads as 0 layers."""
    state = load_checkpoint(trained / "checkpoints" / "best.pt")
    del state["config"]["model"]["encoder"]["self_attention"]
    state["model"] = {
        k: v for k, v in state["model"].items() if not k.startswith("self_attention")
    }
    old = save_checkpoint(tmp_path / "old.pt", state)
    translator = Translator.from_checkpoint(old, device="cpu")
    assert translator.model.self_attention is None
    assert translator.attention(["I love you"])[0].self_attention is None
    cfg = OmegaConf.merge(translator.config, {"model": {"encoder": {}}})
    cfg.model.encoder.self_attention.layers = 0
    check_resumable(state, cfg, state["tokenizer"], old)


def _attribution_by_hand(translator, src, tgt, layer: int, alpha: float):
    """``A ⊙ ∂F/∂W`` at ``W = α A`` for block ``layer``, one α, through a patched
    ``attend`` (not the block's hook): the term that the Riemann sum averages."""
    from seq2seq.model import self_attention as module

    model = translator.model.eval()
    batch = collate([(0, src, without_eos(tgt))])
    with torch.no_grad():
        fixed = model(
            batch.src,
            batch.src_lengths,
            batch.src_mask,
            batch.tgt_in,
            self_weights=True,
        ).self_attention[0, layer]
    leaf = (alpha * fixed).requires_grad_(True)
    calls, original = [], module.attend

    def patched(q, k, v, mask, need_weights=False, dropout=0.0):
        calls.append(1)
        if len(calls) - 1 != layer:
            return original(q, k, v, mask, need_weights, dropout)
        return leaf[None] @ v, leaf[None]

    module.attend = patched
    try:
        logits = model(batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in)
    finally:
        module.attend = original
    lp = torch.log_softmax(logits.logits.float(), -1)
    total = lp.gather(2, batch.tgt_out.unsqueeze(2)).sum()
    (grad,) = torch.autograd.grad(total, leaf)
    return fixed * grad


def test_self_attention_attribution_is_the_integrated_gradient_of_the_weights(
    trained,
):
    """Against the definition, α by α in batches of one: |A ⊙ mean_α ∂F/∂(αA)|,
    each head's largest 1; one step is the plain A ⊙ ∂F/∂A."""
    translator = Translator.from_checkpoint(trained / "checkpoints" / "best.pt")
    [src] = translator.tokenizer.encode_src(["the small blue chairs"])
    [tgt] = translator.tokenizer.encode_tgt(["les petites chaises bleues"])
    steps = 4
    got = self_attention_attribution(translator, src, tgt, steps=steps)
    n = len(src) + 1  # with the source EOS
    assert got.shape == (1, 2, n, n)
    terms = [_attribution_by_hand(translator, src, tgt, 0, (i + 1) / steps)
             for i in range(steps)]  # fmt: skip
    want = (sum(terms) / steps).abs()
    top = want.amax(dim=(-2, -1), keepdim=True)
    assert_close(got[0], want / top, rtol=1e-4, atol=1e-6)
    assert_close(got.amax(dim=(-2, -1)), torch.ones(1, 2))
    one = self_attention_attribution(translator, src, tgt, steps=1)[0]
    last = terms[-1].abs()  # α = 1
    assert_close(
        one, last / last.amax(dim=(-2, -1), keepdim=True), rtol=1e-4, atol=1e-6
    )
    translator.model.self_attention = None
    with pytest.raises(ConfigValueError, match="no self-attention blocks"):
        self_attention_attribution(translator, src, tgt)


def test_seq2seq_align_draws_a_chosen_layer_and_head(trained):
    best = trained / "checkpoints" / "best.pt"
    common = [f"checkpoint={best}", "text=the small blue chairs", "view=self"]
    out = trained.parent / "align"
    run_script(
        out.parent,
        "seq2seq-align",
        *common,
        "layer=0",
        "head=1",
        "format=png",
        f"hydra.run.dir={out}/png",
    )
    assert (out / "png" / "alignments" / "alignment_0.png").stat().st_size > 1000
    run_script(
        out.parent,
        "seq2seq-align",
        *common,
        "layer=0",
        "head=1",
        "format=json",
        f"hydra.run.dir={out}/json",
    )
    [record] = json.loads((out / "json" / "alignments.json").read_text())
    assert record["src_tokens"] == record["tgt_tokens"]
    weights = np.array(record["weights"])
    assert weights.shape == (len(record["src_tokens"]),) * 2
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)
    assert "layer=0 head=1" in record["title"]
    bad = run_script(
        out.parent,
        "seq2seq-align",
        *common,
        "head=7",
        f"hydra.run.dir={out}/bad",
        check=False,
    )
    assert bad.returncode == 2
    assert "head=7 is out of range" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    attributed = run_script(
        out.parent,
        "seq2seq-align",
        *common,
        "head=1",
        "attribution=true",
        "format=json",
        f"hydra.run.dir={out}/attr",
    )
    assert attributed.stdout.count("Spearman rho(attention, attribution)") == 1
    [record] = json.loads((out / "attr" / "alignments.json").read_text())
    assert record["attribution_method"] == "attention attribution"
    attr = np.array(record["attribution"])
    assert attr.shape == weights.shape
    assert attr.min() >= 0 and np.isclose(attr.max(), 1.0)
    assert -1.0 <= record["spearman"] <= 1.0
    html = run_script(
        out.parent,
        "seq2seq-align",
        *common,
        "attribution=true",
        "format=html",
        f"hydra.run.dir={out}/attr_html",
        check=False,
    )
    assert html.returncode == 2 and "format=png, terminal, json or npy" in html.stderr


def test_guided_alignment_trains_the_blocks_too(tmp_path):
    """The guided loss reads the cross-attention over the blocks' memory; a short
    run with it trains the blocks to finite, moved weights."""
    cfg = tiny_train_config(
        tmp_path / "cache",
        "model.encoder.self_attention.layers=1",
        "trainer.guided_alignment=1.0",
        "trainer.max_steps=2",
        "trainer.valid_every=100",
        "evaluate_test=false",
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    before = {
        k: v.clone()
        for k, v in trainer.model.state_dict().items()
        if k.startswith("self_attention")
    }
    trainer.fit()
    after = trainer.model.state_dict()
    assert all(torch.isfinite(after[k]).all() for k in before)
    assert any(not torch.equal(after[k], v) for k, v in before.items())
