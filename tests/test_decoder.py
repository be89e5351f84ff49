"""Decoder and Seq2Seq: teacher forcing equals a loop of ``step`` for every attention ×
style × input feeding; the parallel Luong path equals its step path; config checks."""

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from seq2seq.config import AttentionConfig, DecoderConfig, EncoderConfig, ModelConfig
from seq2seq.data.tokenizer import BOS_ID, PAD_ID, UNK_ID
from seq2seq.model.attention import ATTENTIONS
from seq2seq.model.decoder import word_dropout
from seq2seq.model.loss import token_loss
from seq2seq.model.seq2seq import build_model
from seq2seq.model.stepped_gru import StackedGRU
from tests.conftest import DEVICES

V_SRC, V_TGT = 15, 17


def tiny_config(attention="bahdanau", style=None, feeding=True, **model_kw):
    return ModelConfig(
        emb_dim=6,
        emb_dropout=0.3,
        encoder=EncoderConfig(hidden_size=4, layers=2, dropout=0.3),
        decoder=DecoderConfig(
            style=style, hidden_size=8, layers=2, dropout=0.3, input_feeding=feeding
        ),
        attention=AttentionConfig(type=attention, heads=2),
        **model_kw,
    )


def tiny_batch():
    torch.manual_seed(5)
    lengths = torch.tensor([5, 3, 1])
    mask = torch.arange(5)[None] < lengths[:, None]
    src = torch.randint(4, V_SRC, (3, 5)).masked_fill(~mask, PAD_ID)
    tgt_in = torch.randint(4, V_TGT, (3, 4))
    tgt_in[:, 0] = BOS_ID
    return src, lengths, mask, tgt_in


def _model(cfg):
    torch.manual_seed(0)
    return build_model(cfg, V_SRC, V_TGT).eval()


COMBOS = [
    (att, style, feeding)
    for att in ATTENTIONS
    for style in ("bahdanau", "luong")
    for feeding in (False, True)
]


@pytest.mark.parametrize(("attention", "style", "feeding"), COMBOS)
def test_forward_equals_step_loop(attention, style, feeding):
    model = _model(tiny_config(attention, style, feeding))
    src, lengths, mask, tgt_in = tiny_batch()
    with torch.no_grad():
        out = model(src, lengths, mask, tgt_in)
        assert out.logits.shape == (3, 4, V_TGT)
        assert out.attention.shape == (3, 4, 5)
        state = model.init_state(model.encode(src, lengths, mask))
        for t in range(4):
            log_probs, state, weights = model.step(tgt_in[:, t], state)
            assert_close(log_probs, F.log_softmax(out.logits[:, t], dim=-1))
            assert_close(weights, out.attention[:, t])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attention", ["luong_general", "multihead", "bahdanau"])
def test_parallel_luong_path_equals_its_step_path(attention, device):
    """One GRU call over all steps (cuDNN's on CUDA) equals the step loop."""
    model = _model(tiny_config(attention, "luong", feeding=False)).to(device)
    src, lengths, mask, tgt_in = (t.to(device) for t in tiny_batch())
    dec = model.decoder
    with torch.no_grad():
        state = model.init_state(model.encode(src, lengths, mask))
        emb = dec.embed(tgt_in)
        fast = dec.fast_features(emb, state)
        loop = dec.reference_features(emb, state)  # the definition: a step loop
    assert_close(fast[0], loop[0])  # features
    assert_close(fast[1], loop[1])  # weights
    if attention == "multihead":
        assert_close(fast[2], loop[2])  # per-head weights


def test_multihead_returns_heads_and_their_mean():
    model = _model(tiny_config("multihead", "luong"))
    src, lengths, mask, tgt_in = tiny_batch()
    out = model(src, lengths, mask, tgt_in)
    assert out.head_attention.shape == (3, 2, 4, 5)
    assert_close(out.head_attention.mean(1), out.attention)
    assert_close(out.attention.sum(-1), torch.ones(3, 4))


def test_no_attention_returns_zero_weights():
    out = _model(tiny_config("none"))(*tiny_batch())
    assert torch.equal(out.attention, torch.zeros(3, 4, 5))
    assert out.head_attention is None


@pytest.mark.parametrize("emb_dim", [6, 8])
def test_tied_embeddings(emb_dim):
    cfg = tiny_config("luong_general", "luong", tie_embeddings=True)
    cfg.emb_dim = emb_dim  # 6: a projection 8 → 6 before the tied output; 8: none
    model = _model(cfg)
    dec = model.decoder
    assert dec.output.proj.weight is dec.embedding.weight
    assert isinstance(dec.output.pre, torch.nn.Linear) == (emb_dim != 8)
    out = model(*tiny_batch())
    out.logits.sum().backward()
    assert dec.embedding.weight.grad is not None


def test_scheduled_sampling():
    model = _model(tiny_config("bahdanau"))
    src, lengths, mask, tgt_in = tiny_batch()
    with torch.no_grad():
        gold = model(src, lengths, mask, tgt_in)
        never = model(src, lengths, mask, tgt_in, sampling_ratio=1e-12)
        always = model(src, lengths, mask, tgt_in, sampling_ratio=1.0)
        state = model.init_state(model.encode(src, lengths, mask))
        prev = tgt_in[:, 0]
        for t in range(4):
            log_probs, state, _ = model.step(prev, state)
            assert_close(log_probs, F.log_softmax(always.logits[:, t], -1))
            prev = log_probs.argmax(-1)
    assert_close(never.logits, gold.logits)


def test_word_dropout():
    tokens = torch.tensor([[BOS_ID, 5, 6, 7, PAD_ID]] * 200)
    assert torch.equal(word_dropout(tokens, 0.5, training=False), tokens)
    dropped = word_dropout(tokens, 0.5, training=True)
    changed = dropped != tokens
    assert (dropped[changed] == UNK_ID).all()
    assert not changed[:, 0].any() and not changed[:, 4].any()
    assert 0.4 < changed[:, 1:4].float().mean() < 0.6


def test_same_seed_same_model():
    a, b = _model(tiny_config()), _model(tiny_config())
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert (a.decoder.embedding.weight[PAD_ID] == 0).all()


def test_style_defaults_to_the_attention_style():
    cfg = tiny_config("luong_general")
    cfg.attention.style = "luong"
    assert _model(cfg).decoder.style == "luong"
    cfg.decoder.style = "bahdanau"
    assert _model(cfg).decoder.style == "bahdanau"


@pytest.mark.parametrize(
    ("style", "feeding", "rnmt", "cls", "parts"),
    [
        ("bahdanau", True, False, "BahdanauDecoder", "attention rnn feature"),
        ("luong", True, False, "LuongDecoder", "attention rnn feature"),
        ("luong", False, True, "RNMTDecoder", "attention rnn upper feature"),
    ],
)
def test_each_style_keeps_its_parameters_in_the_checkpoints_order(
    style, feeding, rnmt, cls, parts
):
    """A checkpoint's weights are found by name and its optimizer state by position:
    each style's class (one module each) registers its parts in the same order,
    whatever module holds it. RNMT+ is the Luong style with context_to_layers."""
    cfg = tiny_config("luong_general", style, feeding)
    cfg.decoder.context_to_layers = rnmt
    model = _model(cfg)
    assert type(model.decoder).__name__ == cls
    assert model.decoder.style == style
    order = []
    for name, _ in model.decoder.named_parameters():
        if name.split(".")[0] not in order:
            order.append(name.split(".")[0])
    assert order == ["embedding", *parts.split(), "output"]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("attention.type", "fancy", "luong_general"),
        ("decoder.style", "transformer", "bahdanau"),
        ("bridge", "linear", "zero"),
        ("emb_dropout", 1.5, "emb_dropout"),
        ("decoder.hidden_size", 0, "decoder.hidden_size"),
    ],
)
def test_bad_config_values_raise(field, value, match):
    cfg = tiny_config()
    *path, last = field.split(".")
    obj = cfg
    for part in path:
        obj = getattr(obj, part)
    setattr(obj, last, value)
    with pytest.raises(ValueError, match=match):
        build_model(cfg, V_SRC, V_TGT)


def test_training_step_reduces_loss():
    torch.manual_seed(0)
    model = build_model(tiny_config("luong_dot", "luong"), V_SRC, V_TGT)
    src, lengths, mask, tgt_in = tiny_batch()
    tgt_out = torch.roll(tgt_in, -1, dims=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        logits = model(src, lengths, mask, tgt_in).logits
        loss = F.cross_entropy(logits.reshape(-1, V_TGT), tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.7


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layers", [1, 2])
def test_stacked_gru_equals_nn_gru_with_gradients(layers, device):
    """On CUDA ``nn.GRU`` is cuDNN's kernel: the hand-stepped GRU must equal it."""
    torch.manual_seed(0)
    rnn = torch.nn.GRU(6 + 3, 5, num_layers=layers, batch_first=True).to(device)
    emb, extra = torch.randn(2, 4, 6), torch.randn(2, 4, 3)
    emb, extra = emb.to(device), extra.to(device)
    h0 = torch.randn(layers, 2, 5).to(device)
    ref, _ = rnn(torch.cat([emb, extra], dim=-1), h0)
    ref_grads = torch.autograd.grad(ref.square().sum(), list(rnn.parameters()))
    gru = StackedGRU(rnn, 6, training=False)
    gates = gru.embed_gates(emb.transpose(0, 1))  # (T, B, 3H), hoisted
    hidden, outs = list(h0.unbind(0)), []
    for t, gi in enumerate(gates.unbind(0)):
        hidden = gru.step(gi, extra[:, t], hidden)
        outs.append(hidden[-1])
    out = torch.stack(outs, dim=1)
    assert_close(out, ref)
    grads = torch.autograd.grad(out.square().sum(), list(rnn.parameters()))
    # cuDNN sums the gradient over the time steps in another order than autograd
    # over the hand-stepped cells: up to 2e-5 apart in fp32 on an H200 (2026-12-04)
    tol = {"rtol": 1e-3, "atol": 1e-4} if device == "cuda" else {}
    for g, r in zip(grads, ref_grads, strict=True):
        assert_close(g, r, **tol)


@pytest.mark.parametrize(("attention", "style", "feeding"), COMBOS)
def test_one_layer_forward_equals_step_loop_with_gradients(attention, style, feeding):
    """The reference model's decoder has one layer: the hoisted loop of the training
    forward equals a loop of ``step`` in value and gradient."""
    cfg = tiny_config(attention, style, feeding)
    cfg.decoder.layers = 1
    model = _model(cfg)
    forward_equals_reference_steps(model, tiny_batch(), model.decoder.rnn.weight_hh_l0)


def forward_equals_reference_steps(model, batch, weight) -> None:
    """Assert that teacher forcing (``model(...)``) equals ``reference_step`` at each
    target step: logits, attention weights and the gradient of ``weight``."""
    src, lengths, mask, tgt_in = batch
    out = model(src, lengths, mask, tgt_in)
    (want,) = torch.autograd.grad(out.logits.square().sum(), weight)
    dec = model.decoder
    state = model.init_state(model.encode(src, lengths, mask))
    logits = []
    for t in range(tgt_in.size(1)):
        feat, state, att = dec.reference_step(dec.embed(tgt_in[:, t]), state)
        logits.append(dec.output(feat))
        assert_close(att.weights, out.attention[:, t])
    loop = torch.stack(logits, dim=1)
    assert_close(loop, out.logits)
    (grad,) = torch.autograd.grad(loop.square().sum(), weight)
    assert_close(grad, want)


@pytest.mark.parametrize(("attention", "style", "feeding"), COMBOS)
def test_bf16_autocast_gradients_reach_fp32_weights(attention, style, feeding):
    """Under CPU bf16 autocast the step loop's weights are cast once per batch
    (model/precision.py): the gradients still arrive, in fp32, close to fp32's."""
    model = _model(tiny_config(attention, style, feeding))
    src, lengths, mask, tgt_in = tiny_batch()
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(bf16: bool):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(src, lengths, mask, tgt_in)
        return torch.autograd.grad(out.logits.float().square().mean(), params)

    for name_p, low, full in zip(params, grads(True), grads(False), strict=True):
        assert low.dtype == torch.float32
        cos = F.cosine_similarity(low.flatten(), full.flatten(), dim=0)
        assert cos > 0.99 or full.norm() < 1e-6, name_p.shape


@pytest.mark.parametrize("sampling", [0.0, 0.5])
@pytest.mark.parametrize(("attention", "style", "feeding"), COMBOS[::3])
def test_logits_for_the_target_rows_only(attention, style, feeding, sampling):
    """``rows`` (``Batch.tgt_rows``) skips the padding in the output layer: the
    logits of those rows, the loss and every gradient equal the padded path's."""
    model = _model(tiny_config(attention, style, feeding))
    src, lengths, mask, tgt_in = tiny_batch()
    tgt_out = torch.randint(4, V_TGT, tgt_in.shape)
    tgt_out[1, 2:] = PAD_ID
    tgt_out[2, 1:] = PAD_ID
    rows = (tgt_out != PAD_ID).view(-1).nonzero().squeeze(1)
    params = [p for p in model.parameters() if p.requires_grad]

    def run(use_rows: bool):
        torch.manual_seed(3)  # the same scheduled-sampling draws for both
        out = model(src, lengths, mask, tgt_in, sampling, rows if use_rows else None)
        targets = tgt_out.view(-1)[rows] if use_rows else tgt_out
        loss = token_loss(out.logits, targets, 0.1)
        return out, loss, torch.autograd.grad(loss, params)

    full, full_loss, full_grads = run(False)
    part, part_loss, part_grads = run(True)
    assert part.logits.shape == (len(rows), V_TGT)
    assert_close(part.logits, full.logits.flatten(0, 1)[rows])
    assert_close(part.attention, full.attention)
    assert_close(part_loss, full_loss)
    for g, r in zip(part_grads, full_grads, strict=True):
        assert_close(g, r)
