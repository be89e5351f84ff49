"""Target side: ``DecoderState`` and the Bahdanau-style and Luong-style GRU decoders.

Both styles work with any attention from ``attention.py``. Each style is *defined* by
its ``reference_step``: one target step, embedding and state in, features, new state
and attention out. ``step`` and scheduled sampling run it as it is (the search runs
an equal step with fewer FLOPs, ``decoding/shortcuts.py``), and
``reference_features`` loops it over the target steps: the definition of teacher
forcing. ``forward`` (teacher forcing for training) runs ``fast_features`` instead, an
optimisation of that loop that tests hold equal to it in value and gradient
(``tests/test_decoder.py``): the embeddings' part of the GRU gates as one matmul before
the loop, the output layer once after it, a hand-stepped GRU (``gru.py``) whose loop
body can go through ``torch.compile``, and, for Luong without input feeding, no loop
at all (one GRU call over all steps, one batched attention).

Shapes: ``B`` batch, ``T`` target steps, ``S`` source length, ``E`` embedding size,
``H`` decoder hidden size, ``L`` decoder layers, ``C`` context size, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.data.tokenizer import BOS_ID, PAD_ID, UNK_ID
from seq2seq.model.attention import Attention, AttentionOutput, Keys, attend_step
from seq2seq.model.compiled import compiled
from seq2seq.model.deep_gru import build_rnn
from seq2seq.model.dropout import Dropout, dropout
from seq2seq.model.gru import StackedGRU
from seq2seq.model.loss import (
    DEFAULT_LOSS_CHUNK_MB,
    fused_chunk_rows,
    linear_token_loss,
    token_loss,
)
from seq2seq.model.precision import cast_like_autocast
from seq2seq.model.shape_buckets import (
    bucket_size,
    buckets_active,
    linear_rows,
    pad_loss_rows,
    rows_in_buckets,
)


class DecoderState(NamedTuple):
    """A value: hidden ``(L, B, H)``; feed ``(B, F)`` the previous attentional vector
    h̃_{t-1} for Luong input feeding (``(B, 0)`` when unused); keys from
    ``attention.prepare``."""

    hidden: Tensor
    feed: Tensor
    keys: Keys

    def select(self, index: Tensor) -> DecoderState:
        """Reorder / expand the batch: ``index`` ``(B',)`` long."""
        return DecoderState(
            self.hidden.index_select(1, index),
            self.feed.index_select(0, index),
            self.keys.select(index),
        )

    def select_beams(self, rows: Tensor, sources: Tensor | None = None) -> DecoderState:
        """Beam search's reordering: the hypotheses ``rows`` ``(B'·K,)`` of the
        sources ``sources`` ``(B',)`` (None: the same sources as now). The keys stay
        one per source (``attention.attend_step`` reads them for all its beams)."""
        keys = self.keys if sources is None else self.keys.select(sources)
        return DecoderState(
            self.hidden.index_select(1, rows), self.feed.index_select(0, rows), keys
        )


class DecoderOutput(NamedTuple):
    """logits ``(B, T, V)``, or ``(N, V)`` for the ``rows`` asked for, or None when
    the loss was asked for instead; attention ``(B, T, S)``; head_attention
    ``(B, heads, T, S)`` for multi-head attention, else None; loss: the summed
    ``token_loss`` of the ``targets`` asked for, else None."""

    logits: Tensor | None
    attention: Tensor
    head_attention: Tensor | None
    loss: Tensor | None = None


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def pad_loop_inputs(
    gates: Tensor, state: DecoderState, bucket: int | None = None
) -> tuple[Tensor, DecoderState]:
    """Pad the step loop's batch and source length up to multiples of ``bucket``, so
    that CUDA graphs (recorded per shape) are reused across token buckets; without
    ``bucket``, to ``bucket_size``'s sizes, so that oneDNN's bf16 kernels (built per
    shape) are.

    gates ``(T, B, 3H)``, state of ``B`` rows with keys ``(B, S, ·)`` → gates
    ``(T, B', 3H)`` and a state of ``B'`` rows with keys ``(B', S', ·)``. The new
    source positions are masked (their weight is exactly 0, so the real rows are
    unchanged); the new rows are zeros whose mask keeps one position, so that their
    softmax, which the caller slices away, stays finite (a NaN there would reach the
    weights' gradients through 0 · NaN)."""
    b, s = state.keys.mask.shape
    size = bucket_size if bucket is None else partial(_round_up, multiple=bucket)
    pad_b, pad_s = size(b) - b, size(s) - s
    if not pad_b and not pad_s:
        return gates, state

    def pad(x: Tensor) -> Tensor:  # (B, S, ·) → (B', S', ·)
        return F.pad(x, (0, 0, 0, pad_s, 0, pad_b))

    keys = state.keys
    values = pad(keys.values)
    mask = F.pad(keys.mask, (0, pad_s, 0, pad_b))
    mask[b:, 0] = True
    padded = Keys(
        values,
        values if keys.keys is keys.values else pad(keys.keys),
        mask,
        None if keys.projected is None else pad(keys.projected),
    )
    hidden = F.pad(state.hidden, (0, 0, 0, pad_b))  # (L, B', H)
    feed = F.pad(state.feed, (0, 0, 0, pad_b))
    return F.pad(gates, (0, 0, 0, pad_b)), DecoderState(hidden, feed, padded)


def unpad_loop_outputs(
    batch: int, source: int, weights: Tensor, heads: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """The real rows and source positions of the loop's weights ``(B', T, S')`` and
    head weights ``(B', h, T, S')``."""
    weights = weights[:batch, :, :source]
    return weights, None if heads is None else heads[:batch, ..., :source]


def word_dropout(tokens: Tensor, p: float, training: bool) -> Tensor:
    """Replace each input token (not PAD or BOS) by UNK with probability ``p``."""
    if not training or p <= 0.0:
        return tokens
    drop = torch.rand(tokens.shape, device=tokens.device) < p
    drop &= (tokens != PAD_ID) & (tokens != BOS_ID)
    return tokens.masked_fill(drop, UNK_ID)


class OutputLayer(nn.Module):
    """Dropout, an optional projection to the embedding size (when tying needs it) and
    the vocabulary projection, applied once to all collected features."""

    def __init__(
        self,
        feature_size: int,
        vocab_size: int,
        dropout: float,
        tied: nn.Embedding | None = None,
    ) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.pre = nn.Identity()
        in_size = feature_size
        if tied is not None and tied.embedding_dim != feature_size:
            self.pre = nn.Linear(feature_size, tied.embedding_dim, bias=False)
            in_size = tied.embedding_dim
        self.proj = nn.Linear(in_size, vocab_size)
        if tied is not None:
            self.proj.weight = tied.weight
        # float32 bytes of logits above which ``loss`` runs fused in chunks (0: never);
        # set from trainer.loss_chunk_mb, not saved with the weights
        self.chunk_bytes = DEFAULT_LOSS_CHUNK_MB * 2**20

    def forward(self, features: Tensor) -> Tensor:
        """features ``(..., F)`` → logits ``(..., V)``; under CPU bf16 autocast with
        the rows padded to ``bucket_size`` (R-Drop's and scheduled sampling's logits,
        a bf16 search's steps): oneDNN builds a kernel per new row count, about 25 ms
        for the vocabulary projection against 7 ms to run it."""
        return rows_in_buckets(
            lambda rows: self.proj(self.pre(rows)), self.dropout(features)
        )

    def loss(self, features: Tensor, targets: Tensor, smoothing: float) -> Tensor:
        """``token_loss(self(features), targets, smoothing)`` for features ``(N, F)``:
        in one piece while the logits fit in ``chunk_bytes`` (float32), else fused
        with the projection in chunks of rows that do (``linear_token_loss``; on CPU
        chunks of at most 32 MB), so a large vocabulary's logits never exist whole."""
        features, targets = pad_loss_rows(features, targets)
        x = self.pre(self.dropout(features))
        vocab = self.proj.out_features
        if not self.chunk_bytes or x.size(0) * vocab * 4 <= self.chunk_bytes:
            return token_loss(self.proj(x), targets, smoothing)
        chunk = fused_chunk_rows(vocab, self.chunk_bytes, x.device)
        return linear_token_loss(
            x, self.proj.weight, self.proj.bias, targets, smoothing, chunk
        )


def _stack(outs: list[AttentionOutput]) -> tuple[Tensor, Tensor | None]:
    """Per-step weights ``(B, S)``, heads ``(B, h, S)`` → ``(B, T, S)``,
    ``(B, h, T, S)``."""
    weights = torch.stack([o.weights for o in outs], dim=1)
    if outs[0].head_weights is None:
        return weights, None
    return weights, torch.stack([o.head_weights for o in outs], dim=2)


class Decoder(nn.Module):
    """Shared parts of both styles: embeddings, GRU, attention, output layer.

    Subclasses define ``_rnn_input_size``, ``_feature_layer``, ``reference_step`` (the
    model) and ``fast_features`` (its optimised teacher-forcing loop).
    """

    style: str
    supports_feeding: bool = False
    supports_context_to_layers: bool = False
    # Run the step loop's body through torch.compile (``trainer.compile``): it fuses
    # the element-wise work of a step (GRU gates, additive scores, softmax) into few
    # kernels, which matters most where each kernel launch costs (CUDA).
    compile_loop: bool = False
    # torch.compile's mode for it: "default" or "reduce-overhead" (CUDA graphs)
    compile_mode: str = "default"
    # Under "reduce-overhead": the loop's batch and source length padded up to
    # multiples of this (0: no padding), so a few recorded graphs serve all batches
    loop_bucket: int = 0

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_size: int,
        attention: Attention,
        layers: int = 1,
        dropout: float = 0.0,
        emb_dropout: float = 0.0,
        word_dropout: float = 0.0,
        tie_embeddings: bool = False,
        input_feeding: bool = False,
        layer_norm: bool = False,
        transition_depth: int = 1,
        residual: bool = False,
        context_to_layers: bool = False,
    ) -> None:
        """``input_feeding`` applies to the Luong style only; ``tie_embeddings`` shares
        the target embeddings with the vocabulary projection (with a projection from
        the feature size to ``emb_dim`` when they differ); ``layer_norm``,
        ``transition_depth`` and ``residual`` make the GRU a ``DeepGRU``;
        ``context_to_layers`` (Luong without input feeding, 2+ layers): RNMT+'s
        decoder, the attention reads the bottom layer and its context feeds every
        layer above (``LuongDecoder``)."""
        super().__init__()
        if context_to_layers and not self.supports_context_to_layers:
            raise ValueError(
                f"the {self.style} decoder cannot feed the context to layers"
            )
        self.hidden_size = hidden_size
        self.layers = layers
        self.context_to_layers = context_to_layers
        self.layer_dropout = dropout if layers > 1 else 0.0
        self.residual = residual
        self.word_dropout = word_dropout
        self.input_feeding = input_feeding and self.supports_feeding
        self.feed_size = hidden_size if self.input_feeding else 0
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.emb_dropout = Dropout(emb_dropout)
        self.attention = attention
        deep = {"layer_norm": layer_norm, "transition_depth": transition_depth}
        self.rnn = build_rnn(
            self._rnn_input_size(emb_dim, attention.context_size),
            hidden_size,
            1 if context_to_layers else layers,
            dropout,
            residual=residual,
            **deep,
        )
        # context_to_layers: layers 2..L, one GRU each over [h_{k-1}; c]
        upper = hidden_size + attention.context_size
        self.upper = nn.ModuleList(
            build_rnn(upper, hidden_size, 1, 0.0, **deep)
            for _ in range(layers - 1 if context_to_layers else 0)
        )
        self.feature = self._feature_layer(emb_dim, attention.context_size)
        tied = self.embedding if tie_embeddings else None
        self.output = OutputLayer(hidden_size, vocab_size, dropout, tied)

    def _rnn_input_size(self, emb_dim: int, context_size: int) -> int:
        raise NotImplementedError

    def _feature_layer(self, emb_dim: int, context_size: int) -> nn.Module:
        raise NotImplementedError

    def reference_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """One step, the definition of the model: emb ``(B, E)`` → features
        ``(B, H)``, new state, attention."""
        raise NotImplementedError

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``reference_features``, computed faster (see the module docstring)."""
        raise NotImplementedError

    def init_state(self, memory: Tensor, mask: Tensor, hidden: Tensor) -> DecoderState:
        """memory ``(B, S, Hm)``, mask ``(B, S)``, hidden ``(B, L, H)`` → state; the
        attention keys are projected here, once per batch."""
        keys = self.attention.cast_once(self.attention.prepare(memory, mask))
        feed = hidden.new_zeros(hidden.size(0), self.feed_size)
        return DecoderState(hidden.transpose(0, 1).contiguous(), feed, keys)

    @property
    def plain_gru(self) -> bool:
        """Whether the GRU is ``nn.GRU`` (no layer norm, deep transition or residual
        stack): the hand-stepped ``StackedGRU`` loops and the search's shortcuts
        apply only then; a ``DeepGRU`` runs ``reference_step`` (its own loop)."""
        return isinstance(self.rnn, nn.GRU) and not self.context_to_layers

    @property
    def has_step_loop(self) -> bool:
        """Whether ``fast_features`` has a step loop that ``trainer.compile`` can
        compile."""
        return self.plain_gru

    def _loop_body(self, fn: Callable) -> Callable:
        """The loop body ``fn`` (a function of the class) bound to this decoder,
        compiled when ``compile_loop`` is set."""
        return partial(
            compiled(fn, self.compile_mode) if self.compile_loop else fn, self
        )

    def _loop_inputs(
        self, gates: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState]:
        """gates ``(T, B, 3H)`` and the state, padded to ``loop_bucket`` multiples
        when the compiled loop records CUDA graphs, to shape buckets under CPU bf16
        autocast (``pad_loop_inputs``)."""
        graphs = self.compile_loop and self.compile_mode == "reduce-overhead"
        if graphs and self.loop_bucket > 1:
            return pad_loop_inputs(gates, state, self.loop_bucket)
        if buckets_active(gates.device):
            return pad_loop_inputs(gates, state)
        return gates, state

    def embed(self, tokens: Tensor) -> Tensor:
        """tokens ``(B, ...)`` → dropped-out embeddings ``(B, ..., E)``."""
        return self.emb_dropout(self.embedding(tokens))

    def reference_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Teacher forcing by definition, ``reference_step`` over all steps: emb
        ``(B, T, E)`` → features ``(B, T, H)``, weights ``(B, T, S)``, head weights
        ``(B, h, T, S)`` or None."""
        feats, outs = [], []
        for t in range(emb.size(1)):
            feat, state, att = self.reference_step(emb[:, t], state)
            feats.append(feat)
            outs.append(att)
        return (torch.stack(feats, dim=1), *_stack(outs))

    def forward(
        self,
        tgt_in: Tensor,
        state: DecoderState,
        sampling_ratio: float = 0.0,
        rows: Tensor | None = None,
        targets: Tensor | None = None,
        smoothing: float = 0.0,
    ) -> DecoderOutput:
        """Teacher forcing: tgt_in ``(B, T)`` (BOS + pieces) → ``DecoderOutput``.

        ``rows`` ``(N,)`` (flat indices ``b * T + t``, e.g. ``Batch.tgt_rows``) limits
        the output layer to those positions: the padding's share of the largest
        matmul (features × vocabulary) and of the loss is skipped. With
        ``sampling_ratio > 0`` (scheduled sampling) each (sentence, step) input is
        replaced by the previous step's argmax prediction with that probability.
        With ``targets`` (``(N,)`` given ``rows``, else ``(B, T)``) the output is the
        loss (label smoothing ``smoothing``), not the logits: the output layer and
        the loss then run together (``OutputLayer.loss``)."""
        tokens = word_dropout(tgt_in, self.word_dropout, self.training)
        if sampling_ratio > 0.0:
            out = self._forward_sampled(tokens, state, sampling_ratio)
            if rows is not None:
                out = out._replace(
                    logits=out.logits.flatten(0, 1).index_select(0, rows)
                )
            if targets is None:
                return out
            loss = token_loss(out.logits, targets, smoothing)
            return out._replace(logits=None, loss=loss)
        feats, weights, heads = self.fast_features(self.embed(tokens), state)
        if rows is not None:
            feats = feats.flatten(0, 1).index_select(0, rows)  # (N, H)
        if targets is None:
            return DecoderOutput(self.output(feats), weights, heads)
        flat = feats.reshape(-1, feats.size(-1))
        loss = self.output.loss(flat, targets.reshape(-1), smoothing)
        return DecoderOutput(None, weights, heads, loss)

    def _forward_sampled(
        self, tokens: Tensor, state: DecoderState, ratio: float
    ) -> DecoderOutput:
        """Scheduled sampling (Bengio et al., 2015): each input may be the previous
        prediction, so the reference step runs, with the logits at every step."""
        use_pred = torch.rand(tokens.shape, device=tokens.device) < ratio  # (B, T)
        logits, outs = [], []
        prev = tokens[:, 0]
        for t in range(tokens.size(1)):
            if t > 0:
                pred = logits[-1].argmax(dim=-1)
                prev = torch.where(use_pred[:, t], pred, tokens[:, t])
            feat, state, att = self.reference_step(self.embed(prev), state)
            logits.append(self.output(feat))
            outs.append(att)
        return DecoderOutput(torch.stack(logits, dim=1), *_stack(outs))

    def step(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """prev_tokens ``(B,)`` → log_probs ``(B, V)`` (float32), new state, weights
        ``(B, S)``: ``reference_step`` and the output layer. The search runs the same
        step with fewer FLOPs (``decoding/shortcuts.py``)."""
        feat, state, att = self.reference_step(self.embed(prev_tokens), state)
        log_probs = F.log_softmax(self.output(feat).float(), dim=-1)
        return log_probs, state, att.weights


class BahdanauDecoder(Decoder):
    """Bahdanau et al. (2015): attend with the previous state, then update the GRU.

    ``c_t = attend(s_{t-1})``; ``s_t = GRU([e(y_{t-1}); c_t], s_{t-1})``; deep output
    ``o_t = tanh(W [s_t; c_t; e(y_{t-1})])`` (tanh in place of the paper's maxout).
    """

    style = "bahdanau"

    def _rnn_input_size(self, emb_dim: int, context_size: int) -> int:
        return emb_dim + context_size

    def _feature_layer(self, emb_dim: int, context_size: int) -> nn.Module:
        return nn.Linear(self.hidden_size + context_size + emb_dim, self.hidden_size)

    def _loop_step(
        self, gru: StackedGRU, gi_emb: Tensor, hidden: list[Tensor], keys: Keys
    ) -> tuple[list[Tensor], AttentionOutput]:
        """The body of ``fast_features``'s loop, the recurrent part of
        ``reference_step``: attend with s_{t-1}, update the GRU."""
        att = self.attention.attend(hidden[-1], keys)  # c_t (B, C)
        return gru.step(gi_emb, att.context, hidden), att

    def _deep_output(self, s: Tensor, context: Tensor, emb: Tensor) -> Tensor:
        """``tanh(W [s; c; e])`` for one step ``(B, ·)`` or all steps ``(B, T, ·)``."""
        return torch.tanh(self.feature(torch.cat([s, context, emb], dim=-1)))

    def reference_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        # nn.GRU on the concatenated input is faster for one step (search) than the
        # hand-stepped cell (measured: greedy 134 vs 102 sent/s).
        att = attend_step(self.attention, state.hidden[-1], state.keys)  # c_t (B, C)
        rnn_in = torch.cat([emb, att.context], dim=-1).unsqueeze(1)  # (B, 1, E + C)
        out, hidden = self.rnn(rnn_in, state.hidden)
        feat = self._deep_output(out[:, 0], att.context, emb)
        return feat, DecoderState(hidden, state.feed, state.keys), att

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The step loop holds only what depends on the recurrence: the embeddings'
        part of the GRU input gates is one matmul before the loop, the deep output
        one matmul after it. A ``DeepGRU`` runs the reference loop."""
        if not self.plain_gru:
            return self.reference_features(emb, state)
        gru = StackedGRU(self.rnn, emb.size(-1), self.training)
        gates = gru.embed_gates(emb.transpose(0, 1))  # (T, B, 3H), all steps at once
        b, source = state.keys.mask.shape
        gates, state = self._loop_inputs(gates, state)
        hidden = list(state.hidden.unbind(0))
        recur = self._loop_body(BahdanauDecoder._loop_step)
        tops, contexts, outs = [], [], []
        for gi_emb in gates.unbind(0):
            hidden, att = recur(gru, gi_emb, hidden, state.keys)
            tops.append(hidden[-1])
            contexts.append(att.context)
            outs.append(att)
        s = torch.stack(tops, dim=1)[:b]  # (B, T, H)
        context = torch.stack(contexts, dim=1)[:b]  # (B, T, C)
        weights = unpad_loop_outputs(b, source, *_stack(outs))
        return (self._deep_output(s, context, emb), *weights)


class LuongDecoder(Decoder):
    """Luong et al. (2015): update the GRU, then attend with the new state.

    ``h_t = GRU([e(y_{t-1}); h̃_{t-1}], h_{t-1})`` (h̃_{t-1} only with input feeding);
    ``c_t = attend(h_t)``; attentional hidden ``h̃_t = tanh(W_c [c_t; h_t])``.
    Without input feeding the steps are independent given the GRU outputs, so
    ``fast_features`` runs the GRU over all steps in one call and attends once.
    """

    style = "luong"
    supports_feeding = True
    supports_context_to_layers = True

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

    def _layered_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """``reference_step`` with ``context_to_layers``: the bottom layer, the
        attention on its state, the layers above on [h; c], h̃ = tanh(W_c [c; h_L])."""
        low, h_low = self.rnn(emb.unsqueeze(1), state.hidden[:1])  # (B, 1, H)
        att = attend_step(self.attention, low[:, 0], state.keys)
        top, finals = self._upper_layers(
            low, att.context.unsqueeze(1), state.hidden[1:]
        )
        feat = torch.tanh(self.feature(torch.cat([att.context, top[:, 0]], dim=-1)))
        hidden = torch.cat([h_low, *finals])
        return feat, DecoderState(hidden, state.feed, state.keys), att

    def _layered_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``fast_features`` with ``context_to_layers``: each layer over all steps in
        one call, the attention once between the bottom layer and the rest."""
        low, _ = self.rnn(emb, state.hidden[:1])  # (B, T, H)
        att = self.attention.attend(low, state.keys)  # (B, T, C), (B, T, S)
        top, _ = self._upper_layers(low, att.context, state.hidden[1:])
        feats = torch.tanh(self.feature(torch.cat([att.context, top], dim=-1)))
        return feats, att.weights, att.head_weights

    def reference_step(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        if self.context_to_layers:
            return self._layered_step(emb, state)
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
        if self.context_to_layers:
            return self._layered_features(emb, state)
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
        return (feats, *unpad_loop_outputs(b, source, *_stack(outs)))


DECODERS: dict[str, type[Decoder]] = {
    "bahdanau": BahdanauDecoder,
    "luong": LuongDecoder,
}
