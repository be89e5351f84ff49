"""DeepGRU: with every option off it is ``nn.GRU``; per-gate layer norm normalizes
each gate's pre-activations; a residual stack of zero layers is the identity; a
transition that keeps its state is depth 1; the model's fast paths equal its
reference step with each option on; and the options are off by default."""

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.testing import assert_close

from seq2seq.config import ModelConfig
from seq2seq.config_checks import ConfigValueError
from seq2seq.decoding.shortcuts import SearchStep
from seq2seq.decoding.translator import Translator
from seq2seq.model.deep_gru import DeepGRU, gate_norm
from seq2seq.model.encoder import BiGRUEncoder
from seq2seq.model.seq2seq import build_model
from tests.conftest import DEVICES
from tests.helpers import build_trainer, tiny_train_config
from tests.test_decoder import (
    V_SRC,
    V_TGT,
    _model,
    forward_equals_reference_steps,
    tiny_batch,
    tiny_config,
)

LENGTHS = torch.tensor([6, 4, 1])
MASK = torch.arange(6)[None] < LENGTHS[:, None]

# Each option alone and all together, as ModelConfig fields
OPTIONS = {
    "layer_norm": {"layer_norm": True},
    "residual": {"residual": True, "layers": 3},
    "transition": {"transition_depth": 2},
    "all": {"layer_norm": True, "residual": True, "layers": 3, "transition_depth": 2},
}


def _pair(bidirectional: bool, layers: int) -> tuple[nn.GRU, DeepGRU]:
    torch.manual_seed(0)
    gru = nn.GRU(5, 7, layers, batch_first=True, bidirectional=bidirectional)
    deep = DeepGRU(5, 7, layers, bidirectional=bidirectional)
    deep.load_state_dict(gru.state_dict())  # nn.GRU's names, nothing more
    return gru, deep


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 3])
def test_every_option_off_equals_nn_gru_with_gradients(bidirectional, layers, device):
    """On CUDA ``nn.GRU`` is cuDNN's: equal up to its summation order."""
    gru, deep = (m.to(device) for m in _pair(bidirectional, layers))
    x, mask = torch.randn(3, 6, 5, device=device), MASK.to(device)
    packed, h_ref = gru(pack_padded_sequence(x, LENGTHS, batch_first=True))
    out_ref, _ = pad_packed_sequence(packed, batch_first=True, total_length=6)
    out, h = deep(x, None, mask)
    tol = {} if device == "cpu" else {"rtol": 1e-4, "atol": 1e-4}
    assert_close(out, out_ref, **tol)
    assert_close(h, h_ref, **tol)
    want = torch.autograd.grad(out_ref.square().sum(), gru.weight_hh_l0)
    got = torch.autograd.grad(out.square().sum(), deep.weight_hh_l0)
    assert_close(got, want, **tol)
    h0 = torch.randn(layers * (1 + bidirectional), 3, 7, device=device)  # a state
    assert_close(deep(x, h0)[0], gru(x, h0)[0], **tol)


def test_gate_norm_gives_each_gate_zero_mean_and_unit_variance():
    torch.manual_seed(0)
    scale = torch.tensor([5.0, 0.5, 30.0]).repeat_interleave(16)
    pre = torch.randn(4, 3 * 16) * scale + torch.tensor(
        [3.0, -2.0, 40.0]
    ).repeat_interleave(16)
    normed = gate_norm(pre, torch.ones(48)).view(4, 3, 16)
    assert_close(normed.mean(-1), torch.zeros(4, 3), atol=1e-5, rtol=0)
    assert_close(normed.var(-1, unbiased=False), torch.ones(4, 3), atol=1e-3, rtol=0)
    gates = pre.view(4, 3, 16)  # the definition, per gate: (a − μ) / √(σ² + ε)
    var, mean = torch.var_mean(gates, -1, unbiased=False, keepdim=True)
    assert_close(normed, (gates - mean) / torch.sqrt(var + 1e-5))
    gain = torch.rand(48) + 0.5
    assert_close(gate_norm(pre, gain), normed.flatten(1) * gain)


def test_layer_norm_makes_the_cell_blind_to_the_scale_of_its_weights():
    """LN(c·W x) = LN(W x) for c > 0, on the input and the recurrent side: scaling
    every weight matrix changes nothing with layer norm (up to ε), and much
    without."""
    for layer_norm, same in ((True, True), (False, False)):
        torch.manual_seed(0)
        deep = DeepGRU(5, 7, 2, bidirectional=True, layer_norm=layer_norm)
        x = torch.randn(3, 6, 5)
        before = deep(x, None, MASK)[0]
        with torch.no_grad():
            for name, param in deep.named_parameters():
                if name.startswith("weight"):
                    param.mul_(3.0)
        after = deep(x, None, MASK)[0]
        change = (after - before).abs().max().item()
        assert change < 1e-3 if same else change > 0.05


def test_gradcheck_with_every_option_on():
    torch.manual_seed(0)
    deep = DeepGRU(
        3, 4, 3, bidirectional=True, layer_norm=True, transition_depth=2, residual=True
    ).double()
    with torch.no_grad():  # gains away from 1, so their gradients are general
        for name, param in deep.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    mask = MASK[:, :4]
    x = torch.randn(3, 4, 3, dtype=torch.double, requires_grad=True)
    names = ["norm_hh_l0", "norm_ih_l1_reverse", "weight_hh_l2_t1", "bias_ih_l0_t1"]
    params = {n: deep.get_parameter(n).detach().clone().requires_grad_() for n in names}

    def run(x, *values):
        return functional_call(
            deep, dict(zip(names, values, strict=True)), (x, None, mask)
        )

    assert torch.autograd.gradcheck(run, (x, *params.values()), fast_mode=True)


def test_residual_stack_of_zero_layers_is_the_identity():
    """From the third layer up a layer adds to its input: layers that output zeros
    leave the two-layer stack's output as it is (and without residual they do not)."""
    torch.manual_seed(0)
    two = DeepGRU(5, 7, 2, bidirectional=True, layer_norm=True)
    x = torch.randn(3, 6, 5)
    want = two(x, None, MASK)[0]
    for residual in (True, False):
        four = DeepGRU(5, 7, 4, 0.5, True, layer_norm=True, residual=residual).eval()
        state = four.state_dict()
        with torch.no_grad():
            for name, value in state.items():
                if name.endswith(("_l0", "_l1", "_l0_reverse", "_l1_reverse")):
                    value.copy_(two.state_dict()[name])
                elif name.startswith(("weight", "bias")):  # layers 3 and 4: h stays 0
                    value.zero_()
        got = four(x, None, MASK)[0]
        assert torch.allclose(got, want) == residual


def test_a_transition_that_keeps_its_state_is_depth_one():
    """A transition reads only the previous transition's state (no input weights);
    with its update gate held at 1 it returns that state: depth 2 equals depth 1."""
    torch.manual_seed(0)
    one = DeepGRU(5, 7, 2, bidirectional=True, layer_norm=True)
    two = DeepGRU(5, 7, 2, bidirectional=True, layer_norm=True, transition_depth=2)
    extra = set(two.state_dict()) - set(one.state_dict())
    assert not any(name.startswith("weight_ih") for name in extra)
    state = two.state_dict()
    state.update(one.state_dict())
    with torch.no_grad():
        for name in extra:
            if name.startswith("bias_ih"):
                state[name][7:14] = 60.0  # z = σ(60) = 1: h' = h
    two.load_state_dict(state)
    x = torch.randn(3, 6, 5)
    assert_close(two(x, None, MASK), one(x, None, MASK))


def test_options_are_off_by_default():
    model = build_model(ModelConfig(), V_SRC, V_TGT)
    assert type(model.encoder.rnn) is nn.GRU and type(model.decoder.rnn) is nn.GRU
    names = [n for n, _ in model.named_parameters()]
    assert not any("norm" in n or "_t1" in n for n in names)


def _configured(option: str, attention="luong_general", style="luong", feeding=False):
    cfg = tiny_config(attention, style, feeding)
    fields = dict(OPTIONS[option])
    layers = fields.pop("layers", None)
    depth = fields.pop("transition_depth", 1)
    cfg.encoder.transition_depth = cfg.decoder.transition_depth = depth
    if layers:
        cfg.encoder.layers = cfg.decoder.layers = layers
    for key, value in fields.items():
        setattr(cfg, key, value)
    return cfg


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize(
    ("attention", "style", "feeding", "device"),
    [
        ("luong_general", "luong", False, "cpu"),
        ("multihead", "luong", True, "cpu"),
        ("bahdanau", "bahdanau", False, "cpu"),
        pytest.param("luong_general", "luong", False, "cuda", marks=pytest.mark.gpu),
    ],
)
def test_teacher_forcing_equals_the_reference_steps(
    option, attention, style, feeding, device
):
    """The training forward (one DeepGRU call over all target steps without input
    feeding) equals ``step`` at each target step, in value and gradient; the search's
    step is ``reference_step`` (no shortcut for a DeepGRU)."""
    model = _model(_configured(option, attention, style, feeding)).to(device)
    assert isinstance(model.decoder.rnn, DeepGRU)
    assert isinstance(model.encoder.rnn, DeepGRU)
    src, lengths, mask, tgt_in = tiny_batch()
    batch = (src.to(device), lengths, mask.to(device), tgt_in.to(device))
    forward_equals_reference_steps(model, batch, model.decoder.rnn.weight_hh_l0)
    assert SearchStep(model).shortcut is None


@pytest.mark.parametrize("option", OPTIONS)
def test_sentence_alone_equals_sentence_in_padded_batch(option):
    fields = dict(OPTIONS[option])
    torch.manual_seed(0)
    enc = BiGRUEncoder(20, 5, 4, fields.pop("layers", 2), 0.3, **fields).eval()
    assert isinstance(enc.rnn, DeepGRU)
    src = torch.randint(4, 20, (3, 6)).masked_fill(~MASK, 0)
    memory, final = enc(src, LENGTHS)
    assert torch.equal(memory[~MASK], torch.zeros_like(memory[~MASK]))
    for i, n in enumerate(LENGTHS.tolist()):
        alone_mem, alone_final = enc(src[i : i + 1, :n], LENGTHS[i : i + 1])
        assert_close(alone_mem[0], memory[i, :n])
        assert_close(alone_final[:, 0], final[:, i])


def test_bf16_autocast_gradients_reach_fp32_weights():
    model = _model(_configured("all")).train()
    src, lengths, mask, tgt_in = tiny_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(src, lengths, mask, tgt_in)
    out.logits.float().square().sum().backward()
    for name, param in model.named_parameters():
        assert param.dtype == torch.float32
        assert param.grad is not None and param.grad.dtype == torch.float32, name


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("encoder.transition_depth", 0, r"model\.encoder\.transition_depth=0"),
        ("decoder.transition_depth", -1, r"model\.decoder\.transition_depth=-1"),
        ("residual", True, r"model\.residual=true .* model\.encoder\.layers=2"),
    ],
)
def test_bad_option_values_name_the_setting(field, value, match):
    cfg = tiny_config()
    *path, last = field.split(".")
    if path:
        setattr(getattr(cfg, path[0]), last, value)
    else:
        setattr(cfg, last, value)
    with pytest.raises(ConfigValueError, match=match):
        build_model(cfg, V_SRC, V_TGT)


def _rnmt(layers=3, **fields):
    cfg = tiny_config("luong_general", "luong", feeding=False)
    cfg.decoder.layers, cfg.decoder.context_to_layers = layers, True
    for key, value in fields.items():
        setattr(cfg, key, value)
    return _model(cfg)


@pytest.mark.parametrize("fields", [{}, {"layer_norm": True, "residual": True}])
def test_context_to_layers_teacher_forcing_equals_the_reference_steps(fields):
    """RNMT+'s decoder: each layer over all steps in one call equals ``step`` at each
    target step, in value and gradient, and the search runs ``reference_step``."""
    model = _rnmt(**fields)
    dec = model.decoder
    assert len(dec.upper) == 2 and dec.upper[0].input_size == 8 + 8  # [h; c]
    forward_equals_reference_steps(model, tiny_batch(), dec.upper[-1].weight_hh_l0)
    assert SearchStep(model).shortcut is None


def test_context_to_layers_attends_with_the_bottom_layer_and_feeds_every_layer():
    """The attention reads the bottom layer's states; the context reaches the top:
    its weights follow the bottom layer alone, and a changed context changes the
    features even where the bottom layer is the same."""
    model = _rnmt()
    dec, (src, lengths, mask, tgt_in) = model.decoder, tiny_batch()
    with torch.no_grad():
        state = model.init_state(model.encode(src, lengths, mask))
        emb = dec.embed(tgt_in)
        _, weights, _ = dec.fast_features(emb, state)
        low, _ = dec.rnn(emb, state.hidden[:1])
        assert_close(weights, dec.attention.attend(low, state.keys).weights)
        dec.feature.weight[:, :8] = 0.0  # the output layer's own view of c gone
        other = state._replace(keys=state.keys._replace(values=-state.keys.values))
        changed, _, _ = dec.fast_features(emb, other)
        plain, _, _ = dec.fast_features(emb, state)
    assert not torch.allclose(changed, plain)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"input_feeding": True}, "input_feeding=true"),
        ({"layers": 1}, "decoder.layers=1"),
        ({"style": "bahdanau"}, "style bahdanau"),
    ],
)
def test_context_to_layers_names_what_it_needs(fields, match):
    cfg = tiny_config("luong_general", "luong", feeding=False)
    cfg.decoder.context_to_layers = True
    for key, value in fields.items():
        setattr(cfg.decoder, key, value)
    with pytest.raises(ConfigValueError, match=match):
        build_model(cfg, V_SRC, V_TGT)


def test_every_option_trains_saves_translates_and_shows_its_attention(tmp_path):
    """End to end with every option on: the trainer trains and validates (attention
    pictures included, ``trainer.alignment_samples``), the checkpoint loads in a
    ``Translator`` that beam-searches, and its attention maps are distributions."""
    options = [
        "model/attention=luong_general",
        "model.decoder.input_feeding=false",
        "model.decoder.layers=2",
        "model.decoder.context_to_layers=true",
        "model.encoder.layers=3",
        "model.residual=true",
        "model.layer_norm=true",
        "model.encoder.transition_depth=2",
    ]
    budget = ["trainer.max_steps=4", "trainer.valid_every=4"]
    budget += ["trainer.valid_max_sentences=8", "trainer.alignment_samples=1"]
    cfg = tiny_train_config(tmp_path / "cache", *options, *budget)
    build_trainer(cfg, tmp_path / "run").fit()
    checkpoint = tmp_path / "run" / "checkpoints" / "last.pt"
    translator = Translator.from_checkpoint(checkpoint, device="cpu", beam_size=3)
    assert isinstance(translator.model.encoder.rnn, DeepGRU)
    assert isinstance(translator.model.decoder.rnn, DeepGRU)
    texts = ["good morning", "where is the station?"]
    assert len(translator.translate(texts)) == 2
    for amap in translator.attention(texts):
        assert amap.weights.shape == (len(amap.tgt_tokens), len(amap.src_tokens))
        assert np.allclose(amap.weights.sum(-1), 1.0, atol=1e-4)
