"""Target side, what every decoder style shares: the ``Decoder`` base class
(embeddings, GRU, attention, output layer, the teacher-forcing and search entry
points); its state and output are ``decoder_state.py``'s.

Each style is a subclass in a module of its own, where it can be read whole:
``bahdanau.py`` (attend with the previous state, then update the GRU), ``luong.py``
(update the GRU, then attend; input feeding) and ``rnmt.py`` (RNMT+: Luong with the
attention on the bottom layer and its context fed to every layer above). All work with
any attention from ``attention.py``; the output layer (vocabulary projection and loss)
is ``output_layer.py``; ``seq2seq.py``'s ``DECODERS`` names the styles.

Each style is *defined* by its ``reference_step``: one target step, embedding and
state in, features, new state and attention out. ``step`` and scheduled sampling run
it as it is (the search runs an equal step with fewer FLOPs, ``decoding/shortcuts.py``),
and ``reference_features`` loops it over the target steps: the definition of teacher
forcing. ``forward`` (teacher forcing for training) runs ``fast_features`` instead, an
optimisation of that loop that tests hold equal to it in value and gradient
(``tests/test_decoder.py``): the embeddings' part of the GRU gates as one matmul
before the loop, the output layer once after it, a hand-stepped GRU
(``stepped_gru.py``) whose loop body can go through ``torch.compile`` (its batch
padded by ``loop_padding.py``), and, for Luong without input feeding, no loop at
all (one GRU call over all steps, one batched attention).

Shapes: ``B`` batch, ``T`` target steps, ``S`` source length, ``E`` embedding size,
``H`` decoder hidden size, ``L`` decoder layers, ``C`` context size, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.data.tokenizer import BOS_ID, PAD_ID, UNK_ID
from seq2seq.model.attention import Attention, AttentionOutput
from seq2seq.model.compiled import compiled
from seq2seq.model.decoder_state import DecoderOutput, DecoderState
from seq2seq.model.deep_gru import build_rnn
from seq2seq.model.dropout import Dropout
from seq2seq.model.loop_padding import pad_loop_inputs
from seq2seq.model.loss import token_loss
from seq2seq.model.output_layer import OutputLayer
from seq2seq.model.shape_buckets import buckets_active


def word_dropout(tokens: Tensor, p: float, training: bool) -> Tensor:
    """Replace each input token (not PAD or BOS) by UNK with probability ``p``."""
    if not training or p <= 0.0:
        return tokens
    drop = torch.rand(tokens.shape, device=tokens.device) < p
    drop &= (tokens != PAD_ID) & (tokens != BOS_ID)
    return tokens.masked_fill(drop, UNK_ID)


def stack_steps(outs: list[AttentionOutput]) -> tuple[Tensor, Tensor | None]:
    """Per-step weights ``(B, S)``, heads ``(B, h, S)`` → ``(B, T, S)``,
    ``(B, h, T, S)``."""
    weights = torch.stack([o.weights for o in outs], dim=1)
    if outs[0].head_weights is None:
        return weights, None
    return weights, torch.stack([o.head_weights for o in outs], dim=2)


class Decoder(nn.Module):
    """Shared parts of every style: embeddings, GRU, attention, output layer.

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
        layer above (``RNMTDecoder``, which builds with it on)."""
        super().__init__()
        if context_to_layers and not self.supports_context_to_layers:
            raise ValueError(
                f"{type(self).__name__} cannot feed the context to layers "
                "(RNMTDecoder does)"
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
        return (torch.stack(feats, dim=1), *stack_steps(outs))

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
        return DecoderOutput(torch.stack(logits, dim=1), *stack_steps(outs))

    def step(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """prev_tokens ``(B,)`` → log_probs ``(B, V)`` (float32), new state, weights
        ``(B, S)``: ``reference_step`` and the output layer. The search runs the same
        step with fewer FLOPs (``decoding/shortcuts.py``)."""
        feat, state, att = self.reference_step(self.embed(prev_tokens), state)
        log_probs = F.log_softmax(self.output(feat).float(), dim=-1)
        return log_probs, state, att.weights
