"""The Luong-style decoder (Luong et al., 2015): update the GRU, then attend with the
new state; the attentional vector h̃ = tanh(W_c [c; h]), fed back into the next step's
input with input feeding.

What it shares with the other styles is ``decoder.py``; RNMT+'s variant, the
attention on the bottom layer and its context fed to the layers above, is
``rnmt.py``. Without input feeding ``fast_features`` has no step loop at all; with
it, the loop holds the recurrence alone (``stepped_gru.py``).

Shapes: ``B`` batch, ``T`` target steps, ``S`` source length, ``E`` embedding size,
``H`` decoder hidden size, ``L`` decoder layers, ``C`` context size, ``V`` vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.model.attention import AttentionOutput, Keys, attend_step
from seq2seq.model.decoder import Decoder, stack_steps
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.loop_padding import unpad_loop_outputs
from seq2seq.model.precision import cast_like_autocast
from seq2seq.model.shape_buckets import linear_rows
from seq2seq.model.stepped_gru import StackedGRU


class LuongDecoder(Decoder):
    """Luong et al. (2015): update the GRU, then attend with the new state.

    ``h_t = GRU([e(y_{t-1}); h̃_{t-1}], h_{t-1})`` (h̃_{t-1} only with input feeding);
    ``c_t = attend(h_t)``; attentional hidden ``h̃_t = tanh(W_c [c_t; h_t])``.
    Without input feeding the steps are independent given the GRU outputs, so
    ``fast_features`` runs the GRU over all steps in one call and attends once.
    """

    style = "luong"
    supports_feeding = True

    def _rnn_input_size(self, emb_dim: int, context_size: int) -> int:
        return emb_dim + self.feed_size

    def _feature_layer(self, emb_dim: int, context_size: int) -> nn.Module:
        return nn.Linear(context_size + self.hidden_size, self.hidden_size)  # W_c

    @property
    def has_step_loop(self) -> bool:
        # without feeding: one GRU call over all steps
        return self.input_feeding and self.plain_gru

    def _split_feature(self) -> tuple[Tensor, Tensor]:
        """W_c ``(H, C + H)`` over [c; h] as its h and c parts ``(H, H)``, ``(C, H)``,
        cast once for the step loop under autocast."""
        w, c_size = self.feature.weight, self.attention.context_size
        return cast_like_autocast(w[:, c_size:]), cast_like_autocast(w[:, :c_size].t())

    def _attentional(
        self, h: Tensor, keys: Keys, w_h: Tensor, w_c: Tensor
    ) -> tuple[Tensor, AttentionOutput]:
        """One step: h ``(B·g, H)`` → h̃ = tanh(W_c [c; h]) ``(B·g, H)`` and the
        attention (two matmuls instead of a concatenation per step; ``g`` hypotheses
        per source in beam search, see ``attend_step``)."""
        att = attend_step(self.attention, h, keys)
        pre = F.linear(h, w_h, self.feature.bias)
        if att.context.size(-1):
            pre = torch.addmm(pre, att.context, w_c)
        return torch.tanh(pre), att

    def _fed_loop_step(
        self,
        gru: StackedGRU,
        gi_emb: Tensor,
        hidden: list[Tensor],
        feed: Tensor,
        keys: Keys,
        weights: tuple[Tensor, Tensor],
    ) -> tuple[list[Tensor], Tensor, AttentionOutput]:
        """The body of the input-feeding loop, ``reference_step`` on the hoisted
        gates: update the GRU with h̃_{t-1}, attend with h_t; ``weights`` from
        ``_split_feature``."""
        hidden = gru.step(gi_emb, feed, hidden)
        feed, att = self._attentional(hidden[-1], keys, *weights)
        return hidden, feed, att

    def reference_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        rnn_in = torch.cat([emb, state.feed], dim=-1).unsqueeze(1)  # (B, 1, E + F)
        out, hidden = self.rnn(rnn_in, state.hidden)  # nn.GRU: faster for one step
        feat, att = self._attentional(out[:, 0], state.keys, *self._split_feature())
        feed = feat if self.input_feeding else state.feed
        return feat, DecoderState(hidden, feed, state.keys), att

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        if self.input_feeding:
            return self._fed_features(emb, state)
        out, _ = self.rnn(emb, state.hidden)  # (B, T, H): one call over all steps
        att = self.attention.attend(out, state.keys)  # (B, T, C), (B, T, S)
        feats = torch.cat([att.context, out], dim=-1)  # W_c, rows in buckets under bf16
        feats = torch.tanh(linear_rows(feats, self.feature.weight, self.feature.bias))
        return feats, att.weights, att.head_weights

    def _fed_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Input feeding: the step loop, with the embeddings' part of the GRU input
        gates computed for all steps in one matmul before it (a ``DeepGRU``: the
        reference loop)."""
        if not self.plain_gru:
            return self.reference_features(emb, state)
        gru = StackedGRU(self.rnn, emb.size(-1), self.training)
        gates = gru.embed_gates(emb.transpose(0, 1))  # (T, B, 3H)
        b, source = state.keys.mask.shape
        gates, state = self._loop_inputs(gates, state)
        hidden, feed = list(state.hidden.unbind(0)), state.feed
        weights = self._split_feature()
        recur = self._loop_body(LuongDecoder._fed_loop_step)
        feats, outs = [], []
        for gi_emb in gates.unbind(0):
            hidden, feed, att = recur(gru, gi_emb, hidden, feed, state.keys, weights)
            feats.append(feed)
            outs.append(att)
        feats = torch.stack(feats, dim=1)[:b]  # (B, T, H)
        return (feats, *unpad_loop_outputs(b, source, *stack_steps(outs)))
