"""Target side: ``DecoderState`` and the Bahdanau-style and Luong-style GRU decoders.

Both styles work with any attention from ``attention.py``. Each style is *defined* by
its ``reference_step``: one target step, embedding and state in, features, new state
and attention out. Search (``step``) and scheduled sampling run it as it is, and
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

import contextlib
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.data.tokenizer import BOS_ID, PAD_ID, UNK_ID
from seq2seq.model.attention import Attention, AttentionOutput, Keys, attend_step
from seq2seq.model.gru import StackedGRU
from seq2seq.model.precision import cast_like_autocast
from seq2seq.model.quantized import Int8Projection


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
    """logits ``(B, T, V)``, or ``(N, V)`` for the ``rows`` asked for; attention
    ``(B, T, S)``; head_attention ``(B, heads, T, S)`` for multi-head attention, else
    None."""

    logits: Tensor
    attention: Tensor
    head_attention: Tensor | None


_COMPILED: dict[Callable, Callable] = {}


def compiled(fn: Callable) -> Callable:
    """``torch.compile`` of ``fn`` with dynamic shapes, made once per process.

    The batch size and the source length change from batch to batch (token
    buckets): dynamic shapes let one graph serve them all instead of recompiling
    per shape. Compiling the plain function, not a bound method, keeps the module
    free of compiled state (it copies, pickles and saves as usual)."""
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn, dynamic=True)
    return _COMPILED[fn]


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
        self.dropout = nn.Dropout(dropout)
        self.pre = nn.Identity()
        in_size = feature_size
        if tied is not None and tied.embedding_dim != feature_size:
            self.pre = nn.Linear(feature_size, tied.embedding_dim, bias=False)
            in_size = tied.embedding_dim
        self.proj = nn.Linear(in_size, vocab_size)
        if tied is not None:
            self.proj.weight = tied.weight

    def forward(self, features: Tensor) -> Tensor:
        """features ``(..., F)`` → logits ``(..., V)``."""
        return self.proj(self.pre(self.dropout(features)))


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
    # Run the step loop's body through torch.compile (``trainer.compile``): it fuses
    # the element-wise work of a step (GRU gates, additive scores, softmax) into few
    # kernels, which matters most where each kernel launch costs (CUDA).
    compile_loop: bool = False

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
    ) -> None:
        """``input_feeding`` applies to the Luong style only; ``tie_embeddings`` shares
        the target embeddings with the vocabulary projection (with a projection from
        the feature size to ``emb_dim`` when they differ)."""
        super().__init__()
        self.hidden_size = hidden_size
        self.layers = layers
        self.word_dropout = word_dropout
        self.input_feeding = input_feeding and self.supports_feeding
        self.feed_size = hidden_size if self.input_feeding else 0
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.emb_dropout = nn.Dropout(emb_dropout)
        self.attention = attention
        self.rnn = nn.GRU(
            self._rnn_input_size(emb_dim, attention.context_size),
            hidden_size,
            num_layers=layers,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
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
        keys = self.attention.prepare(memory, mask)
        values = cast_like_autocast(keys.values)  # once, not at every step
        same = keys.keys is keys.values
        keys = Keys(
            values, values if same else cast_like_autocast(keys.keys), keys.mask
        )
        feed = hidden.new_zeros(hidden.size(0), self.feed_size)
        return DecoderState(hidden.transpose(0, 1).contiguous(), feed, keys)

    @property
    def has_step_loop(self) -> bool:
        """Whether ``fast_features`` steps through time at all."""
        return True

    def _loop_body(self, fn: Callable) -> Callable:
        """The loop body ``fn`` (a function of the class) bound to this decoder,
        compiled when ``compile_loop`` is set."""
        return partial(compiled(fn) if self.compile_loop else fn, self)

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
    ) -> DecoderOutput:
        """Teacher forcing: tgt_in ``(B, T)`` (BOS + pieces) → ``DecoderOutput``.

        ``rows`` ``(N,)`` (flat indices ``b * T + t``, e.g. ``Batch.tgt_rows``) limits
        the output layer to those positions: the padding's share of the largest
        matmul (features × vocabulary) and of the loss is skipped. With
        ``sampling_ratio > 0`` (scheduled sampling) each (sentence, step) input is
        replaced by the previous step's argmax prediction with that probability."""
        tokens = word_dropout(tgt_in, self.word_dropout, self.training)
        if sampling_ratio > 0.0:
            out = self._forward_sampled(tokens, state, sampling_ratio)
            if rows is None:
                return out
            return out._replace(logits=out.logits.flatten(0, 1).index_select(0, rows))
        feats, weights, heads = self.fast_features(self.embed(tokens), state)
        if rows is not None:
            feats = feats.flatten(0, 1).index_select(0, rows)  # (N, H)
        return DecoderOutput(self.output(feats), weights, heads)

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
        ``(B, S)``."""
        feat, state, att = self.search_features(prev_tokens, state)
        setting = _VOCAB_SETTING.get()
        if setting is None or not _fast_search(self, prev_tokens):
            logits = self.output(feat)
        else:
            logits = _vocab_logits(self, feat, setting)
        log_probs = F.log_softmax(logits.float(), dim=-1)
        return log_probs, state, att.weights

    def search_features(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """The search's step before the output layer: ``reference_step`` on the
        embedded tokens. Both styles compute it with fewer FLOPs at inference in fp32
        (equal up to float rounding, tests/test_decoder.py): the embedding's shares
        of the first GRU layer's gates (and of Bahdanau's deep output) are rows of
        tables over the vocabulary (``_SearchTables``, built once per weights
        version), and in beam search the context's shares are the sources' values
        projected once and mixed by each beam's weights (``_context_share``)."""
        return self.reference_step(self.embed(prev_tokens), state)


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

    def search_features(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """``reference_step`` from the search tables (``_SearchTables``): attend with
        s_{t-1}; the GRU's input gates and the deep output's input are the token's
        table rows plus the context's shares."""
        if not _fast_search(self, prev_tokens):
            return super().search_features(prev_tokens, state)
        tables = _search_tables(self)
        att = attend_step(self.attention, state.hidden[-1], state.keys)
        ctx, keys = _context_share(att, state.keys, tables.w_ctx, prev_tokens.size(0))
        gates = 3 * self.hidden_size
        gi = tables.gates.index_select(0, prev_tokens) + ctx[:, :gates]
        hidden = tables.gru.step_gates(gi, list(state.hidden.unbind(0)))
        pre = tables.base.index_select(0, prev_tokens) + ctx[:, gates:]
        feat = torch.tanh(torch.addmm(pre, hidden[-1], tables.w_state))
        return feat, DecoderState(torch.stack(hidden), state.feed, keys), att

    def _search_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """W_o [s; c; e] + b_o: the embedding's share per token with the bias
        ``(V, H)``, the context's columns beside the GRU's ``(3H + H, C)``, the
        state's columns transposed ``(H, H)``."""
        h, c = self.hidden_size, self.attention.context_size
        w_o, w_ih = self.feature.weight, self.rnn.weight_ih_l0  # (H, H + C + E)
        emb = self.embedding.weight
        base = F.linear(emb, w_o[:, h + c :], self.feature.bias)
        w_ctx = torch.cat([w_ih[:, emb.size(1) :], w_o[:, h : h + c]])
        return base, w_ctx, w_o[:, :h].t()

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The step loop holds only what depends on the recurrence: the embeddings'
        part of the GRU input gates is one matmul before the loop, the deep output
        one matmul after it."""
        gru = StackedGRU(self.rnn, emb.size(-1), self.training)
        gates = gru.embed_gates(emb.transpose(0, 1))  # (T, B, 3H), all steps at once
        hidden = list(state.hidden.unbind(0))
        recur = self._loop_body(BahdanauDecoder._loop_step)
        tops, contexts, outs = [], [], []
        for gi_emb in gates.unbind(0):
            hidden, att = recur(gru, gi_emb, hidden, state.keys)
            tops.append(hidden[-1])
            contexts.append(att.context)
            outs.append(att)
        s, context = torch.stack(tops, dim=1), torch.stack(contexts, dim=1)
        return (self._deep_output(s, context, emb), *_stack(outs))


class _SearchTables(NamedTuple):
    """A decoder's weights rearranged for its ``search_features``; ``version``: the
    weights they were built from (pointer and in-place version of each)."""

    version: tuple
    gates: Tensor  # (V, 3H): W_ie e_v + b_i, the first GRU layer's input gates
    gru: StackedGRU
    base: Tensor  # Bahdanau (V, H): W_oe e_v + b_o; Luong (H,): the bias of W_c
    w_ctx: Tensor  # the context's columns: (3H + H, C) Bahdanau, (H, C) Luong
    w_state: Tensor  # (H, H), transposed: the state's columns of W_o / W_c


# One table set per decoder, dropped with it (a weak key, so copies never share one).
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fast_search(dec: Decoder, tokens: Tensor) -> bool:
    """Whether ``search_features`` may use the tables: inference in fp32 (training,
    autograd and autocast take ``reference_step`` itself)."""
    autocast = torch.is_autocast_enabled(tokens.device.type)
    return not (dec.training or torch.is_grad_enabled() or autocast)


class _VocabSetting(NamedTuple):
    """The search's vocabulary projection: its ``dtype``, and how many of each row's
    best logits (``candidates``) are computed again in fp32."""

    dtype: torch.dtype
    candidates: int


# Set for one search by ``vocab_precision`` (``decode.vocab_precision``); None: fp32.
_VOCAB_SETTING: ContextVar[_VocabSetting | None] = ContextVar(
    "vocab_setting", default=None
)


@contextlib.contextmanager
def vocab_precision(dtype: torch.dtype | None, candidates: int = 0) -> Iterator[None]:
    """Within the block, ``Decoder.step`` at inference in fp32 projects its features
    onto the vocabulary in ``dtype`` (None: fp32; ``torch.bfloat16``, or
    ``torch.qint8`` for int8) with a copy of the output weights converted once,
    then computes each row's ``candidates`` best logits again in fp32. The
    projection is most of a search step's FLOPs, and bf16 or int8 runs it faster on
    some CPUs (``model/device.py`` measures); the search only ever picks among a
    row's best few, so with the candidates exact its choices are fp32's but for
    near-ties at the rounding (which also moves the log-softmax's normaliser a
    little). The log-softmax and the search stay fp32."""
    setting = None if dtype is None else _VocabSetting(dtype, candidates)
    token = _VOCAB_SETTING.set(setting)
    try:
        yield
    finally:
        _VOCAB_SETTING.reset(token)


class _VocabWeights(NamedTuple):
    """The vocabulary projection in another precision: ``project`` maps features to
    logits (fp32) with weights converted once; ``version`` as in ``_SearchTables``
    (with the dtype)."""

    version: tuple
    project: Callable[[Tensor], Tensor]


_VOCAB: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _lowered_projection(proj: nn.Linear, dtype: torch.dtype) -> Callable:
    """``proj`` with its weight in ``dtype``: bf16 (weight, bias and features cast),
    or int8 (``torch.qint8``: fbgemm's kernels, ``model/quantized.py``)."""
    if dtype == torch.qint8:
        return Int8Projection(proj.weight, proj.bias)
    weight, bias = proj.weight.to(dtype), proj.bias.to(dtype)
    return lambda x: F.linear(x.to(dtype), weight, bias).float()


def _vocab_logits(dec: Decoder, feat: Tensor, setting: _VocabSetting) -> Tensor:
    """``dec.output(feat)`` with the vocabulary projection in ``setting.dtype`` and
    each row's ``setting.candidates`` best logits recomputed in fp32 (eval: no
    dropout; a tied model's projection to the embedding size stays in fp32)."""
    proj, dtype = dec.output.proj, setting.dtype
    version = (dtype, *((p.data_ptr(), p._version) for p in (proj.weight, proj.bias)))
    cached = _VOCAB.get(dec)
    if cached is None or cached.version != version:
        cached = _VocabWeights(version, _lowered_projection(proj, dtype))
        _VOCAB[dec] = cached
    x = dec.output.pre(feat)
    logits = cached.project(x)  # (B, V) float32
    m = min(setting.candidates, logits.size(-1))
    if m > 0:
        idx = logits.topk(m, dim=-1, sorted=False).indices  # (B, m)
        exact = torch.bmm(proj.weight[idx], x.unsqueeze(-1)).squeeze(-1)
        logits.scatter_(-1, idx, exact + proj.bias[idx])
    return logits


def forget_search_tables(model: nn.Module) -> None:
    """Drop the search tables of every decoder in ``model``, so that the next search
    builds them from the weights as they are now.

    A weight's version catches a loaded state dict and most in-place changes, but
    not all: torch's fused Adam (the CPU default) updates the weights without
    bumping their versions. So whoever decodes after training steps calls this
    first (``Translator.search`` does, once per call)."""
    for module in model.modules():
        _TABLES.pop(module, None)
        _VOCAB.pop(module, None)


def _search_tables(dec: Decoder) -> _SearchTables:
    """The decoder's tables (matmuls over the vocabulary, once per search call),
    rebuilt when a weight's storage or version changed (``forget_search_tables``
    covers the changes that keep both)."""
    params = (
        dec.embedding.weight,
        dec.rnn.weight_ih_l0,
        dec.rnn.bias_ih_l0,
        dec.feature.weight,
        dec.feature.bias,
    )
    version = tuple((p.data_ptr(), p._version) for p in params)
    cached = _TABLES.get(dec)
    if cached is not None and cached.version == version:
        return cached
    emb = dec.embedding.weight  # eval: embed() is the lookup
    w_ie = dec.rnn.weight_ih_l0[:, : emb.size(1)]
    tables = _SearchTables(
        version,
        F.linear(emb, w_ie, dec.rnn.bias_ih_l0),
        StackedGRU(dec.rnn, emb.size(1), training=False),
        *dec._search_weights(),
    )
    _TABLES[dec] = tables
    return tables


def _context_share(
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
        return self.input_feeding  # without feeding: one GRU call over all steps

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

    def search_features(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """``reference_step`` from the search tables (``_SearchTables``): the GRU's
        input gates are the token's table row (plus h̃_{t-1} with input feeding);
        attend with h_t; h̃_t = tanh(W_h h_t + b + the context's share)."""
        if not _fast_search(self, prev_tokens):
            return super().search_features(prev_tokens, state)
        tables = _search_tables(self)
        gi = tables.gates.index_select(0, prev_tokens)
        hidden = tables.gru.step(gi, state.feed, list(state.hidden.unbind(0)))
        att = attend_step(self.attention, hidden[-1], state.keys)
        pre, keys = torch.addmm(tables.base, hidden[-1], tables.w_state), state.keys
        if att.context.size(-1):
            ctx, keys = _context_share(att, keys, tables.w_ctx, prev_tokens.size(0))
            pre = pre + ctx
        feat = torch.tanh(pre)
        feed = feat if self.input_feeding else state.feed
        return feat, DecoderState(torch.stack(hidden), feed, keys), att

    def _search_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """W_c [c; h] + b: the bias ``(H,)``, the context's columns ``(H, C)``, the
        state's columns transposed ``(H, H)``."""
        w, c = self.feature.weight, self.attention.context_size
        return self.feature.bias, w[:, :c], w[:, c:].t()

    def fast_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        if self.input_feeding:
            return self._fed_features(emb, state)
        out, _ = self.rnn(emb, state.hidden)  # (B, T, H): one call over all steps
        att = self.attention.attend(out, state.keys)  # (B, T, C), (B, T, S)
        feats = torch.tanh(self.feature(torch.cat([att.context, out], dim=-1)))
        return feats, att.weights, att.head_weights

    def _fed_features(
        self, emb: Tensor, state: DecoderState
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Input feeding: the step loop, with the embeddings' part of the GRU input
        gates computed for all steps in one matmul before it."""
        gru = StackedGRU(self.rnn, emb.size(-1), self.training)
        gates = gru.embed_gates(emb.transpose(0, 1))  # (T, B, 3H)
        hidden, feed = list(state.hidden.unbind(0)), state.feed
        weights = self._split_feature()
        recur = self._loop_body(LuongDecoder._fed_loop_step)
        feats, outs = [], []
        for gi_emb in gates.unbind(0):
            hidden, feed, att = recur(gru, gi_emb, hidden, feed, state.keys, weights)
            feats.append(feed)
            outs.append(att)
        return (torch.stack(feats, dim=1), *_stack(outs))


DECODERS: dict[str, type[Decoder]] = {
    "bahdanau": BahdanauDecoder,
    "luong": LuongDecoder,
}
