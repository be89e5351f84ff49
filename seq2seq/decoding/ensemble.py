"""Ensemble decoding: several models of one vocabulary decode as one model.

``Ensemble`` offers what search and the ``Translator`` use of a ``Seq2Seq``
(``encode``, ``init_state``, ``step`` and the teacher-forced ``forward``), so greedy
and beam search, the loss and forced decoding run on it unchanged.

Each step averages the members' *probabilities* (linear space: ``log mean_m p_m``),
as fairseq, OpenNMT-py and Nematus do. The mixture keeps a token that one member is
sure of and the others merely allow; averaging log-probabilities (a product of
experts) would let any one member veto it and sharpens the distribution. The
ensemble's attention is the mean of its members' attention (each member keeps its own
state, so their attentions differ); it is a summary, not the attention of any model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.model.attention import Keys
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.encoder import EncoderOutput
from seq2seq.model.seq2seq import ModelOutput, Seq2Seq


class EnsembleState(NamedTuple):
    """One decoder state per member, selected (beam reordering) together."""

    members: tuple[DecoderState, ...]

    def select(self, index: Tensor) -> EnsembleState:
        return EnsembleState(tuple(s.select(index) for s in self.members))

    def select_beams(
        self, rows: Tensor, sources: Tensor | None = None
    ) -> EnsembleState:
        return EnsembleState(tuple(s.select_beams(rows, sources) for s in self.members))

    @property
    def keys(self) -> Keys:
        """The first member's keys: their source mask is every member's."""
        return self.members[0].keys


def mean_probabilities(log_probs: Sequence[Tensor]) -> Tensor:
    """``log mean_m exp(log_probs[m])`` in float32: the mixture of the members."""
    stacked = torch.stack([lp.float() for lp in log_probs])
    return torch.logsumexp(stacked, dim=0) - math.log(len(log_probs))


MemberStep = Callable[[Tensor, DecoderState], tuple[Tensor, DecoderState, Tensor]]


def mixed_step(
    steps: Sequence[MemberStep],
) -> Callable[[Tensor, EnsembleState], tuple[Tensor, EnsembleState, Tensor]]:
    """One step per member → the ensemble's step: mean probabilities ``(B, V)`` (as
    log-probabilities), the new states, the mean attention ``(B, S)``. The model's
    ``step`` mixes the members' own steps, the search its shortcuts'."""

    def step(
        prev_tokens: Tensor, state: EnsembleState
    ) -> tuple[Tensor, EnsembleState, Tensor]:
        outs = [fn(prev_tokens, s) for fn, s in zip(steps, state.members, strict=True)]
        log_probs = mean_probabilities([o[0] for o in outs])
        weights = torch.stack([o[2].float() for o in outs]).mean(dim=0)
        return log_probs, EnsembleState(tuple(o[1] for o in outs)), weights

    return step


class Ensemble(nn.Module):
    """Members that share a tokenizer, decoding as one model (module docstring)."""

    def __init__(self, members: Sequence[Seq2Seq]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        self.members = nn.ModuleList(members)

    def encode(
        self, src: Tensor, src_lengths: Tensor, src_mask: Tensor
    ) -> list[EncoderOutput]:
        return [m.encode(src, src_lengths, src_mask) for m in self.members]

    def init_state(self, encoded: list[EncoderOutput]) -> EnsembleState:
        return EnsembleState(
            tuple(m.init_state(e) for m, e in zip(self.members, encoded, strict=True))
        )

    def step(
        self, prev_tokens: Tensor, state: EnsembleState
    ) -> tuple[Tensor, EnsembleState, Tensor]:
        """The members' steps: mean probabilities ``(B, V)`` (as log-probabilities),
        the new states, the mean attention ``(B, S)``."""
        return mixed_step([m.step for m in self.members])(prev_tokens, state)

    def forward(
        self, *batch: Tensor, rows: Tensor | None = None, self_weights: bool = False
    ) -> ModelOutput:
        """Teacher forcing over ``batch`` = (src, src_lengths, src_mask, tgt_in), as
        ``Seq2Seq.forward``: the mixture's log-probabilities as logits (a softmax of
        them gives the mean probabilities back), the mean attention; per-head
        attention and the encoder's self-attention only for an ensemble of one
        (the members' heads are not one model's heads)."""
        one = len(self.members) == 1
        outs = [
            m(*batch, rows=rows, self_weights=self_weights and one)
            for m in self.members
        ]
        logits = mean_probabilities([o.logits.float().log_softmax(-1) for o in outs])
        attention = torch.stack([o.attention.float() for o in outs]).mean(dim=0)
        heads = outs[0].head_attention if one else None
        return ModelOutput(
            logits, attention, heads, self_attention=outs[0].self_attention
        )
