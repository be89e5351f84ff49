"""Target prefixes the searches keep: each sentence's first pieces are given, the
search continues from them.

A prefix is forced through the search's own steps: while a sentence is inside its
prefix, every row's log-probabilities keep only the prefix's next piece (``-inf``
elsewhere), so greedy search takes it and beam search keeps exactly one live beam,
the prefix, with its true log-probability as score. After the prefix the search
runs as without one, from the state the prefix left (teacher-forced, as forced
decoding would leave it). Sentences of one batch may have prefixes of different
lengths, or none: a row's PAD means "not forced at this step".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import PAD_ID, Tokenizer
from seq2seq.decoding.settings import output_limits
from seq2seq.errors import InputError

NEG_INF = float("-inf")


def pad_prefixes(
    prefixes: Sequence[Sequence[int]], device: torch.device
) -> Tensor | None:
    """Per sentence its prefix ids → ``(B, P)`` long, PAD after each prefix; None
    when no sentence has one (the search then does no extra work)."""
    width = max((len(p) for p in prefixes), default=0)
    if width == 0:
        return None
    out = torch.full((len(prefixes), width), PAD_ID, dtype=torch.long)
    for row, prefix in enumerate(prefixes):
        out[row, : len(prefix)] = torch.as_tensor(list(prefix), dtype=torch.long)
    return out.to(device)


def prefix_lengths(forced: Tensor) -> Tensor:
    """forced ``(B, P)`` → each prefix's length ``(B,)``."""
    return (forced != PAD_ID).sum(dim=1)


def force_tokens(log_probs: Tensor, tokens: Tensor) -> Tensor:
    """log_probs ``(n, V)``, tokens ``(n,)`` (PAD: free) → the rows with a token keep
    only its log-probability, ``-inf`` elsewhere; free rows are unchanged."""
    index = tokens.unsqueeze(1)  # (n, 1)
    kept = log_probs.gather(1, index)
    only = torch.full_like(log_probs, NEG_INF).scatter_(1, index, kept)
    return torch.where((tokens != PAD_ID).unsqueeze(1), only, log_probs)


def forced_at(forced: Tensor | None, t: int, rows: Tensor) -> Tensor | None:
    """The forced tokens ``(n,)`` of step ``t`` for the sentences ``rows``, or None
    when no sentence is forced at ``t`` (past every prefix)."""
    if forced is None or t >= forced.size(1):
        return None
    return forced.index_select(0, rows)[:, t]


def prefix_ids(
    tokenizer: Tokenizer,
    settings: Any,
    split: EncodedSplit,
    prefixes: Sequence[str | Sequence[int] | None] | None,
    names: Sequence[str] | None = None,
) -> list[list[int]] | None:
    """Each pair's prefix (text, encoded as the target side is; target ids; or
    None) as target ids, checked against the pair's output limit under the decoding
    ``settings`` (else an ``InputError`` naming the pair, ``names[k]`` or ``text
    k``; a prefix as long as the limit is the whole, unfinished, translation); None
    when no pair has a prefix."""
    if prefixes is None or not any(prefixes):
        return None
    if len(prefixes) != len(split):
        raise InputError(f"{len(prefixes)} prefixes for {len(split)} texts")
    ids = [
        tokenizer.encode_tgt([p])[0] if isinstance(p, str) else list(p or [])
        for p in prefixes
    ]
    lengths = torch.as_tensor([len(s) + 1 for s in split.src_ids])
    limits = output_limits(lengths, settings).tolist()
    for k, (prefix, limit) in enumerate(zip(ids, limits, strict=True)):
        if len(prefix) > limit:
            name = f"text {k}" if names is None else names[k]
            raise InputError(
                f"the prefix of {name} has {len(prefix)} pieces, over its output "
                f"limit of {limit} (decode.max_len_a, decode.max_len_b); shorten "
                "the prefix or raise max_len_b"
            )
    return ids


def batch_prefixes(
    prefixes: Sequence[Sequence[int]] | None, ids: Sequence[int], device: torch.device
) -> Tensor | None:
    """The prefixes of a batch's pairs ``ids`` (a split's ``prefix_ids``), padded
    (``pad_prefixes``); None without any."""
    if prefixes is None:
        return None
    return pad_prefixes([prefixes[i] for i in ids], device)
