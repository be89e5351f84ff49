"""Forced decoding for the what-ifs: a teacher-forced pass under knock-outs, each
step's distribution, and occlusion.

``forced_outputs`` is ``Seq2Seq.forward`` with ``knockout.KnockoutMasks`` applied
(an ensemble: each member, then the mixture of their probabilities), returning
log-probabilities. ``step_stats`` reads, at each target step, the probability of the
piece written, the entropy of the step's distribution and its ``k`` most probable
pieces. ``occlusion`` is a causal attribution: how much the log-probability of each
written piece drops when a source word is knocked out (masked from the attention,
``knockout.py``), all of a sentence's knock-outs in one batched forced pass.

Shapes: ``B`` sentences, ``S`` source pieces + EOS, ``T`` target pieces + EOS,
``V`` target vocabulary, ``W`` source words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.data.batching import Batch
from seq2seq.data.tokenizer import PAD_ID
from seq2seq.decoding.ensemble import Ensemble, mean_probabilities
from seq2seq.decoding.knockout import KnockoutMasks, member_state


class Forced(NamedTuple):
    """log_probs ``(B, T, V)`` float32; attention ``(B, T, S)`` (the members' mean
    for an ensemble); heads ``(B, heads, T, S)`` for one multi-head model, else
    None."""

    log_probs: Tensor
    attention: Tensor
    heads: Tensor | None


def forced_outputs(
    model: nn.Module,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    tgt_in: Tensor,
    masks: KnockoutMasks | None = None,
    rows: Tensor | None = None,
) -> Forced:
    """Teacher forcing over tgt_in ``(B, T)`` under ``masks`` (None: none);
    ``rows`` ``(B,)``: each row's source in ``src`` (``knockout.member_state``),
    None: row ``b`` reads source ``b``."""
    members = list(model.members) if isinstance(model, Ensemble) else [model]
    masks = masks or KnockoutMasks()
    outs = []
    for member in members:
        state, _ = member_state(member, src, src_lengths, src_mask, masks, rows=rows)
        outs.append(member.decoder(tgt_in, state))
    logs = [o.logits.float().log_softmax(-1) for o in outs]
    log_probs = logs[0] if len(logs) == 1 else mean_probabilities(logs)
    attention = torch.stack([o.attention.float() for o in outs]).mean(dim=0)
    heads = outs[0].head_attention if len(outs) == 1 else None
    return Forced(log_probs, attention, heads)


class StepStats(NamedTuple):
    """Per target step of one sentence: prob ``(T,)`` of the piece written; entropy
    ``(T,)`` of the step's distribution in nats; top_ids, top_probs ``(T, k)`` its
    ``k`` most probable pieces, most probable first."""

    prob: Tensor
    entropy: Tensor
    top_ids: Tensor
    top_probs: Tensor


def step_stats(log_probs: Tensor, targets: Tensor, k: int) -> StepStats:
    """log_probs ``(T, V)``, targets ``(T,)`` (the pieces written, EOS last) →
    ``StepStats``. Entropy ``H_t = -Σ_v p_v log p_v`` (0 · log 0 counted as 0)."""
    probs = log_probs.exp()
    entropy = -(probs * log_probs.clamp_min(-1e30)).sum(dim=-1)
    top_probs, top_ids = probs.topk(min(k, probs.size(-1)), dim=-1)
    prob = probs.gather(1, targets.unsqueeze(1)).squeeze(1)
    return StepStats(prob, entropy, top_ids, top_probs)


def target_log_probs(log_probs: Tensor, tgt_out: Tensor) -> Tensor:
    """log_probs ``(B, T, V)``, tgt_out ``(B, T)`` → the pieces' ``(B, T)``."""
    return log_probs.gather(2, tgt_out.unsqueeze(2)).squeeze(2)


def occlusion(
    model: nn.Module,
    src: Tensor,
    src_lengths: Tensor,
    tgt_in: Tensor,
    tgt_out: Tensor,
    groups: Sequence[Sequence[int]],
) -> Tensor:
    """One sentence (src ``(1, S)``, tgt_in, tgt_out ``(1, T)``, no padding) and the
    source piece indices of each of its ``W`` words → drops ``(T, W)``: the
    log-probability of each written piece with nothing knocked out, minus that with
    the word knocked out, ``log p(y_t | ·) - log p(y_t | · without word w)``; positive
    where the piece needed the word. Row 0 of the batch is the sentence as it is,
    rows 1..W each with one word masked: one forced pass of ``W + 1`` rows."""
    w, s = len(groups), src.size(1)
    pieces = torch.zeros(w + 1, s, dtype=torch.bool, device=src.device)
    for row, group in enumerate(groups, start=1):
        pieces[row, list(group)] = True
    rows = w + 1
    batch = (src.expand(rows, -1), src_lengths.expand(rows).contiguous())
    mask = torch.ones(rows, s, dtype=torch.bool, device=src.device)
    out = forced_outputs(
        model, *batch, mask, tgt_in.expand(rows, -1), KnockoutMasks(pieces=pieces)
    )
    chosen = target_log_probs(out.log_probs, tgt_out.expand(rows, -1))  # (W+1, T)
    return (chosen[:1] - chosen[1:]).t()  # (T, W)


def occlusion_rows(
    model: nn.Module, batch: Batch, groups: Sequence[Sequence[Sequence[int]]]
) -> list[Tensor]:
    """``occlusion`` of several sentences in one forced pass: ``batch`` holds the
    sentences (``collate``d, padded), ``groups[k]`` sentence ``k``'s words' source
    pieces. Each sentence is encoded once and read by ``W_k + 1`` decoder rows (as
    it is, then each word masked). Returns per sentence its drops ``(T_k, W_k)``
    (``T_k`` its target pieces + EOS)."""
    counts = torch.tensor([len(words) + 1 for words in groups], device=batch.src.device)
    rows = torch.repeat_interleave(
        torch.arange(len(groups), device=counts.device), counts
    )
    pieces = torch.zeros(len(rows), batch.src.size(1), dtype=torch.bool)
    starts = [0, *torch.cumsum(counts, 0).tolist()[:-1]]
    for start, words in zip(starts, groups, strict=True):
        for w, group in enumerate(words, start=1):
            pieces[start + w, list(group)] = True
    out = forced_outputs(
        model,
        batch.src,
        batch.src_lengths,
        batch.src_mask,
        batch.tgt_in.index_select(0, rows),
        KnockoutMasks(pieces=pieces.to(batch.src.device)),
        rows=rows,
    )
    tgt_out = batch.tgt_out.index_select(0, rows)
    chosen = target_log_probs(out.log_probs, tgt_out)  # (rows, T)
    lengths = (batch.tgt_out != PAD_ID).sum(dim=1).tolist()
    drops = []
    for start, words, t in zip(starts, groups, lengths, strict=True):
        block = chosen[start : start + len(words) + 1, :t]
        drops.append((block[:1] - block[1:]).t())  # (T, W)
    return drops


def spread_over_pieces(
    drops: Tensor, groups: Sequence[Sequence[int]], width: int
) -> Tensor:
    """drops ``(T, W)`` → ``(T, width)`` over source pieces: a word's drop shared
    equally among its pieces (summing a word's pieces gives its drop back, as the
    pictures' pieces→words merge does); other columns 0."""
    out = drops.new_zeros(drops.size(0), width)
    for w, group in enumerate(groups):
        out[:, list(group)] = drops[:, w : w + 1] / len(group)
    return out
