"""The fused GRU recurrence (``model/deep_gru_loop.py``): its hand-written backward
equals autograd through the step-by-step loop, in value and gradient, with every
option it covers (directions, padding masks, deep transition, layers, residual);
under bf16 autocast it stays within bf16's rounding and its gradients reach the fp32
weights; without gradients it saves nothing and computes the same."""

import copy

import pytest
import torch
from torch.testing import assert_close

from seq2seq.model.deep_gru import DeepGRU
from seq2seq.model.deep_gru_loop import gru_layer

LENGTHS = torch.tensor([6, 4, 1])
MASK = torch.arange(6)[None] < LENGTHS[:, None]

CASES = {
    "bidirectional, masked, depth 2, 2 layers": (True, True, 2, 2),
    "forward only, unmasked, depth 2": (False, False, 2, 1),
    "bidirectional, masked, depth 1, 3 residual layers": (True, True, 1, 3),
    "forward only, masked, depth 3": (False, True, 3, 1),
}


def _pair(bidirectional: bool, depth: int, layers: int, dtype=torch.float64):
    """A fused ``DeepGRU`` and the same weights stepped under autograd."""
    torch.manual_seed(0)
    fused = DeepGRU(5, 4, layers, 0.0, bidirectional, False, depth, residual=True)
    fused = fused.to(dtype)
    stepped = copy.deepcopy(fused)
    stepped.fused = False
    return fused, stepped


def _run(model, x, h0, mask, weights):
    out, h = model(x, h0, mask)
    loss = (out * weights).sum() + (h * h).sum()
    return out, h, torch.autograd.grad(loss, [x, h0, *model.parameters()])


@pytest.mark.parametrize("case", CASES)
def test_fused_recurrence_equals_autograd_through_the_steps(case):
    bidirectional, masked, depth, layers = CASES[case]
    fused, stepped = _pair(bidirectional, depth, layers)
    dirs = 2 if bidirectional else 1
    x = torch.randn(3, 6, 5, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(layers * dirs, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = MASK if masked else None
    weights = torch.randn(3, 6, dirs * 4, dtype=torch.float64)
    out, h, grads = _run(fused, x, h0, mask, weights)
    out_ref, h_ref, grads_ref = _run(stepped, x, h0, mask, weights)
    assert_close(out, out_ref, rtol=0, atol=1e-12)
    assert_close(h, h_ref, rtol=0, atol=1e-12)
    names = ["x", "h0"] + [n for n, _ in fused.named_parameters()]
    for name, g, g_ref in zip(names, grads, grads_ref, strict=True):
        assert_close(g, g_ref, rtol=1e-10, atol=1e-12, msg=f"gradient of {name}")
    if masked:  # padding gets no output and no gradient into its input
        assert out[2, 1:].abs().max() == 0
        assert grads[0][2, 1:].abs().max() == 0


def test_gradcheck_of_one_layer_with_masks_and_transitions():
    torch.manual_seed(1)
    dirs, steps, batch, size = 2, 4, 3, 3
    opts = {"dtype": torch.float64, "requires_grad": True}
    gi = torch.randn(batch, steps, dirs, 3 * size, **opts)
    h0 = torch.randn(dirs, batch, size, **opts)
    lengths = torch.tensor([4, 2, 1])
    masks = (torch.arange(steps) < lengths[:, None]).unsqueeze(-1)  # (B, T, 1)
    weights = [torch.randn(dirs, size, 3 * size, **opts) for _ in range(2)]
    biases_i = [torch.randn(dirs, 1, 3 * size, **opts) for _ in range(2)]
    biases_h = [torch.randn(dirs, 1, 3 * size, **opts) for _ in range(2)]

    def layer(gi, h0, w0, w1, bi0, bi1, bh0, bh1):
        return gru_layer(gi, h0, masks, [w0, w1], [bi0, bi1], [bh0, bh1])

    inputs = (gi, h0, *weights, *biases_i, *biases_h)
    assert torch.autograd.gradcheck(layer, inputs)


def test_bf16_autocast_stays_close_and_its_gradients_reach_fp32_weights():
    fused, stepped = _pair(True, 2, 2, torch.float32)
    x = torch.randn(3, 6, 5, requires_grad=True)
    h0 = torch.randn(4, 3, 4, requires_grad=True)
    weights = torch.randn(3, 6, 8)
    results = []
    for model in (fused, stepped):
        with torch.autocast("cpu", torch.bfloat16):
            out, h = model(x, h0, MASK)
        loss = (out.float() * weights).sum() + (h.float() ** 2).sum()
        results.append((out, torch.autograd.grad(loss, [x, h0, *model.parameters()])))
    (out, grads), (out_ref, grads_ref) = results
    assert out.dtype == out_ref.dtype
    assert_close(out, out_ref, rtol=0.02, atol=0.02)
    for g, g_ref, p in zip(grads[2:], grads_ref[2:], fused.parameters(), strict=True):
        assert g.dtype == p.dtype == torch.float32
        assert_close(g, g_ref, rtol=0.05, atol=0.05)


def test_without_gradients_it_computes_the_same_and_keeps_no_graph():
    fused, _ = _pair(True, 2, 2)
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    out, h = fused(x, None, MASK)
    with torch.no_grad():
        out_ng, h_ng = fused(x, None, MASK)
    assert out.grad_fn is not None and out_ng.grad_fn is None
    # (not bit for bit: the input projection's kernel differs with and without grad)
    assert_close(out, out_ng, rtol=0, atol=1e-15)
    assert_close(h, h_ng, rtol=0, atol=1e-15)
