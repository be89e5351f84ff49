"""The blocked cross-entropy against F.cross_entropy: loss and gradient, with PAD rows,
label smoothing, several blocks with a remainder, and bf16 logits."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.data.tokenizer import PAD_ID
from seq2seq.model import loss as loss_module
from seq2seq.model.loss import token_loss


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
