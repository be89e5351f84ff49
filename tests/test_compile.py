"""``trainer.compile``: the steps taken by hand through torch.compile (inductor, CPU):
the deep GRU's recurrent steps (``auto``, the default, on a CPU) and the decoder's
step loop (``true``).

The compiled body must compute what the eager one does, in value and gradient, and
one compilation must serve every batch shape (token buckets vary the batch size and
the source length from batch to batch). Under ``trainer.compile_mode=reduce-overhead``
the loop's batch and source length are padded to ``trainer.compile_bucket``
multiples: the padding must change neither the logits, the attention, the loss nor
the gradients. (On CPU reduce-overhead records no CUDA graphs; ``tests/test_gpu.py``
runs it on CUDA.)"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from seq2seq.data.tokenizer import BOS_ID, PAD_ID
from seq2seq.model import decoder as decoder_module
from seq2seq.model import loop_padding
from seq2seq.model.deep_gru import DeepGRU
from seq2seq.model.loss import token_loss
from seq2seq.model.seq2seq import build_model
from seq2seq.training import runtime
from seq2seq.training.runtime import check_compile_toolchain
from tests.conftest import DEVICES
from tests.helpers import build_trainer, tiny_train_config
from tests.test_decoder import V_SRC, V_TGT, tiny_config


def _batch(b: int, s: int, t: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, s + 1, (b,), generator=gen)
    lengths[0] = s
    mask = torch.arange(s)[None] < lengths[:, None]
    src = torch.randint(4, V_SRC, (b, s), generator=gen).masked_fill(~mask, PAD_ID)
    tgt_in = torch.randint(4, V_TGT, (b, t), generator=gen)
    tgt_in[:, 0] = BOS_ID
    return src, lengths, mask, tgt_in


def _needs_toolchain(device: str) -> None:
    """Skip, saying what is missing, where torch.compile cannot build kernels (a C++
    compiler on CPU, Triton on CUDA)."""
    try:
        check_compile_toolchain(torch.device(device))
    except RuntimeError as err:
        pytest.skip(str(err))


def _on(device, batch):
    return tuple(t.to(device) for t in batch)


def _logits_and_grads(model, batch):
    out = model(*batch)
    params = [p for p in model.parameters() if p.requires_grad]
    return out.logits, torch.autograd.grad(out.logits.square().sum(), params)


@pytest.mark.parametrize(
    ("attention", "style"), [("bahdanau", None), ("luong_general", None)]
)
def test_compiled_step_loop_equals_eager_for_every_batch_shape(attention, style):
    """(On CUDA, tests/test_gpu.py trains with the compiled loop in either mode.)"""
    _needs_toolchain("cpu")
    torch.manual_seed(0)
    model = build_model(tiny_config(attention, style, feeding=True), V_SRC, V_TGT)
    model.eval()  # no dropout: inductor draws other random numbers than eager
    assert model.decoder.has_step_loop
    # Real batches have B·S > 32 (below it inductor picks another matmul kernel), and
    # B, S differ from the model's sizes (4, 6, 8, 24 here): a size equal to a fixed
    # one shares its symbol and would be specialised (torch's "duck sizing").
    batches = [_batch(9, 5, 4, seed=0), _batch(11, 7, 3, seed=1), _batch(13, 10, 5, 2)]
    for i, batch in enumerate(batches):
        model.decoder.compile_loop = False
        ref_logits, ref_grads = _logits_and_grads(model, batch)
        model.decoder.compile_loop = True
        # After the first batch, no shape may trigger a new compilation.
        with torch._dynamo.config.patch(error_on_recompile=i > 0):
            logits, grads = _logits_and_grads(model, batch)
        assert_close(logits, ref_logits, rtol=1e-4, atol=1e-5)
        for g, r in zip(grads, ref_grads, strict=True):
            assert_close(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        {"transition_depth": 2},  # the en→de and en→fr recipes
        {"layer_norm": True, "residual": True, "layers": 3, "transition_depth": 2},
    ],
    ids=["deep transition", "all"],
)
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_deep_gru_step_equals_eager_for_every_batch_shape(options, device):
    """``DeepGRU``'s time step through torch.compile (without layer norm: the
    recurrence's forward and backward steps, ``trainer.compile=auto``'s scope): the
    same outputs, final states and gradients as eager, bidirectional with padding,
    one compilation for every batch shape. In float64, so that a difference is a
    bug, not rounding (layer norm over a few units amplifies float32's)."""
    _needs_toolchain(device)
    torch.manual_seed(0)
    rnn = DeepGRU(
        6, 5, options.get("layers", 2), 0.0, True, options.get("layer_norm", False),
        options["transition_depth"], options.get("residual", False),
    ).double().to(device)  # fmt: skip
    params = list(rnn.parameters())
    for i, (b, t) in enumerate([(9, 7), (11, 4), (13, 10)]):
        x = torch.randn(b, t, 6, dtype=torch.float64, requires_grad=True)
        x = x.to(device).detach().requires_grad_()
        lengths = torch.randint(1, t + 1, (b,))
        lengths[0] = t
        mask = (torch.arange(t)[None] < lengths[:, None]).to(device)
        outputs = []
        for mode in (None, "default"):
            rnn.compile_mode = mode
            with torch._dynamo.config.patch(error_on_recompile=i > 0 and bool(mode)):
                out, h_n = rnn(x, mask=mask)
            loss = out.square().sum() + h_n.sin().sum()
            outputs.append((out, h_n, torch.autograd.grad(loss, [x, *params])))
        (out, h_n, grads), (ref_out, ref_h, ref_grads) = outputs[1], outputs[0]
        assert_close(out, ref_out, rtol=1e-9, atol=1e-10)
        assert_close(h_n, ref_h, rtol=1e-9, atol=1e-10)
        for g, r in zip(grads, ref_grads, strict=True):
            assert_close(g, r, rtol=1e-9, atol=1e-10)


def test_compile_steps_names_what_compiles():
    deep = tiny_config("luong_general", "luong", feeding=False)
    deep.encoder.transition_depth = deep.decoder.transition_depth = 2
    model = build_model(deep, V_SRC, V_TGT)
    parts = model.compile_steps()
    assert parts == ["the deep GRU time steps (encoder.rnn, decoder.rnn)"]
    assert {m.compile_mode for m in model.modules() if isinstance(m, DeepGRU)} == {
        "default"
    }
    model.eager_steps()
    assert {m.compile_mode for m in model.modules() if isinstance(m, DeepGRU)} == {None}
    plain = build_model(tiny_config("luong_general", "luong", False), V_SRC, V_TGT)
    assert plain.compile_steps() == []  # nn.GRU, no step loop: nothing by hand
    fed = build_model(tiny_config("bahdanau"), V_SRC, V_TGT)
    assert fed.compile_steps() == ["the decoder's step loop"]


def test_compile_steps_of_the_recurrence_scope_leave_the_rest_eager():
    """``trainer.compile=auto``'s scope: the deep GRUs without layer norm compile, the
    decoder's step loop and layer-normed deep GRUs stay eager."""
    deep = tiny_config("bahdanau")
    deep.encoder.transition_depth = 2
    model = build_model(deep, V_SRC, V_TGT)
    assert model.compile_steps(scope="recurrence") == [
        "the deep GRU time steps (encoder.rnn)"
    ]
    assert model.encoder.rnn.compile_mode == "default"
    assert not model.decoder.compile_loop
    normed = tiny_config("luong_general", "luong", feeding=False)
    normed.layer_norm = True
    normed.encoder.transition_depth = 2
    model = build_model(normed, V_SRC, V_TGT)
    assert model.compile_steps(scope="recurrence") == []
    assert model.encoder.rnn.compile_mode is None
    with pytest.raises(ValueError, match="all or recurrence"):
        model.compile_steps(scope="decoder")


def test_compile_scope_follows_the_switch_and_the_machine(monkeypatch):
    """auto: the recurrence on a CPU that can build kernels, nothing on CUDA or
    without a C++ compiler (with the reason); true: everything; false: nothing."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert runtime.compile_scope("false", cpu) == ("none", "trainer.compile=false")
    assert runtime.compile_scope("auto", cuda)[0] == "none"
    monkeypatch.setenv("CXX", "g++")
    assert runtime.compile_scope("auto", cpu)[0] == "recurrence"
    assert runtime.compile_scope("true", cpu)[0] == "all"
    monkeypatch.delenv("CXX")
    monkeypatch.setattr(runtime.shutil, "which", lambda name: None)
    scope, why = runtime.compile_scope("auto", cpu)
    assert scope == "none" and "needs a C++ compiler" in why
    with pytest.raises(RuntimeError, match="needs a C\\+\\+ compiler"):
        runtime.compile_scope("true", cpu)


@pytest.mark.parametrize(
    ("value", "message"),
    [("maybe", "use auto, true or false"), ("auto", None), ("true", None)],
)
def test_the_compile_switch_takes_auto_true_or_false(tmp_path, value, message):
    from seq2seq.config_checks import check_trainer, compile_switch
    from seq2seq.errors import ConfigValueError

    cfg = tiny_train_config(tmp_path, f"trainer.compile={value}")
    assert compile_switch(cfg.trainer.compile) in ("auto", "true", "maybe")
    if message is None:
        check_trainer(cfg.trainer)
    else:
        with pytest.raises(ConfigValueError, match=message):
            check_trainer(cfg.trainer)


def _train_mode_without_dropout(model):
    """Training mode (cuDNN's RNN backward runs in it only) with every dropout at 0:
    inductor draws other random numbers than eager, so none may be drawn."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        elif isinstance(module, torch.nn.RNNBase):
            module.dropout = 0.0
    return model


def _loss_weights_grads(model, batch):
    """The label-smoothed loss of a batch (targets: its inputs shifted), its
    attention and the loss's gradients."""
    out = model(*batch)
    tgt_in = batch[-1]
    targets = torch.cat([tgt_in[:, 1:], tgt_in[:, :1]], dim=1)  # any fixed targets
    loss = token_loss(out.logits.flatten(0, 1), targets.flatten(), smoothing=0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    return loss, out.attention, torch.autograd.grad(loss, params)


def _assert_same(got, want, **tol):
    loss, weights, grads = got
    assert_close(loss, want[0], **tol)
    assert_close(weights, want[1], **tol)  # also the shape: (B, T, S), unpadded
    for g, r in zip(grads, want[2], strict=True):
        assert_close(g, r, **tol)


@pytest.mark.parametrize(
    ("attention", "style"),
    [("bahdanau", None), ("luong_general", None), ("multihead", "luong")],
)
def test_bucketed_step_loop_equals_the_unpadded_one(attention, style, monkeypatch):
    """The padding of ``trainer.compile_bucket`` alone (the loop left eager): rows
    and source positions added, then sliced away, change nothing."""
    monkeypatch.setattr(decoder_module, "compiled", lambda fn, mode="default": fn)
    torch.manual_seed(0)
    model = build_model(tiny_config(attention, style, feeding=True), V_SRC, V_TGT)
    model.eval()
    assert model.decoder.has_step_loop
    for batch in (_batch(9, 5, 4, seed=0), _batch(3, 7, 3, seed=1)):
        model.decoder.compile_loop = False
        want = _loss_weights_grads(model, batch)
        assert model.compile_steps("reduce-overhead", bucket=8)
        got = _loss_weights_grads(model, batch)
        _assert_same(got, want, rtol=1e-5, atol=1e-6)


def test_pad_loop_inputs_masks_what_it_adds():
    torch.manual_seed(0)
    model = build_model(tiny_config("bahdanau"), V_SRC, V_TGT).eval()
    src, lengths, mask, _ = _batch(9, 5, 4, seed=0)
    state = model.init_state(model.encode(src, lengths, mask))
    gates = torch.randn(4, 9, 24)
    padded_gates, padded = loop_padding.pad_loop_inputs(gates, state, bucket=8)
    assert padded_gates.shape == (4, 16, 24)
    assert padded.hidden.shape[1] == 16 and padded.feed.size(0) == 16
    assert padded.keys.mask.shape == (16, 8)
    assert torch.equal(padded.keys.mask[:9, :5], mask)
    assert not padded.keys.mask[:9, 5:].any()  # new positions of real rows: masked
    assert padded.keys.mask[9:].sum(1).eq(1).all()  # new rows: one position each
    assert padded.keys.values.shape[:2] == (16, 8)
    same = loop_padding.pad_loop_inputs(gates[:, :8], state.select(torch.arange(8)), 8)
    assert same[1].keys.mask.shape == (8, 8)  # already a multiple: only S padded


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attention", ["bahdanau", "luong_general"])
def test_reduce_overhead_step_loop_equals_eager(attention, device):
    """``compile_mode=reduce-overhead`` with ``compile_bucket``: the compiled, padded
    loop gives eager's loss, attention and gradients (CUDA graphs on CUDA; on CPU
    the same compiled code without them)."""
    _needs_toolchain(device)
    torch.manual_seed(0)
    model = build_model(tiny_config(attention, feeding=True), V_SRC, V_TGT)
    _train_mode_without_dropout(model.to(device))
    for batch in (_batch(9, 5, 4, seed=0), _batch(13, 10, 5, seed=2)):
        batch = _on(device, batch)
        model.decoder.compile_loop = False
        want = _loss_weights_grads(model, batch)
        assert model.compile_steps("reduce-overhead", bucket=5)
        _assert_same(_loss_weights_grads(model, batch), want, rtol=1e-4, atol=1e-5)


def test_compile_steps_refuses_an_unknown_mode():
    model = build_model(tiny_config("bahdanau"), V_SRC, V_TGT)
    with pytest.raises(ValueError, match="default or reduce-overhead"):
        model.compile_steps("max-autotune")


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_trainer_compile_flag_trains(tmp_path, mode):
    _needs_toolchain("cpu")
    cfg = tiny_train_config(
        tmp_path / "cache",
        "trainer.compile=true",
        f"trainer.compile_mode={mode}",
        "trainer.max_steps=3",
        "trainer.valid_every=null",
        "trainer.log_every=1",
    )
    trainer = build_trainer(cfg, tmp_path / "run")
    assert trainer.model.decoder.compile_loop
    assert trainer.model.decoder.compile_mode == mode
    assert trainer.model.decoder.loop_bucket == 8  # trainer.compile_bucket
    result = trainer.fit()
    assert result.progress.step == 3
    assert result.last_checkpoint.is_file()


def test_compile_without_a_cxx_compiler_fails_at_start(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(runtime.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="needs a C\\+\\+ compiler"):
        check_compile_toolchain(torch.device("cpu"))


def test_compile_on_cuda_without_triton_fails_at_start(monkeypatch):
    monkeypatch.setattr(runtime, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="needs Triton"):
        check_compile_toolchain(torch.device("cuda"))
