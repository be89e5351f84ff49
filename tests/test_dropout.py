"""The CPU dropout (``model/dropout.py``): it keeps each value with probability 1 − p
(p at 1/65,536 resolution) and scales the kept ones so that the expectation is the
input; its gradient is its mask; a seed gives the same mask; off in eval."""

import pytest
import torch
from torch.testing import assert_close

from seq2seq.model.dropout import LEVELS, Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keeps_one_minus_p_and_keeps_the_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(400, 1000)
    y = dropout(x, p)
    kept = y != 0
    dropped = round(p * LEVELS)
    scale = LEVELS / (LEVELS - dropped)
    assert torch.all(y[kept] == torch.tensor(scale))
    n = x.numel()
    # the binomial's standard deviation is ≤ 0.0008 here: 5 of them
    assert abs(kept.float().mean().item() - (1 - dropped / LEVELS)) < 0.004
    assert abs(y.mean().item() - 1.0) < 5 * (scale * (p * (1 - p) / n) ** 0.5) + 1e-6


def test_every_one_of_the_four_words_in_a_draw_is_uniform():
    torch.manual_seed(1)
    y = dropout(torch.ones(1 << 18), 0.5)  # 4 · 2^16 draws
    by_word = (y != 0).float().view(-1, 4).mean(0)
    assert_close(by_word, torch.full((4,), 0.5), atol=0.01, rtol=0)


def test_gradient_is_the_mask_and_a_seed_repeats_it():
    x = torch.randn(37, 11, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.3)
    y.sum().backward()
    torch.manual_seed(3)
    again = dropout(x.detach(), 0.3)
    assert torch.equal(y.detach(), again)
    mask = (y.detach() / x.detach()).nan_to_num()
    assert_close(x.grad, mask)


def test_off_in_eval_at_zero_and_shaped_like_its_input():
    module = Dropout(0.3).eval()
    x = torch.randn(3, 5, 7)
    assert module(x) is x and dropout(x, 0.0) is x
    assert Dropout(0.3)(x).shape == x.shape
    assert dropout(torch.randn(3, 0, 7), 0.3).shape == (3, 0, 7)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)
