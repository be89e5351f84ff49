"""Attention: score functions, a masked softmax and the read of the source memory.

Every module here is pure. ``prepare(memory, mask) -> Keys`` projects the encoder
states once per batch; the caller (the decoder state) holds the ``Keys`` and passes them
back to ``attend(query, keys)`` at every step. Nothing is stored on the module.

Shapes: ``B`` batch, ``S`` source length, ``T`` target steps, ``Hq`` query (decoder)
size, ``Hm`` memory (encoder) size. A query is ``(B, Hq)`` for one step or
``(B, T, Hq)`` for all steps; the weights come back as ``(B, S)`` or ``(B, T, S)``.

The weights are a softmax over source positions computed in float32 (float64 stays
float64) after ``masked_fill(~mask, -inf)``: padding gets exactly 0 and rows sum to 1.
Every source has at least one real token (its EOS), so no row is all ``-inf``.
``normalizer=sparsemax`` or ``entmax15`` (``attention.normalizer``) replaces the softmax
by a sparse mapping of the ``entmax`` package (Martins & Astudillo 2016; Peters,
Niculae & Martins 2019) under the same masking: rows still sum to 1, padding is still
0, and positions far enough below the best score get exactly 0 as well, so an
alignment reads as the few source words a step actually used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.config import AttentionType, Normalizer
from seq2seq.model.precision import cast_like_autocast
from seq2seq.model.shape_buckets import bmm_varying, linear_rows, varying_operand


class Keys(NamedTuple):
    """What ``prepare`` computes once per batch.

    values: ``(B, S, Hv)`` the vectors read (the memory; its value projection for
    multi-head); keys: ``(B, S, K)`` the projected keys; mask: ``(B, S)`` bool, True for
    real tokens.
    """

    values: Tensor
    keys: Tensor
    mask: Tensor
    # ``values`` through the decoder's weights that read the context ``(B, S, P)``,
    # set by its search step in beam search (model/decoder.py), None until then
    projected: Tensor | None = None

    def select(self, index: Tensor) -> Keys:
        """Rows ``index`` (``(B',)`` long) of the batch: reorder or expand beams."""
        return Keys(*(t if t is None else t.index_select(0, index) for t in self))


class AttentionOutput(NamedTuple):
    """context ``(B, [T,] C)``; weights ``(B, [T,] S)`` (mean over heads for
    multi-head); head_weights ``(B, heads, [T,] S)`` for multi-head, else None."""

    context: Tensor
    weights: Tensor
    head_weights: Tensor | None = None


def _masked(scores: Tensor, mask: Tensor) -> Tensor:
    """Scores ``(B, ..., S)`` in at least float32 with ``-inf`` where mask ``(B, S)``
    is False: what every normalizer starts from."""
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    shape = (mask.size(0),) + (1,) * (scores.dim() - 2) + (mask.size(1),)
    return scores.masked_fill(~mask.view(shape), float("-inf"))


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis of scores ``(B, ..., S)`` with mask ``(B, S)``.

    Computed in at least float32; masked positions get exactly 0.
    """
    return torch.softmax(_masked(scores, mask), dim=-1)


def masked_normalize(
    scores: Tensor, mask: Tensor, normalizer: Normalizer = Normalizer.softmax
) -> Tensor:
    """``masked_softmax``, or its sparse counterpart: sparsemax (exact zeros below a
    threshold) or 1.5-entmax (between the two), with the same masking and dtype."""
    if normalizer == Normalizer.softmax:
        return masked_softmax(scores, mask)
    import entmax  # imported here: softmax models never need the package

    sparse = entmax.sparsemax if normalizer == Normalizer.sparsemax else entmax.entmax15
    return sparse(_masked(scores, mask), dim=-1)


def read(weights: Tensor, values: Tensor) -> Tensor:
    """Context ``c = Σⱼ αⱼ hⱼ``: weights ``(B, T, S)``, values ``(B, S, Hv)`` →
    ``(B, T, Hv)``."""
    return bmm_varying(weights.to(values.dtype), values)


class Attention(nn.Module):
    """Base class: ``prepare`` once, then ``attend`` (or ``forward``) at every step.

    Subclasses implement ``score(query (B, T, Hq), keys) -> (B, T, S)`` and may override
    ``prepare``. ``context_size`` is the size of the context vector they return.
    """

    context_size: int
    normalizer: Normalizer = Normalizer.softmax  # set by build_attention

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__()
        self.query_size = query_size
        self.memory_size = memory_size
        self.context_size = memory_size

    def prepare(self, memory: Tensor, mask: Tensor) -> Keys:
        """memory ``(B, S, Hm)``, mask ``(B, S)`` bool → ``Keys`` (keys = memory)."""
        return Keys(memory, memory, mask)

    def score(self, query: Tensor, keys: Keys) -> Tensor:
        raise NotImplementedError

    def cast_once(self, keys: Keys) -> Keys:
        """``keys`` in the dtypes the steps compute in, cast once per batch rather
        than at every step: the values as ``read`` takes them, the keys as
        ``score`` does (autocast's dtype for an additive score)."""
        return _cast(keys, varying_operand, cast_like_autocast)

    def attend(self, query: Tensor, keys: Keys) -> AttentionOutput:
        """query ``(B, Hq)`` or ``(B, T, Hq)`` → ``AttentionOutput``."""
        one_step = query.dim() == 2
        q = query.unsqueeze(1) if one_step else query  # (B, T, Hq)
        scores = self.score(q, keys)  # (B, T, S)
        weights = masked_normalize(scores, keys.mask, self.normalizer)
        context = read(weights, keys.values)  # (B, T, C)
        if one_step:
            return AttentionOutput(context.squeeze(1), weights.squeeze(1))
        return AttentionOutput(context, weights)

    def forward(self, query: Tensor, keys: Keys) -> tuple[Tensor, Tensor]:
        """``(context, weights)``; see ``attend`` for per-head weights."""
        out = self.attend(query, keys)
        return out.context, out.weights


class AdditiveAttention(Attention):
    """Bahdanau et al. (2015): ``e_tj = vᵀ tanh(W s_t + U h_j)``.

    ``U h_j`` (with the bias) is computed once in ``prepare``; the step adds ``W s_t``.
    ``dim`` is the scorer's hidden size (default: the query size).
    """

    def __init__(self, query_size: int, memory_size: int, dim: int | None = None):
        super().__init__(query_size, memory_size)
        dim = dim or query_size
        self.query_proj = nn.Linear(query_size, dim, bias=False)  # W
        self.key_proj = nn.Linear(memory_size, dim)  # U (+ b)
        self.v = nn.Linear(dim, 1, bias=False)  # v

    def prepare(self, memory: Tensor, mask: Tensor) -> Keys:
        return Keys(memory, self.key_proj(memory), mask)  # keys (B, S, dim)

    def score(self, query: Tensor, keys: Keys) -> Tensor:
        q = self.query_proj(query)  # (B, T, dim)
        # tanh in place: one (B, T, S, dim) tensor a step instead of two
        hidden = (q.unsqueeze(2) + keys.keys.unsqueeze(1)).tanh_()  # (B, T, S, dim)
        return self.v(hidden).squeeze(-1)  # (B, T, S)


class LuongConcatAttention(AdditiveAttention):
    """Luong et al. (2015) concat: ``e_tj = vᵀ tanh(W [s_t; h_j])``.

    ``W [s; h] = W_s s + W_h h``, so this is the additive score with W split in two;
    ``W_h h_j`` is computed once in ``prepare``.
    """


class LuongDotAttention(Attention):
    """Luong et al. (2015) dot: ``e_tj = s_tᵀ h_j``; no parameters, sizes must match."""

    def __init__(self, query_size: int, memory_size: int, dim: int | None = None):
        super().__init__(query_size, memory_size)
        if query_size != memory_size:
            raise ValueError(
                f"a dot score needs queries and keys of one size, not {query_size} "
                f"and {memory_size}"
            )

    def score(self, query: Tensor, keys: Keys) -> Tensor:
        return bmm_varying(query, keys.keys.transpose(1, 2))  # (B, T, S)

    def cast_once(self, keys: Keys) -> Keys:
        """Values and keys both as ``bmm_varying`` reads them."""
        return _cast(keys, varying_operand, varying_operand)


class LuongGeneralAttention(Attention):
    """Luong et al. (2015) general: ``e_tj = s_tᵀ W h_j``; ``W h_j`` is computed
    once in ``prepare``."""

    def __init__(self, query_size: int, memory_size: int, dim: int | None = None):
        super().__init__(query_size, memory_size)
        self.key_proj = nn.Linear(memory_size, query_size, bias=False)  # W

    def prepare(self, memory: Tensor, mask: Tensor) -> Keys:
        keys = linear_rows(memory, self.key_proj.weight)  # (B, S, Hq)
        return Keys(memory, keys, mask)

    def score(self, query: Tensor, keys: Keys) -> Tensor:
        return bmm_varying(query, keys.keys.transpose(1, 2))  # (B, T, S)

    def cast_once(self, keys: Keys) -> Keys:
        """Values and keys both as ``bmm_varying`` reads them."""
        return _cast(keys, varying_operand, varying_operand)


class MultiHeadAttention(Attention):
    """Scaled dot-product attention with ``heads`` heads (Vaswani et al., 2017).

    ``q = W_q s``, ``k_j = W_k h_j``, ``v_j = W_v h_j`` split into heads of size
    ``d = dim / heads``; per head ``α = softmax(q kᵀ / √d)``, ``c = Σⱼ αⱼ v_j``; the
    heads' contexts are concatenated and mixed by ``W_o``. Returns the mean of the
    heads' weights as ``weights`` and the per-head weights as ``head_weights``.
    """

    def __init__(
        self, query_size: int, memory_size: int, dim: int | None = None, heads: int = 4
    ):
        super().__init__(query_size, memory_size)
        dim = dim or query_size
        if heads < 1 or dim % heads:
            raise ValueError(f"{heads} heads cannot split {dim} features evenly")
        self.heads = heads
        self.context_size = dim
        self.query_proj = nn.Linear(query_size, dim, bias=False)
        self.key_proj = nn.Linear(memory_size, dim, bias=False)
        self.value_proj = nn.Linear(memory_size, dim, bias=False)
        self.out_proj = nn.Linear(dim, dim, bias=False)

    def _split(self, x: Tensor) -> Tensor:
        """``(B, L, dim)`` → ``(B, heads, L, d)``."""
        b, length, _ = x.shape
        return x.view(b, length, self.heads, -1).transpose(1, 2)

    def prepare(self, memory: Tensor, mask: Tensor) -> Keys:
        return Keys(self.value_proj(memory), self.key_proj(memory), mask)

    def cast_once(self, keys: Keys) -> Keys:
        """Values and keys in autocast's dtype: the heads' products run under it."""
        return _cast(keys, cast_like_autocast, cast_like_autocast)

    def attend(self, query: Tensor, keys: Keys) -> AttentionOutput:
        one_step = query.dim() == 2
        q = query.unsqueeze(1) if one_step else query  # (B, T, Hq)
        qh = self._split(self.query_proj(q))  # (B, h, T, d)
        kh, vh = self._split(keys.keys), self._split(keys.values)  # (B, h, S, d)
        scores = qh @ kh.transpose(-1, -2) / math.sqrt(qh.size(-1))  # (B, h, T, S)
        head_weights = masked_normalize(scores, keys.mask, self.normalizer)
        heads_ctx = head_weights.to(vh.dtype) @ vh  # (B, h, T, d)
        b, _, t, _ = heads_ctx.shape
        context = self.out_proj(
            heads_ctx.transpose(1, 2).reshape(b, t, -1)
        )  # (B, T, dim)
        weights = head_weights.mean(dim=1)  # (B, T, S)
        if one_step:
            return AttentionOutput(
                context.squeeze(1), weights.squeeze(1), head_weights.squeeze(2)
            )
        return AttentionOutput(context, weights, head_weights)


Cast = Callable[[Tensor], Tensor]


def _cast(keys: Keys, cast_values: Cast, cast_keys: Cast) -> Keys:
    """``keys`` with its values and keys cast (once when they are one tensor)."""
    values = cast_values(keys.values)
    same = keys.keys is keys.values
    return keys._replace(values=values, keys=values if same else cast_keys(keys.keys))


def attend_step(attention: Attention, query: Tensor, keys: Keys) -> AttentionOutput:
    """One decoder step for ``g`` hypotheses per source: query ``(B·g, Hq)`` (rows
    ``b·g … b·g + g - 1`` read source ``b``), keys of batch ``B``. Beam search keeps
    the keys once per sentence, not once per beam: the ``g`` queries of a source are
    read as ``g`` steps of one query ``(B, g, Hq)``, so the keys are never copied
    when beams reorder. ``g = 1`` is ``attention.attend``."""
    b = keys.mask.size(0)
    if query.size(0) == b:
        return attention.attend(query, keys)
    if query.size(0) % b:
        raise ValueError(
            f"{query.size(0)} queries for {b} sources: want g queries per source"
        )
    out = attention.attend(query.view(b, query.size(0) // b, -1), keys)
    heads = out.head_weights  # (B, h, g, S) → (B·g, h, S)
    if heads is not None:
        heads = heads.transpose(1, 2).flatten(0, 1)
    return AttentionOutput(out.context.flatten(0, 1), out.weights.flatten(0, 1), heads)


class NoAttention(Attention):
    """Ablation: no attention. The context is empty (size 0) and the weights are
    zeros, so the decoder sees the source only through the bridge's initial state."""

    def __init__(self, query_size: int, memory_size: int, dim: int | None = None):
        super().__init__(query_size, memory_size)
        self.context_size = 0

    def attend(self, query: Tensor, keys: Keys) -> AttentionOutput:
        s = keys.mask.size(1)
        lead = query.shape[:-1]  # (B,) or (B, T)
        context = query.new_zeros(*lead, 0)
        weights = torch.zeros(*lead, s, device=query.device)
        return AttentionOutput(context, weights)


ATTENTIONS: dict[str, type[Attention]] = {
    "bahdanau": AdditiveAttention,
    "luong_dot": LuongDotAttention,
    "luong_general": LuongGeneralAttention,
    "luong_concat": LuongConcatAttention,
    "multihead": MultiHeadAttention,
    "none": NoAttention,
}


def build_attention(
    name: AttentionType | str,
    query_size: int,
    memory_size: int,
    dim: int | None = None,
    heads: int = 4,
    normalizer: Normalizer | str = Normalizer.softmax,
) -> Attention:
    """The attention registered as ``name`` (``attention.type``) with its weights from
    ``normalizer`` (``attention.normalizer``); ``heads`` only for multi-head. An unknown
    name is a ValueError (``AttentionType``, ``Normalizer``)."""
    name = AttentionType(name)
    if name == AttentionType.multihead:
        attention: Attention = MultiHeadAttention(query_size, memory_size, dim, heads)
    else:
        attention = ATTENTIONS[name](query_size, memory_size, dim)
    attention.normalizer = Normalizer(normalizer)
    return attention
