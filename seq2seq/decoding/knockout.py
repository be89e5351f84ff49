"""Knock-outs: decode with a source word, a cross-attention head or an encoder
self-attention head switched off, to see what the output owes to it.

A **source word** is knocked out by masking its pieces in the decoder's attention,
as padding is masked: with the attention's weights ``p_j`` over source positions and
``m_j = 0`` for the word's pieces (1 elsewhere), the step reads

    p'_j = p_j · m_j / Σ_k p_k · m_k        c' = Σ_j p'_j h_j

(a softmax over the scores with the word's scores at ``-inf``; sparsemax and entmax
are masked the same way). The encoder still reads the whole sentence, so the states
``h_j`` of the *other* words are exactly those of the original: the knock-out asks
"what if the decoder could not look at this word?", one question, and leaves the
rest of the computation as it was. Replacing the word's encoder states (by zeros or
by an ``<unk>``'s) would instead move every other state too (the bi-GRU and the
self-attention carry the change along the sentence) and put off-distribution
vectors into the attention: a second question mixed into the first. The decoder's
initial state (the bridge reads the encoder's final states) keeps what it knew of
the word; the attention is what the pictures show, and what is knocked out.

A **cross-attention head** ``h`` of multi-head attention is knocked out by zeroing
its values, ``v_j^h = 0``, so its context ``Σ_j α_j^h v_j^h`` is 0 and the output
projection mixes the other heads alone (the head mask of Michel et al., 2019, "Are
Sixteen Heads Really Better than One?"); an **encoder self-attention head**
``(layer, head)`` the same way, its context zeroed before the block's output
projection. Several knock-outs apply at once; each row of a batch has its own.
Without knock-outs the searches and forced decoding run as before, nothing added.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.data.pieces import word_pieces
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.decoding.ensemble import Ensemble, EnsembleState
from seq2seq.errors import InputError
from seq2seq.model.attention import MultiHeadAttention
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.self_attention import attend
from seq2seq.model.seq2seq import Seq2Seq


@dataclass(frozen=True)
class Knockout:
    """What to knock out for one sentence: source ``words`` (indices of its
    whitespace words, from 0), cross-attention ``heads`` (from 0), encoder
    ``self_heads`` as ``(layer, head)`` pairs (from 0)."""

    words: tuple[int, ...] = ()
    heads: tuple[int, ...] = ()
    self_heads: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.words or self.heads or self.self_heads)

    def describe(self) -> str:
        """``word 2, head 1, self-attention layer 0 head 3``: for messages."""
        parts = [f"word {w}" for w in self.words]
        parts += [f"head {h}" for h in self.heads]
        parts += [f"self-attention layer {x} head {h}" for x, h in self.self_heads]
        return ", ".join(parts) or "nothing"


# one knock-out for every text, one per text (None: none), or None
Knockouts = Knockout | Sequence[Knockout | None] | None


def per_text(knockouts: Knockouts, n: int) -> list[Knockout | None] | None:
    """``Knockouts`` as one per text (of ``n``), or None when nothing is knocked
    out."""
    if knockouts is None:
        return None
    kos = [knockouts] * n if isinstance(knockouts, Knockout) else list(knockouts)
    return kos if any(kos) else None


class KnockoutMasks(NamedTuple):
    """A batch's knock-outs as tensors: pieces ``(B, S)`` bool, True for a source
    piece knocked out; heads ``(B, H)`` 0 for a cross-attention head knocked out, 1
    else; self_heads ``(B, layers, H)`` the same for the encoder's blocks. None: no
    knock-out of that kind in the batch."""

    pieces: Tensor | None = None
    heads: Tensor | None = None
    self_heads: Tensor | None = None

    def batch(self, ids: Sequence[int], device: torch.device) -> KnockoutMasks:
        """The rows of a batch's pairs ``ids`` (masks over a split), on ``device``."""
        rows = torch.as_tensor(list(ids))
        return KnockoutMasks(*(None if m is None else m[rows].to(device) for m in self))


def _members(model: nn.Module) -> list[Seq2Seq]:
    return list(model.members) if isinstance(model, Ensemble) else [model]


def head_counts(model: nn.Module) -> tuple[int, list[int]]:
    """The cross-attention heads of the model (0 unless multi-head; the fewest of
    an ensemble's members) and its encoder's heads per self-attention layer."""
    cross, selfs = [], []
    for m in _members(model):
        att = m.decoder.attention
        cross.append(att.heads if isinstance(att, MultiHeadAttention) else 0)
        blocks = [] if m.self_attention is None else m.self_attention.blocks
        selfs.append([b.heads for b in blocks])
    return min(cross), min(selfs, key=len)


def knockout_masks(
    knockouts: Sequence[Knockout | None],
    src_ids: Sequence[Sequence[int]],
    tokenizer: Tokenizer,
    model: nn.Module,
) -> KnockoutMasks | None:
    """Per sentence (its source ids, without EOS) its knock-out → the masks of the
    batch of those sentences, in their order (source width: the longest plus EOS);
    None when nothing is knocked out. A word or head the sentence or the model does
    not have is an ``InputError`` naming it and what there is."""
    if not any(knockouts):
        return None
    cross, selfs = head_counts(model)
    width = max(len(ids) for ids in src_ids) + 1
    b, layers, most = len(src_ids), len(selfs), max(selfs, default=0)
    pieces = torch.zeros(b, width, dtype=torch.bool)
    heads = torch.ones(b, max(cross, 1))
    self_heads = torch.ones(b, layers, most)
    for row, (ko, ids) in enumerate(zip(knockouts, src_ids, strict=True)):
        if not ko:
            continue
        words = word_pieces(tokenizer.src_pieces(list(ids)))
        for w in ko.words:
            if not 0 <= w < len(words):
                raise InputError(
                    f"knock-out word {w}: the source has {len(words)} words "
                    f"(0 to {len(words) - 1})"
                )
            pieces[row, words[w]] = True
        for h in ko.heads:
            if not 0 <= h < cross:
                raise InputError(_no_head(h, cross))
            heads[row, h] = 0.0
        for layer, h in ko.self_heads:
            if not 0 <= layer < layers or not 0 <= h < selfs[layer]:
                raise InputError(_no_self_head(layer, h, selfs))
            self_heads[row, layer, h] = 0.0
    given = [k for k in knockouts if k]
    return KnockoutMasks(
        pieces if any(k.words for k in given) else None,
        heads if any(k.heads for k in given) else None,
        self_heads if any(k.self_heads for k in given) else None,
    )


def split_masks(
    split: Any,
    knockouts: Sequence[Knockout | None] | None,
    tokenizer: Tokenizer,
    model: nn.Module,
) -> KnockoutMasks | None:
    """A split's knock-outs (one per pair, or None) as masks over its pairs (rows:
    the split's order; ``KnockoutMasks.batch`` takes a batch's), checked."""
    if knockouts is None:
        return None
    if len(knockouts) != len(split):
        raise InputError(f"{len(knockouts)} knock-outs for {len(split)} texts")
    return knockout_masks(knockouts, split.src_ids, tokenizer, model)


def _no_head(h: int, cross: int) -> str:
    if cross == 0:
        return (
            f"knock-out head {h}: this model's attention has no heads (only "
            "attention.type=multihead has)"
        )
    return f"knock-out head {h}: the attention has {cross} heads (0 to {cross - 1})"


def _no_self_head(layer: int, h: int, selfs: list[int]) -> str:
    if not selfs:
        return (
            f"knock-out self-attention layer {layer} head {h}: this model's encoder "
            "has no self-attention"
        )
    return (
        f"knock-out self-attention layer {layer} head {h}: the encoder has "
        f"{len(selfs)} layers of {selfs[0]} heads (layer:head from 0:0)"
    )


@contextlib.contextmanager
def _self_heads_off(model: Seq2Seq, masks: Tensor | None) -> Iterator[None]:
    """While inside, each encoder block's heads are scaled by ``masks (B, layers,
    H)`` (0: knocked out) before the block's output projection."""
    if masks is None or model.self_attention is None:
        yield
        return
    blocks = list(model.self_attention.blocks)

    def hook(layer: int) -> Any:
        def run(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Any:
            context, weights = attend(q, k, v, mask, need_weights=True)
            keep = masks[:, layer, : q.size(1), None, None].to(context)
            return context * keep, weights  # (B, H, S, dₕ)

        return run

    for layer, block in enumerate(blocks):
        block.weights_hook = hook(layer)
    try:
        yield
    finally:
        for block in blocks:
            block.weights_hook = None


def _heads_off(state: DecoderState, heads: Tensor | None) -> DecoderState:
    """The state with the values of the knocked-out heads ``(B, H)`` zeroed."""
    if heads is None:
        return state
    keys = state.keys
    b, s, dim = keys.values.shape
    n = heads.size(1)
    values = keys.values.view(b, s, n, dim // n) * heads[:, None, :, None].to(
        keys.values
    )
    return state._replace(keys=keys._replace(values=values.view(b, s, dim)))


def fit_width(pieces: Tensor, width: int) -> Tensor:
    """pieces ``(B, S')`` → ``(B, width)``: cut, or padded with False."""
    if pieces.size(1) >= width:
        return pieces[:, :width]
    return torch.nn.functional.pad(pieces, (0, width - pieces.size(1)))


def member_state(
    model: Seq2Seq,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    masks: KnockoutMasks,
    self_weights: bool = False,
    rows: Tensor | None = None,
) -> tuple[DecoderState, Tensor | None]:
    """One model's first decoder state under ``masks`` (module docstring), and the
    encoder's self-attention weights with ``self_weights``. ``rows``: per decoder
    row the source it reads (an index into ``src``), so sentences read by several
    rows (occlusion's knock-outs) are encoded once; ``masks`` are then per row."""
    with _self_heads_off(model, masks.self_heads):
        enc, maps = model.encode_with_weights(src, src_lengths, src_mask, self_weights)
    if rows is not None:
        enc = enc.select(rows)
    if masks.pieces is not None:
        enc = enc._replace(mask=enc.mask & ~fit_width(masks.pieces, src_mask.size(1)))
    return _heads_off(model.init_state(enc), masks.heads), maps


def start_state(
    model: nn.Module,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    masks: KnockoutMasks | None = None,
) -> Any:
    """The searches' first decoder state: the model's own without ``masks``, else
    with the knock-outs (an ensemble: in every member)."""
    if masks is None:
        return model.init_state(model.encode(src, src_lengths, src_mask))
    args = (src, src_lengths, src_mask, masks)
    if isinstance(model, Ensemble):
        return EnsembleState(tuple(member_state(m, *args)[0] for m in model.members))
    return member_state(model, *args)[0]
