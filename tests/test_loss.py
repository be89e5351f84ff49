"""The blocked cross-entropy against F.cross_entropy: loss and gradient, with PAD rows,
label smoothing, several blocks with a remainder, and bf16 logits; the fused output
layer + loss against the unfused path, in chunks."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.config import TrainerConfig
from seq2seq.data.tokenizer import PAD_ID
from seq2seq.model import loss as loss_module
from seq2seq.model import output_layer as output_layer_module
from seq2seq.model.loss import linear_token_loss, token_loss
from seq2seq.model.output_layer import OutputLayer


def reference(logits, targets, smoothing):
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )


def batch(dtype, rows=37, vocab=11):
    g = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(1, rows, vocab, generator=g)).to(dtype)
    targets = torch.randint(1, vocab, (1, rows), generator=g)
    targets[0, ::5] = PAD_ID  # padding rows count zero
    return logits, targets


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_and_gradient_equal_cross_entropy(monkeypatch, smoothing):
    monkeypatch.setattr(loss_module, "BLOCK_BYTES", 4 * 11 * 5)  # blocks of 5 rows
    logits, targets = batch(torch.float32)
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    got, want = token_loss(ours, targets, smoothing), reference(ref, targets, smoothing)
    (2.5 * got).backward()
    (2.5 * want).backward()
    assert got.dtype == torch.float32
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-6)
    assert (ours.grad[0, ::5] == 0).all()


def test_backward_leaves_float32_logits_unchanged():
    logits, targets = batch(torch.float32)
    logits.requires_grad_()
    before = logits.detach().clone()
    token_loss(logits, targets, 0.1).backward()
    assert torch.equal(logits.detach(), before)


def test_bf16_logits_get_a_bf16_gradient_of_the_float32_math():
    logits, targets = batch(torch.bfloat16, rows=64, vocab=300)
    ours = logits.clone().requires_grad_()
    ref = logits.float().requires_grad_()
    got = token_loss(ours, targets, 0.1)
    want = reference(ref, targets, 0.1)
    got.backward()
    want.backward()
    assert ours.grad.dtype == torch.bfloat16
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    torch.testing.assert_close(ours.grad, ref.grad.bfloat16(), rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize("smoothing", [-0.1, 1.0])
def test_smoothing_outside_unit_interval_is_rejected(smoothing):
    logits, targets = batch(torch.float32)
    with pytest.raises(ValueError, match="label smoothing"):
        token_loss(logits, targets, smoothing)


def test_without_gradient_tracking_the_loss_is_the_same():
    logits, targets = batch(torch.float32)
    with torch.no_grad():
        got = token_loss(logits.requires_grad_(), targets, 0.1)
    assert got.item() == pytest.approx(reference(logits, targets, 0.1).item(), rel=1e-5)
    assert not got.requires_grad


def test_blocks_are_cache_sized_on_cpu_and_whole_on_an_accelerator():
    assert loss_module.block_rows(1105, 8004, torch.device("cpu")) == 65  # 2 MiB
    assert loss_module.block_rows(1105, 8004, torch.device("cuda")) == 1105


def features(rows=37, size=6, vocab=11, dtype=torch.float64):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(rows, size, generator=g, dtype=dtype).requires_grad_()
    weight = torch.randn(vocab, size, generator=g, dtype=dtype).requires_grad_()
    bias = torch.randn(vocab, generator=g, dtype=dtype).requires_grad_()
    targets = torch.randint(1, vocab, (rows,), generator=g)
    targets[::5] = PAD_ID
    return x, weight, bias, targets


@pytest.mark.parametrize("chunk", [1, 4, 36, 37, 100])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fused_projection_and_loss_equal_the_unfused_path(chunk, smoothing):
    x, weight, bias, targets = features(dtype=torch.float32)
    leaves = (x, weight, bias)
    want = reference(F.linear(x, weight, bias), targets, smoothing)
    want_grads = torch.autograd.grad(0.3 * want, leaves)
    got = linear_token_loss(x, weight, bias, targets, smoothing, chunk)
    got_grads = torch.autograd.grad(0.3 * got, leaves)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    for ours, ref in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_fused_gradients_match_central_differences_in_float64():
    """gradcheck's own reentrancy check runs backward twice on one graph, which the
    fused loss refuses (it scales its gradients in place); so the same check by
    hand: one backward against central differences of fresh forward passes."""
    x, weight, bias, targets = features(rows=9, size=3, vocab=5)
    inputs = (x, weight, bias)
    linear_token_loss(*inputs, targets, 0.1, chunk=4).backward()
    eps = 1e-6
    with torch.no_grad():
        for tensor in inputs:
            numeric = torch.zeros_like(tensor)
            for i in range(tensor.numel()):
                flat = tensor.view(-1)
                flat[i] += eps
                up = linear_token_loss(*inputs, targets, 0.1, chunk=4)
                flat[i] -= 2 * eps
                down = linear_token_loss(*inputs, targets, 0.1, chunk=4)
                flat[i] += eps
                numeric.view(-1)[i] = (up - down) / (2 * eps)
            torch.testing.assert_close(tensor.grad, numeric, rtol=1e-5, atol=1e-7)


def test_fused_loss_reaches_a_tied_weight_and_works_without_bias():
    x, weight, _, targets = features(dtype=torch.float32)
    embedding = torch.nn.Embedding.from_pretrained(weight.detach(), freeze=False)
    linear_token_loss(x, embedding.weight, None, targets, 0.1, chunk=8).backward()
    ref = embedding.weight.detach().clone().requires_grad_()
    reference(F.linear(x.detach(), ref), targets, 0.1).backward()
    torch.testing.assert_close(embedding.weight.grad, ref.grad, rtol=1e-5, atol=1e-6)


def test_fused_loss_under_bf16_autocast_follows_the_unfused_path():
    x, weight, bias, targets = features(
        rows=64, size=32, vocab=300, dtype=torch.float32
    )
    leaves = (x, weight, bias)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = token_loss(F.linear(x, weight, bias), targets, 0.1)
        got = linear_token_loss(x, weight, bias, targets, 0.1, chunk=16)
    want_grads = torch.autograd.grad(want, leaves)
    got_grads = torch.autograd.grad(got, leaves)
    assert got.item() == pytest.approx(want.item(), rel=1e-3)
    for ours, ref in zip(got_grads, want_grads, strict=True):
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, ref, rtol=2e-2, atol=2e-2)


def test_fused_loss_without_gradient_tracking_is_the_same():
    x, weight, bias, targets = features(dtype=torch.float32)
    want = reference(F.linear(x, weight, bias), targets, 0.1)
    with torch.inference_mode():
        got = linear_token_loss(x, weight, bias, targets, 0.1, chunk=5)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    assert not got.requires_grad


def test_a_second_backward_through_one_graph_fails_where_the_gradient_was_reused():
    """token_loss and the fused loss scale the gradients they computed in the
    forward pass in place, so a second backward must fail, never return them
    scaled twice."""
    x, weight, bias, targets = features(dtype=torch.float32)
    loss = token_loss(F.linear(x, weight, bias), targets, 0.1)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        loss.backward()
    fused = linear_token_loss(x, weight, bias, targets, 0.1, chunk=5)
    fused.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        fused.backward()


def test_a_chunk_under_one_row_is_rejected():
    x, weight, bias, targets = features(dtype=torch.float32)
    with pytest.raises(ValueError, match="chunk"):
        linear_token_loss(x, weight, bias, targets, 0.1, chunk=0)


@pytest.mark.parametrize("chunk_mb", [0, 1, 2])
def test_the_output_layer_fuses_only_above_its_chunk_size(monkeypatch, chunk_mb):
    """Logits of 400 rows x 1,000 pieces (1.6 MB): whole at 0 (never fused) and at
    2 MB, in chunks of 262 rows at 1 MB; the same loss and gradients either way."""
    calls = []
    real = loss_module.linear_token_loss
    monkeypatch.setattr(
        output_layer_module,
        "linear_token_loss",
        lambda *a: calls.append(a[-1]) or real(*a),
    )
    torch.manual_seed(0)
    layer = OutputLayer(16, 1000, dropout=0.0)
    layer.chunk_bytes = chunk_mb * 2**20
    feats = torch.randn(400, 16, requires_grad=True)
    targets = torch.randint(1, 1000, (400,))
    got = layer.loss(feats, targets, 0.1)
    got.backward()
    assert calls == ([262] if chunk_mb == 1 else [])
    ref = feats.detach().clone().requires_grad_()
    want = reference(layer(ref), targets, 0.1)
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    torch.testing.assert_close(feats.grad, ref.grad, rtol=1e-5, atol=1e-6)


def test_the_trainer_setting_and_the_output_layer_default_agree():
    assert TrainerConfig().loss_chunk_mb == loss_module.DEFAULT_LOSS_CHUNK_MB
    assert OutputLayer(4, 10, 0.0).chunk_bytes == TrainerConfig().loss_chunk_mb * 2**20


def test_fused_chunks_are_capped_on_cpu_and_as_asked_on_an_accelerator():
    limit = 128 * 2**20
    assert loss_module.fused_chunk_rows(32000, limit, torch.device("cpu")) == 262
    assert loss_module.fused_chunk_rows(32000, limit, torch.device("cuda")) == 1048
    assert loss_module.fused_chunk_rows(32000, 2**20, torch.device("cpu")) == 8
