"""What a decoder hands on: its state between steps (``DecoderState``, a value that
beam search reorders) and its teacher-forced output (``DecoderOutput``). Every
decoder style, the searches and the ensemble share them.

Shapes: ``B`` batch, ``T`` target steps, ``S`` source length, ``H`` decoder hidden
size, ``L`` decoder layers, ``V`` vocabulary.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from seq2seq.model.attention import Keys


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
