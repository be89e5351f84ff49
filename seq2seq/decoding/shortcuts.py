"""The search's step: ``reference_step`` with fewer FLOPs, in an object a search owns.

A search makes one ``SearchStep`` (``search_step``) for its run and drops it at the
end, so what it precomputes from the weights (the tables below, a lowered vocabulary
projection) is the model's as it is then: nothing is cached across runs, and nothing
has to be forgotten after a training step.

At inference in fp32 (eval, no autograd, no autocast) each decoder style has a
shortcut equal to its ``reference_step`` up to float rounding
(``tests/test_shortcuts.py``): the embedding's shares of the first GRU layer's gates
(and of Bahdanau's deep output) are rows of tables over the vocabulary, built once
per run, and in beam search the context's shares are the sources' values projected
once and mixed by each beam's weights (``context_share``). Elsewhere, and for a
style without a shortcut, the step is the model's own ``step``.

Shapes: ``B`` rows (sentences × beams), ``S`` source length, ``E`` embedding size,
``H`` decoder hidden size, ``C`` context size, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.decoding.ensemble import Ensemble, mixed_step
from seq2seq.decoding.vocab import LoweredProjection
from seq2seq.model.attention import AttentionOutput, Keys, attend_step
from seq2seq.model.bahdanau import BahdanauDecoder
from seq2seq.model.decoder import Decoder
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.luong import LuongDecoder
from seq2seq.model.seq2seq import Seq2Seq
from seq2seq.model.stepped_gru import StackedGRU

# prev_tokens (B,), state → log_probs (B, V) float32, new state, weights (B, S)
StepFn = Callable[[Tensor, Any], tuple[Tensor, Any, Tensor]]
Features = tuple[Tensor, DecoderState, AttentionOutput]


def fast_path(model: nn.Module, tokens: Tensor) -> bool:
    """Whether the shortcuts apply: inference in fp32 (training, autograd and
    autocast take ``reference_step`` itself)."""
    autocast = torch.is_autocast_enabled(tokens.device.type)
    return not (model.training or torch.is_grad_enabled() or autocast)


def context_share(
    att: AttentionOutput, keys: Keys, w_ctx: Tensor, rows: int
) -> tuple[Tensor, Keys]:
    """``W c`` for every row ``(rows, ·)``, and the keys (with ``projected`` set).
    With g > 1 hypotheses per source (beam search) and one weighted read per source
    (not multi-head), ``W c = Σ_j α_j (W v_j)``: each source's values are projected
    once and mixed by its beams' weights, instead of K contexts projected per step."""
    sources = keys.mask.size(0)
    single_read = att.head_weights is None and att.context.size(-1) > 0
    if rows == sources or not single_read:
        return F.linear(att.context, w_ctx), keys
    if keys.projected is None:
        keys = keys._replace(projected=F.linear(keys.values, w_ctx))  # (B, S, ·)
    weights = att.weights.view(sources, rows // sources, -1)
    mixed = torch.bmm(weights.to(keys.projected.dtype), keys.projected)
    return mixed.flatten(0, 1), keys


class _Tables:
    """A decoder's weights rearranged for its shortcut: ``gates`` ``(V, 3H)`` the
    first GRU layer's input gates of each token (``W_ie e_v + b_i``), the GRU stepped
    by hand, and the output layer's parts ``base``, ``w_ctx``, ``w_state`` (per
    style, ``_split_output``)."""

    def __init__(self, dec: Decoder, split: Callable) -> None:
        emb = dec.embedding.weight  # eval: embed() is the lookup
        w_ie = dec.rnn.weight_ih_l0[:, : emb.size(1)]
        self.gates = F.linear(emb, w_ie, dec.rnn.bias_ih_l0)
        self.gru = StackedGRU(dec.rnn, emb.size(1), training=False)
        self.base, self.w_ctx, self.w_state = split(dec)


def _bahdanau_split(dec: BahdanauDecoder) -> tuple[Tensor, Tensor, Tensor]:
    """W_o [s; c; e] + b_o: the embedding's share per token with the bias ``(V, H)``,
    the context's columns beside the GRU's ``(3H + H, C)``, the state's columns
    transposed ``(H, H)``."""
    h, c = dec.hidden_size, dec.attention.context_size
    w_o, w_ih = dec.feature.weight, dec.rnn.weight_ih_l0  # (H, H + C + E)
    emb = dec.embedding.weight
    base = F.linear(emb, w_o[:, h + c :], dec.feature.bias)
    w_ctx = torch.cat([w_ih[:, emb.size(1) :], w_o[:, h : h + c]])
    return base, w_ctx, w_o[:, :h].t()


def _bahdanau_features(
    dec: BahdanauDecoder, tables: _Tables, prev: Tensor, state: DecoderState
) -> Features:
    """Attend with s_{t-1}; the GRU's input gates and the deep output's input are
    the token's table rows plus the context's shares."""
    att = attend_step(dec.attention, state.hidden[-1], state.keys)
    ctx, keys = context_share(att, state.keys, tables.w_ctx, prev.size(0))
    gates = 3 * dec.hidden_size
    gi = tables.gates.index_select(0, prev) + ctx[:, :gates]
    hidden = tables.gru.step_gates(gi, list(state.hidden.unbind(0)))
    pre = tables.base.index_select(0, prev) + ctx[:, gates:]
    feat = torch.tanh(torch.addmm(pre, hidden[-1], tables.w_state))
    return feat, DecoderState(torch.stack(hidden), state.feed, keys), att


def _luong_split(dec: LuongDecoder) -> tuple[Tensor, Tensor, Tensor]:
    """W_c [c; h] + b: the bias ``(H,)``, the context's columns ``(H, C)``, the
    state's columns transposed ``(H, H)``."""
    w, c = dec.feature.weight, dec.attention.context_size
    return dec.feature.bias, w[:, :c], w[:, c:].t()


def _luong_features(
    dec: LuongDecoder, tables: _Tables, prev: Tensor, state: DecoderState
) -> Features:
    """The GRU's input gates are the token's table row (plus h̃_{t-1} with input
    feeding); attend with h_t; h̃_t = tanh(W_h h_t + b + the context's share)."""
    gi = tables.gates.index_select(0, prev)
    hidden = tables.gru.step(gi, state.feed, list(state.hidden.unbind(0)))
    att = attend_step(dec.attention, hidden[-1], state.keys)
    pre, keys = torch.addmm(tables.base, hidden[-1], tables.w_state), state.keys
    if att.context.size(-1):
        ctx, keys = context_share(att, keys, tables.w_ctx, prev.size(0))
        pre = pre + ctx
    feat = torch.tanh(pre)
    feed = feat if dec.input_feeding else state.feed
    return feat, DecoderState(torch.stack(hidden), feed, keys), att


# Per decoder style: how its output layer splits for the tables, and its shortcut.
SHORTCUTS: dict[str, tuple[Callable, Callable]] = {
    "bahdanau": (_bahdanau_split, _bahdanau_features),
    "luong": (_luong_split, _luong_features),
}


class SearchStep:
    """One model's step for one search run: ``reference_step`` and the output layer,
    through the style's shortcut at inference in fp32, with the vocabulary projection
    in ``vocab_dtype`` (None: the model's own) and each row's ``candidates`` best
    logits recomputed in fp32. The tables and the lowered projection are built at
    the first step that uses them, from the weights as they are then."""

    def __init__(
        self,
        model: Seq2Seq,
        vocab_dtype: torch.dtype | None = None,
        candidates: int = 0,
    ) -> None:
        self.model, self.decoder = model, model.decoder
        self.vocab_dtype, self.candidates = vocab_dtype, candidates
        # a DeepGRU (layer norm, deep transition, residual) has no shortcut
        plain = self.decoder.plain_gru
        self.shortcut = SHORTCUTS.get(self.decoder.style) if plain else None
        self._tables: _Tables | None = None
        self._vocab: LoweredProjection | None = None

    def features(self, prev_tokens: Tensor, state: DecoderState) -> Features:
        """``reference_step`` on the embedded tokens: prev_tokens ``(B,)`` → features
        ``(B, H)``, new state, attention."""
        dec = self.decoder
        if self.shortcut is None or not fast_path(dec, prev_tokens):
            return dec.reference_step(dec.embed(prev_tokens), state)
        split, features = self.shortcut
        if self._tables is None:
            self._tables = _Tables(dec, split)
        return features(dec, self._tables, prev_tokens, state)

    def __call__(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """prev_tokens ``(B,)`` → log_probs ``(B, V)`` (float32), new state, weights
        ``(B, S)``: what ``Seq2Seq.step`` computes."""
        feat, state, att = self.features(prev_tokens, state)
        if self.vocab_dtype is None or not fast_path(self.decoder, prev_tokens):
            logits = self.decoder.output(feat)
        else:
            if self._vocab is None:
                output = self.decoder.output
                self._vocab = LoweredProjection(
                    output, self.vocab_dtype, self.candidates
                )
            logits = self._vocab(feat)
        return F.log_softmax(logits.float(), dim=-1), state, att.weights


def search_step(
    model: nn.Module, vocab_dtype: torch.dtype | None = None, candidates: int = 0
) -> StepFn:
    """The step a search runs over ``model`` for one run: a ``SearchStep`` for a
    ``Seq2Seq``, their mixture for an ``Ensemble``, else the model's own ``step``."""
    if isinstance(model, Ensemble):
        members = [search_step(m, vocab_dtype, candidates) for m in model.members]
        return mixed_step(members)
    if isinstance(model, Seq2Seq):
        return SearchStep(model, vocab_dtype, candidates)
    return model.step
