"""RNMT+'s decoder (Chen et al., 2018), ``model.decoder.context_to_layers``: the Luong
decoder's stack split at the attention.

The bottom GRU layer runs over the target, the attention reads its states, and each
layer above runs over [h_{k-1}; c] (one GRU per layer, ``upper``), from the third
layer up with a residual connection::

    h¹_t = GRU₁(e(y_{t-1}), h¹_{t-1});   c_t = attend(h¹_t)
    hᵏ_t = GRU_k([dropout(hᵏ⁻¹_t); c_t], hᵏ_{t-1})   (+ dropout(·) + hᵏ⁻¹_t, k ≥ 3)
    h̃_t = tanh(W_c [c_t; hᴸ_t])

No step feeds back into the next step's input (RNMT+ has no input feeding), so
``fast_features`` runs each layer over all steps in one call and attends once. What it
shares with the Luong style (W_c, ``style``) is ``luong.py``, with every style
``decoder.py``; ``Decoder`` builds ``upper`` (its place in the parameter order is
that of the checkpoints).

Shapes: ``B`` batch, ``T`` target steps, ``S`` source length, ``E`` embedding size,
``H`` decoder hidden size, ``L`` decoder layers, ``C`` context size, ``V`` vocabulary.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor

from seq2seq.model.attention import AttentionOutput, attend_step
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.dropout import dropout
from seq2seq.model.luong import LuongDecoder


class RNMTDecoder(LuongDecoder):
    """Luong's decoder with the attention on the bottom layer and its context fed to
    every layer above (see the module docstring); 2 or more layers, no input
    feeding."""

    supports_feeding = False
    supports_context_to_layers = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """``Decoder``'s arguments; ``context_to_layers`` is always on."""
        super().__init__(*args, **{**kwargs, "context_to_layers": True})

    def _upper_layers(
        self, low: Tensor, context: Tensor, hidden: Tensor
    ) -> tuple[Tensor, list[Tensor]]:
        """RNMT+'s layers above the attention: low ``(B, T, H)`` the bottom layer's
        outputs, context ``(B, T, C)``, hidden ``(L-1, B, H)`` → the top layer's outputs
        ``(B, T, H)`` and each layer's last state ``(L-1) × (1, B, H)``. Layer k reads
        [dropout(h_{k-1}); c]; from the third layer up, with ``residual``, it adds its
        dropped-out output to h_{k-1}."""
        x, finals = low, []
        drop = partial(dropout, p=self.layer_dropout, training=self.training)
        for k, rnn in enumerate(self.upper, start=1):
            out, h = rnn(torch.cat([drop(x), context], dim=-1), hidden[k - 1 : k])
            x = x + drop(out) if self.residual and k >= 2 else out
            finals.append(h)
        return x, finals

    def reference_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """One step: the bottom layer, the attention on its state, the layers above
        on [h; c], h̃ = tanh(W_c [c; h_L])."""
        low, h_low = self.rnn(emb.unsqueeze(1), state.hidden[:1])  # (B, 1, H)
        att = attend_step(self.attention, low[:, 0], state.keys)
        top, finals = self._upper_layers(
            low, att.context.unsqueeze(1), state.hidden[1:]
        )
        feat = torch.tanh(self.feature(torch.cat([att.context, top[:, 0]], dim=-1)))
        hidden = torch.cat([h_low, *finals])
        return feat, DecoderState(hidden, state.feed, state.keys), att

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Teacher forcing: each layer over all steps in one call, the attention once
        between the bottom layer and the rest."""
        low, _ = self.rnn(emb, state.hidden[:1])  # (B, T, H)
        att = self.attention.attend(low, state.keys)  # (B, T, C), (B, T, S)
        top, _ = self._upper_layers(low, att.context, state.hidden[1:])
        feats = torch.tanh(self.feature(torch.cat([att.context, top], dim=-1)))
        return feats, att.weights, att.head_weights
