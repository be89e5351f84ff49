"""A stacked GRU stepped by hand, with the input projection hoisted out of the loop.

The decoder's recurrence cannot run as one ``nn.GRU`` call when attention (Bahdanau)
or input feeding (Luong) feeds back into the next step's input. Stepping ``nn.GRU``
with one time step at a time repeats, at every step, work that does not depend on the
recurrence: the projection of the embeddings ``W_ie e_t``, the concatenation of the
input, and (in the backward pass) a full-size zero tensor per slice ``emb[:, t]``.
``StackedGRU`` keeps the weights of an ``nn.GRU`` (same parameter names, so checkpoints
load unchanged) and splits the first layer's input projection into a part computed
for all steps in one matmul (the embeddings) and a per-step part (context or feed):

    gi_t = (W_ie e_t + b_i) + W_ix x_t      gh_t = W_h h_{t-1} + b_h
    r, z = σ(gi_r + gh_r), σ(gi_z + gh_z)   n = tanh(gi_n + r ⊙ gh_n)
    h_t = (1 - z) ⊙ n + z ⊙ h_{t-1} = n + z ⊙ (h_{t-1} - n)

with PyTorch's gate order (r, z, n), so the result equals ``nn.GRU``.

Shapes: ``B`` batch, ``T`` steps, ``E`` embedding size, ``X`` extra (per-step) input
size, ``H`` hidden size, ``L`` layers.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.model.dropout import dropout
from seq2seq.model.precision import cast_like_autocast


def gru_update(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    """One GRU update from input gates ``gi`` and hidden gates ``gh`` (both
    ``(..., 3H)``, biases included) and the previous state ``h`` ``(..., H)``."""
    size = h.size(-1)
    # split, not slices: in backward one cat joins the parts' gradients, where each
    # slice would write its own zero tensor the size of the whole
    gi_rz, gi_n = gi.split((2 * size, size), -1)
    gh_rz, gh_n = gh.split((2 * size, size), -1)
    r, z = torch.sigmoid(gi_rz + gh_rz).chunk(2, -1)  # (..., H) each
    n = torch.tanh(torch.addcmul(gi_n, r, gh_n))
    return torch.addcmul(n, z, h - n)


class StackedGRU:
    """A view of an ``nn.GRU`` (``batch_first``, unidirectional) for stepping by hand.

    ``emb_size`` is the width of the first layer's input that is known for all steps
    in advance (the embeddings); the rest of that input (``X`` columns) is given per
    step. Build it once per forward pass: it slices the weights (views, no copies).
    """

    def __init__(self, rnn: nn.GRU, emb_size: int, training: bool) -> None:
        self.layers = rnn.num_layers
        self.dropout = rnn.dropout if training else 0.0
        self.training = training
        w_ih0 = rnn.weight_ih_l0  # (3H, E + X)
        self.w_ie, self.b_i0 = w_ih0[:, :emb_size], rnn.bias_ih_l0
        # The per-step weights, cast once under autocast (see model/precision.py).
        extra = w_ih0[:, emb_size:].t() if w_ih0.size(1) > emb_size else None
        self.w_ix = cast_like_autocast(extra)
        self.w_hh = [
            cast_like_autocast(getattr(rnn, f"weight_hh_l{k}").t())
            for k in range(self.layers)
        ]
        self.b_hh = [getattr(rnn, f"bias_hh_l{k}") for k in range(self.layers)]
        self.w_ih = [None] + [
            cast_like_autocast(getattr(rnn, f"weight_ih_l{k}"))
            for k in range(1, self.layers)
        ]
        self.b_ih = [None] + [
            getattr(rnn, f"bias_ih_l{k}") for k in range(1, self.layers)
        ]

    def embed_gates(self, emb: Tensor) -> Tensor:
        """``W_ie e + b_i`` for any leading shape: emb ``(..., E)`` → ``(..., 3H)``."""
        return F.linear(emb, self.w_ie, self.b_i0)

    def step(self, gi_emb: Tensor, extra: Tensor | None, hidden: list[Tensor]) -> list:
        """gi_emb ``(B, 3H)`` from ``embed_gates``, extra ``(B, X)`` or None, hidden
        ``L × (B, H)`` → the new hidden states ``L × (B, H)`` (the last is the
        output)."""
        gi = gi_emb if self.w_ix is None else torch.addmm(gi_emb, extra, self.w_ix)
        return self.step_gates(gi, hidden)

    def step_gates(self, gi: Tensor, hidden: list[Tensor]) -> list[Tensor]:
        """``step`` from the first layer's whole input gates ``gi`` ``(B, 3H)``."""
        out = []
        for k, h in enumerate(hidden):
            if k > 0:
                x = dropout(out[-1], self.dropout, self.training)
                gi = F.linear(x, self.w_ih[k], self.b_ih[k])
            out.append(gru_update(gi, torch.addmm(self.b_hh[k], h, self.w_hh[k]), h))
        return out
