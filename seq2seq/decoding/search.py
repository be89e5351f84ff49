"""Batched greedy and beam search → ``Hypothesis(tokens, score, attention, finished)``.

Both searches run over all sentences (× beams) at once with tensor operations; Python
loops over sentences only collect the results at the end. The model is put in eval mode
for the search and restored afterwards.

Beam search keeps ``K`` live hypotheses per sentence. At every step the extensions of
the live beams are ranked; an end-of-sentence (EOS) extension ranking in the top ``K``
leaves the beam for the sentence's pool of finished hypotheses (scored with the GNMT
length penalty ``raw / ((5 + len) / 6)^α``), and the ``K`` best other extensions stay
live. The search does not stop when the best hypothesis first ends: a sentence is done
when it holds ``n_best`` finished hypotheses and no live one can beat the worst of them
(raw scores only fall, so ``raw / max lp`` over the remaining lengths bounds any
finished score), or when it reaches its maximum length ``⌊a·|src| + b⌋``; a sentence
with fewer finished hypotheses is topped up with its best live (unfinished) ones.
A sentence that is done leaves the decoder's batch: later steps run only for the
sentences still searching. ``stop="best"`` ends a sentence earlier, as JoeyNMT and
OpenNMT-py do: as soon as its ``n_best`` finished hypotheses score at least as well as
its best live one does now (the live one might still have overtaken them later).
``coverage_penalty=β > 0`` adds GNMT's coverage penalty (Wu et al., 2016) to every
finished score, ``β Σ_i log min(Σ_t a_ti, 1)`` over the real source positions ``i``
(attention ``a`` summed over the hypothesis's steps, EOS step included), which favours
hypotheses that have attended to the whole source; it is never positive, so the stop
bound still holds. With ``α = 0`` and ``K = 1`` this is exactly greedy search; with
``α > 0`` a beam of one may continue past greedy's EOS and return a longer hypothesis
with a better penalised score. PAD and BOS are never generated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from seq2seq.config import DecodeConfig, Stop
from seq2seq.config_checks import check_decode
from seq2seq.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from seq2seq.decoding.knockout import KnockoutMasks, start_state
from seq2seq.decoding.prefix import force_tokens, forced_at, prefix_lengths
from seq2seq.decoding.settings import decode_settings, output_limits
from seq2seq.decoding.shortcuts import StepFn, search_step
from seq2seq.decoding.vocab import (
    projection_shape,
    rescored_candidates,
    resolve_vocab_dtype,
)

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """tokens (ending with EOS when finished); score (beam: length-penalised
    log-probability; greedy: the plain sum of log-probabilities); attention
    ``(len(tokens), S_real)``, one row per generated token, the EOS row included;
    prefix_score: the summed log-probability of a given target prefix (its pieces
    begin ``tokens``), None without one."""

    tokens: list[int]
    score: float
    attention: Tensor
    finished: bool
    prefix_score: float | None = None


def coverage_penalty(coverage: Tensor, mask: Tensor, beta: float) -> Tensor:
    """GNMT's ``β Σ_i log min(c_i, 1)`` over the last axis of the summed attention
    ``coverage (..., S)``, counting the real positions of ``mask (..., S)`` only. A
    position attended less than float32's smallest normal counts as that (the log of
    an exact zero would rule the hypothesis out)."""
    tiny = torch.finfo(torch.float32).tiny
    logs = coverage.float().clamp(min=tiny, max=1.0).log()
    return beta * logs.masked_fill(~mask, 0.0).sum(dim=-1)


class _Coverage:
    """The summed attention of the live beams, for ``coverage_penalty``."""

    def __init__(self, beta: float) -> None:
        self.beta = beta
        self.sum: Tensor | None = None  # (n·K, S), in the rows of the decoder state

    def step(self, weights: Tensor, mask: Tensor, n: int, k: int) -> Tensor:
        """This step's weights ``(n·K, S)`` of the extended beams and the source mask
        ``(n, S)`` → the penalty ``(n, K)`` of each, this step included."""
        self.total = weights.float() if self.sum is None else self.sum + weights.float()
        total = self.total.view(n, k, -1)
        return coverage_penalty(total, mask.unsqueeze(1), self.beta)

    def select(self, rows: Tensor) -> None:
        """Keep the coverage of the beams that go on (the state's ``rows``)."""
        self.sum = self.total.index_select(0, rows)


def length_penalty(length: Any, alpha: float) -> Any:
    """GNMT length penalty ``((5 + length) / 6) ** alpha`` (numbers or tensors)."""
    return ((5.0 + length) / 6.0) ** alpha


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def _mask_specials(log_probs: Tensor) -> Tensor:
    """Never generate PAD or BOS: ``-inf`` written into ``log_probs`` in place (the
    search owns the step's fresh output; a copy of ``(B, V)`` per step is not free)."""
    log_probs[..., PAD_ID] = NEG_INF
    log_probs[..., BOS_ID] = NEG_INF
    return log_probs


def _limits(
    src_lengths: Tensor, src_mask: Tensor, settings: DecodeConfig
) -> tuple[int, Tensor]:
    """The steps a search may run (from the lengths on the host) and each sentence's
    output limit ``(B,)`` on the device (from the mask): neither waits for a copy."""
    steps = int(output_limits(src_lengths, settings).max())
    return steps, output_limits(src_mask.sum(dim=1), settings)


def check_interval(device: torch.device) -> int:
    """Steps between the searches' "who is still searching?" checks: each one waits
    for the device (``nonzero``), so on an accelerator they come every
    ``CHECK_EVERY`` steps, and finished sentences ride along, masked, until the next
    one; on CPU nothing waits, and every step drops them."""
    return 1 if device.type == "cpu" else CHECK_EVERY


# Steps between two checks of the searches on an accelerator (``check_interval``).
CHECK_EVERY = 8


def greedy_search(
    model: nn.Module,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    settings: DecodeConfig | None = None,
    step: StepFn | None = None,
    check_every: int | None = None,
    prefix: Tensor | None = None,
    knockout: KnockoutMasks | None = None,
) -> list[Hypothesis]:
    """Argmax decoding of a batch: src ``(B, S)``, src_lengths ``(B,)`` (CPU), src_mask
    ``(B, S)`` → one ``Hypothesis`` per sentence, in batch order. Of ``settings``
    only the output limit counts; ``step`` (None: a ``search_step`` of its own, fp32)
    is the run's step function; ``check_every`` (None: ``check_interval``) the steps
    between the host's checks of which sentences are still searching. ``prefix``
    ``(B, P)`` (``prefix.pad_prefixes``): target pieces each sentence starts with;
    ``knockout``: what to knock out of the model (``knockout.KnockoutMasks``)."""
    settings = decode_settings() if settings is None else settings
    with _eval_mode(model):
        step = search_step(model) if step is None else step
        b, device = src.size(0), src.device
        every = check_interval(device) if check_every is None else check_every
        state = start_state(model, src, src_lengths, src_mask, knockout)
        max_steps, limits = _limits(src_lengths, src_mask, settings)
        prev = torch.full((b,), BOS_ID, dtype=torch.long, device=device)
        scores = torch.zeros(b, device=device)
        # the prefixes' log-probabilities (nothing made without prefixes)
        pre_scores = None if prefix is None else torch.zeros(b, device=device)
        lengths = torch.zeros(b, dtype=torch.long, device=device)
        # Finished sentences leave the decoder's batch at the next check, as in beam
        # search: the step runs only for the ``active`` ones, whose results are
        # scattered back; until then ``done`` (n,) masks them out.
        active = torch.arange(b, device=device)
        done = torch.zeros(b, dtype=torch.bool, device=device)
        tokens, rows = [], []
        for t in range(max_steps):
            log_probs, state, weights = step(prev, state)
            log_probs = _mask_specials(log_probs)
            forced = forced_at(prefix, t, active)
            if forced is not None:
                log_probs = force_tokens(log_probs, forced)
            best, prev = log_probs.max(dim=-1)  # (n,)
            gain, token, weights = best.to(scores.dtype), prev, weights.float()
            if forced is not None and pre_scores is not None:
                pre_scores.index_add_(0, active, gain.where(forced != PAD_ID, 0.0))
            added = torch.ones_like(active)
            if every > 1:  # sentences done since the last check add nothing
                added = (~done).long()
                gain = gain.where(~done, 0.0)
                token = prev.masked_fill(done, PAD_ID)
                weights = weights.masked_fill(done.unsqueeze(1), 0.0)
            scores.index_add_(0, active, gain)
            lengths.index_add_(0, active, added)
            tokens.append(_scatter_rows((token,), active, b, PAD_ID)[0])
            rows.append(_scatter_rows((weights,), active, b, 0.0)[0])
            done = done | (prev == EOS_ID) | (lengths[active] >= limits[active])
            if t + 1 == max_steps or (t + 1) % every:
                continue
            keep = (~done).nonzero().squeeze(1)  # the one sync of ``every`` steps
            if keep.numel() == 0:
                break
            if keep.numel() < done.numel():  # else the state stays, without copies
                state, prev, active = state.select(keep), prev[keep], active[keep]
                done = done[keep]
        hyps = _greedy_hypotheses(tokens, rows, lengths, scores, src_lengths)
        if pre_scores is not None:
            _set_prefix_scores([[h] for h in hyps], prefix, pre_scores)
        return hyps


def _set_prefix_scores(
    nbests: list[list[Hypothesis]], prefix: Tensor | None, scores: Tensor | None
) -> None:
    """Give each sentence's hypotheses its prefix's log-probability ``scores (B,)``
    (nothing without prefixes)."""
    if prefix is None or scores is None:
        return
    for hyps, score in zip(nbests, scores.tolist(), strict=True):
        for h in hyps:
            h.prefix_score = score


def _greedy_hypotheses(
    tokens: list[Tensor],
    rows: list[Tensor],
    lengths: Tensor,
    scores: Tensor,
    src_lengths: Tensor,
) -> list[Hypothesis]:
    """Per step the tokens ``(B,)`` and weights ``(B, S)``, per sentence its length,
    score and source length (CPU) → the hypotheses, with three copies to the host."""
    steps = torch.stack([lengths, *tokens], dim=1).tolist()  # (B, 1 + T)
    attention = torch.stack(rows, dim=1).cpu()  # (B, T, S)
    hyps = []
    for i, (row, score, s) in enumerate(
        zip(steps, scores.tolist(), src_lengths.tolist(), strict=True)
    ):
        n = row[0]
        toks = row[1 : n + 1]
        att = attention[i, :n, :s]
        hyps.append(Hypothesis(toks, score, att, toks[-1] == EOS_ID))
    return hyps


class _Pool:
    """The best ``n`` finished hypotheses per sentence, as tensors ``(B, n)``: penalised
    score, raw score, the step that produced EOS and the live beam it extended."""

    def __init__(self, b: int, n: int, device: torch.device) -> None:
        self.score = torch.full((b, n), NEG_INF, device=device)
        self.raw = torch.full((b, n), NEG_INF, device=device)
        self.step = torch.zeros(b, n, dtype=torch.long, device=device)
        self.beam = torch.zeros(b, n, dtype=torch.long, device=device)

    def add(self, score: Tensor, raw: Tensor, step: int) -> None:
        """score, raw ``(B, K)`` for EOS extensions of beams 0..K-1 at ``step``."""
        n = self.score.size(1)
        merged = torch.cat([self.score, score], dim=1)
        self.score, idx = merged.topk(n, dim=1)
        beams = torch.arange(score.size(1), device=score.device).expand_as(score)
        self.raw = torch.cat([self.raw, raw], dim=1).gather(1, idx)
        self.step = torch.cat([self.step, torch.full_like(beams, step)], 1).gather(
            1, idx
        )
        self.beam = torch.cat([self.beam, beams], dim=1).gather(1, idx)


class _History:
    """Back-pointers per step: tokens and parents ``(B, K)`` of the live beams, weights
    ``(B, K, S)`` of the beams that were extended."""

    def __init__(self) -> None:
        self.tokens: list[Tensor] = []
        self.parents: list[Tensor] = []
        self.weights: list[Tensor] = []

    def freeze(self) -> None:
        # [T][B][K] each, in one copy to the host
        self.tok, self.par = torch.stack(
            [torch.stack(self.tokens), torch.stack(self.parents)]
        ).tolist()
        self.att = torch.stack(self.weights).float().cpu()  # (T, B, K, S)

    def path(self, b: int, step: int, beam: int) -> tuple[list[int], list[Tensor]]:
        """Tokens and attention rows of live beam ``beam`` of sentence ``b`` after
        ``step`` (back to the first step)."""
        tokens, rows = [], []
        for s in range(step, -1, -1):
            parent = self.par[s][b][beam]
            tokens.append(self.tok[s][b][beam])
            rows.append(self.att[s, b, parent])
            beam = parent
        return tokens[::-1], rows[::-1]

    def hypothesis(
        self, b: int, step: int, beam: int, score: float, eos: bool, s_real: int
    ) -> Hypothesis:
        """Finished (``eos``: beam ``beam`` before ``step`` + EOS at ``step``) or
        live (beam ``beam`` after ``step``) hypothesis."""
        if eos:
            tokens, rows = self.path(b, step - 1, beam)
            tokens.append(EOS_ID)
            rows.append(self.att[step, b, beam])
        else:
            tokens, rows = self.path(b, step, beam)
        attention = torch.stack(rows)[:, :s_real]
        return Hypothesis(tokens, score, attention, eos)


def _step_candidates(
    log_probs: Tensor, scores: Tensor, alpha: float, length: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """log_probs ``(B, K, V)``, live raw scores ``(B, K)`` → EOS (penalised, raw) scores
    ``(B, K)`` (``-inf`` unless within the step's top K) and the K best non-EOS
    extensions (raw scores, flat indices into K×V).

    One ``topk`` of 2K over the K×V extensions serves both: at most K of them (one per
    beam) are EOS, so the K best others are among them. ``log_probs`` is overwritten
    with the extensions' scores (the search owns it)."""
    k, v = scores.size(1), log_probs.size(-1)
    # (B, K, V): the raw scores of the extensions, ``length`` tokens long
    cand = log_probs.add_(scores.unsqueeze(-1))
    eos_raw = cand[:, :, EOS_ID].clone()
    best, best_idx = cand.flatten(1).topk(min(2 * k, k * v), dim=1)  # (B, 2K)
    keep = eos_raw >= best[:, k - 1 : k]  # EOS within the step's top K
    eos_pen = (eos_raw / length_penalty(length, alpha)).masked_fill(~keep, NEG_INF)
    others = best.masked_fill(best_idx % v == EOS_ID, NEG_INF)
    top, pos = others.topk(k, dim=1)  # (B, K), best first
    return eos_pen, eos_raw, top, best_idx.gather(1, pos)


def beam_search(
    model: nn.Module,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    settings: DecodeConfig,
    step: StepFn | None = None,
    check_every: int | None = None,
    prefix: Tensor | None = None,
    knockout: KnockoutMasks | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch → per sentence the ``settings.n_best`` hypotheses,
    best first (see the module docstring): ``beam_size`` K, ``length_penalty`` the
    GNMT α, ``coverage_penalty`` its β, ``stop`` the rule (``Stop``: bound, best),
    the output limit. ``settings`` are checked (``check_decode``: n_best ≤ K, the
    ranges); ``step``, ``check_every``, ``prefix`` and ``knockout`` as in
    ``greedy_search``: a prefix is the one live beam until it ends."""
    check_decode(settings)
    every = check_interval(src.device) if check_every is None else check_every
    with _eval_mode(model):
        step = search_step(model) if step is None else step
        args = (src, src_lengths, src_mask)
        return _beam_search(model, step, *args, settings, every, prefix, knockout)


def _beam_search(
    model: nn.Module,
    step: StepFn,
    src: Tensor,
    src_lengths: Tensor,
    src_mask: Tensor,
    settings: DecodeConfig,
    every: int,
    prefix: Tensor | None = None,
    knockout: KnockoutMasks | None = None,
) -> list[list[Hypothesis]]:
    k, alpha, n_best = settings.beam_size, settings.length_penalty, settings.n_best
    stop_best = Stop(settings.stop) == Stop.best
    beta = settings.coverage_penalty
    cover = _Coverage(beta) if beta > 0 else None
    b, device = src.size(0), src.device
    # The K beams of a sentence are identical until the first step has run: it runs
    # once per sentence, and its results are repeated for the K beams.
    state = start_state(model, src, src_lengths, src_mask, knockout)
    expand = torch.arange(b, device=device).repeat_interleave(k)
    max_steps, limits = _limits(src_lengths, src_mask, settings)
    scores = torch.full((b, k), NEG_INF, device=device)
    scores[:, 0] = 0.0
    prev = torch.full((b,), BOS_ID, dtype=torch.long, device=device)
    pool, hist = _Pool(b, n_best, device), _History()
    done = torch.zeros(b, dtype=torch.bool, device=device)
    end_step = torch.zeros(b, dtype=torch.long, device=device)
    end_scores = scores.clone()
    # Coverage penalties of the live beams as they are now (0 without coverage).
    live_pens = torch.zeros(b, k, device=device)
    end_pens = live_pens.clone()
    # The decoder runs only for the sentences still searching (``active``); their
    # results are scattered into batch-sized tensors for the pool and the history.
    # A sentence done between two checks (every ``every`` steps) rides along: its
    # finished candidates are dropped and its live scores kept.
    active = torch.arange(b, device=device)
    # the prefixes' log-probabilities and lengths (nothing made without prefixes)
    pre_scores = plen = None
    if prefix is not None:
        pre_scores, plen = torch.zeros(b, device=device), prefix_lengths(prefix)
    for t in range(max_steps):
        n = active.numel()
        log_probs, state, weights = step(prev, state)
        if t == 0:  # K beams per sentence from here on; keys stay one per sentence
            log_probs, weights = log_probs[expand], weights[expand]
            state = state.select_beams(expand)
        log_probs = _mask_specials(log_probs)
        forced = forced_at(prefix, t, active)
        if forced is not None:  # one live beam: the prefix (module prefix.py)
            log_probs = force_tokens(log_probs, forced.repeat_interleave(k))
        log_probs = log_probs.view(n, k, -1)
        eos_pen, eos_raw, live, idx = _step_candidates(
            log_probs, scores[active], alpha, t + 1
        )
        parents, tokens = idx // log_probs.size(-1), idx % log_probs.size(-1)
        if cover is not None:
            pen = cover.step(weights, state.keys.mask, n, k)  # (n, K)
            eos_pen = eos_pen + pen
            live_pens = live_pens.index_copy(0, active, pen.gather(1, parents))
        if every > 1:  # sentences done since the last check end nothing more (their
            # live scores run on unread: ``end_scores`` kept them when they were done)
            ended = done[active].unsqueeze(1)  # (n, 1)
            eos_pen, eos_raw = (
                x.masked_fill(ended, NEG_INF) for x in (eos_pen, eos_raw)
            )
        pool.add(*_scatter_rows((eos_pen, eos_raw), active, b, NEG_INF), t)
        scores = scores.index_copy(0, active, live)
        if forced is not None and pre_scores is not None:  # a prefix ending now:
            # its beam is the first
            pre_scores = torch.where(plen == t + 1, scores[:, 0], pre_scores)
        step_tokens, step_parents = _scatter_rows((tokens, parents), active, b, 0)
        hist.tokens.append(step_tokens)
        hist.parents.append(step_parents)
        hist.weights.append(_scatter_rows((weights.view(n, k, -1),), active, b, 0)[0])
        if stop_best:  # the best live hypothesis as it is now
            now = scores / length_penalty(t + 1.0, alpha)
            bound = (now if cover is None else now + live_pens).max(dim=1).values
        else:  # "bound": the best finished score any live one could still reach
            # (a coverage penalty is at most 0, so it cannot raise the bound)
            lp_max = length_penalty(limits.double(), alpha).clamp(
                min=length_penalty(t + 2.0, alpha)
            )  # lp is monotone in the length: its maximum over [t + 2, limit]
            bound = scores.max(dim=1).values / lp_max.to(scores.dtype)  # (B,)
        newly = ~done & ((t + 1 >= limits) | (pool.score[:, -1] >= bound))
        end_step = torch.where(newly, t, end_step)
        end_scores = torch.where(newly.unsqueeze(1), scores, end_scores)
        if cover is not None:
            end_pens = torch.where(newly.unsqueeze(1), live_pens, end_pens)
        done = done | newly
        if t + 1 == max_steps:  # every sentence is at its limit
            break
        keep = None
        if (t + 1) % every == 0:
            keep = (~done[active]).nonzero().squeeze(1)  # the one sync of the steps
            if keep.numel() == 0:
                break
        state, prev, active = _continue(state, cover, tokens, parents, active, keep)
    hist.freeze()
    ends = (end_step, end_scores, end_pens)
    nbests = _collect(hist, pool, ends, src_lengths, alpha, n_best)
    _set_prefix_scores(nbests, prefix, pre_scores)
    return nbests


def _continue(
    state: Any,
    cover: _Coverage | None,
    tokens: Tensor,
    parents: Tensor,
    active: Tensor,
    keep: Tensor | None,
) -> tuple[Any, Tensor, Tensor]:
    """The beams that go on after a step (tokens, parents ``(n, K)``): all of them, or
    with ``keep`` (positions within ``active``) those of the sentences still
    searching → the reordered state, the next tokens ``(n'·K,)`` and ``active``."""
    k = tokens.size(1)
    if keep is None:
        base = torch.arange(tokens.size(0), device=tokens.device).unsqueeze(1) * k
        rows = (base + parents).view(-1)
        state = state.select_beams(rows, None)
    else:
        rows = (keep.unsqueeze(1) * k + parents.index_select(0, keep)).view(-1)
        state = state.select_beams(
            rows, keep if keep.numel() < tokens.size(0) else None
        )
        tokens, active = tokens.index_select(0, keep), active.index_select(0, keep)
    if cover is not None:
        cover.select(rows)
    return state, tokens.reshape(-1), active


def _scatter_rows(
    values: tuple[Tensor, ...], rows: Tensor, b: int, fill: float
) -> tuple[Tensor, ...]:
    """Tensors of the active sentences ``(n, ...)`` → batch-sized ``(b, ...)`` with
    ``fill`` in the rows of finished sentences."""
    out = []
    for value in values:
        full = value.new_full((b, *value.shape[1:]), fill)
        out.append(full.index_copy(0, rows, value))
    return tuple(out)


def _collect(
    hist: _History,
    pool: _Pool,
    ends: tuple[Tensor, Tensor, Tensor],
    src_lengths: Tensor,
    alpha: float,
    n_best: int,
) -> list[list[Hypothesis]]:
    """Per sentence: the finished hypotheses, topped up with live ones, best first.
    ``ends``: the step each sentence ended at, its live beams' raw scores and their
    coverage penalties then."""
    end_step, end_scores, end_pens = ends
    n, k = pool.score.size(1), end_scores.size(1)
    # two copies to the host: the scores, then the steps and beams
    floats = torch.cat([pool.score, end_scores, end_pens.to(end_scores)], 1).tolist()
    longs = torch.cat([pool.step, pool.beam, end_step.unsqueeze(1)], 1).tolist()
    results = []
    for i, (f, ints, s_real) in enumerate(
        zip(floats, longs, src_lengths.tolist(), strict=True)
    ):
        f_scores, f_steps, f_beams = f[:n], ints[:n], ints[n : 2 * n]
        hyps = [
            hist.hypothesis(i, step, beam, score, True, s_real)
            for score, step, beam in zip(f_scores, f_steps, f_beams, strict=True)
            if score > NEG_INF
        ]
        e, raws, pens = ints[2 * n], f[n : n + k], f[n + k :]
        lp = length_penalty(e + 1.0, alpha)
        live = sorted(
            ((raw / lp + pens[j], j) for j, raw in enumerate(raws)), reverse=True
        )
        for score, j in live[: n_best - len(hyps)]:
            if score > NEG_INF:
                hyps.append(hist.hypothesis(i, e, j, score, False, s_real))
        hyps.sort(key=lambda h: h.score, reverse=True)
        results.append(hyps)
    return results


def run_step(model: nn.Module, settings: DecodeConfig, device: torch.device) -> StepFn:
    """The step of one search run over ``model``: the vocabulary projection in
    ``settings.vocab_precision`` (resolved for ``device`` and the model's projection),
    its best candidates recomputed in fp32. Make one per run and reuse it across the
    run's batches: what it builds from the weights is built once."""
    dtype = resolve_vocab_dtype(
        settings.vocab_precision, device, projection_shape(model)
    )
    return search_step(model, dtype, rescored_candidates(settings.beam_size))


def translate_batch(
    model: nn.Module,
    batch: Any,
    settings: DecodeConfig,
    step: StepFn | None = None,
    prefix: Tensor | None = None,
    knockout: KnockoutMasks | None = None,
) -> list[list[Hypothesis]]:
    """Decode a ``Batch`` with ``settings``: greedy when ``beam_size == 1`` (one
    hypothesis per sentence), else beam search with ``n_best`` hypotheses; ``step``
    None: ``run_step``'s for this batch alone; ``prefix`` and ``knockout`` as in
    ``greedy_search``."""
    args = (batch.src, batch.src_lengths, batch.src_mask)
    if step is None:
        step = run_step(model, settings, batch.src.device)
    extra = {"prefix": prefix, "knockout": knockout}
    if settings.beam_size <= 1:
        return [[h] for h in greedy_search(model, *args, settings, step, **extra)]
    return beam_search(model, *args, settings, step, **extra)
