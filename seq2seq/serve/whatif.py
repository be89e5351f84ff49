"""The what-ifs of ``/translate`` and ``/attention``: requests' prefixes and
knock-outs checked (``RequestError``, 422, one line) and their answers' parts: each
step's distribution, a knock-out's change in the original translation's
log-probability, occlusion, and the Spearman ρ of each pair of maps.

The checks only tokenize and read the model's shape; the parts run on the model's
thread (``engine.Engine.attention``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seq2seq.alignment.attribution import spearman
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import EOS_ID
from seq2seq.decoding.knockout import Knockout
from seq2seq.decoding.maps import EOS_PIECE, forced_split
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import (
    log_probabilities,
    occlusion_maps,
)
from seq2seq.errors import InputError


class RequestError(ValueError):
    """A request the model cannot take (422): one line, what and how to fix it."""


def knockout_of(request: Any) -> Knockout | None:
    """A request's ``KnockoutRequest`` (or None) as a ``Knockout``; None when empty."""
    if request is None:
        return None
    for pair in request.self_heads:
        if len(pair) != 2:
            raise RequestError(
                f"knockout.self_heads: {pair} is not a [layer, head] pair"
            )
    ko = Knockout(
        tuple(request.words),
        tuple(request.heads),
        tuple((int(x), int(h)) for x, h in request.self_heads),
    )
    return ko or None


def check_prefixes(
    tr: Translator, texts: Sequence[str], prefixes: Sequence[str | None], where: str
) -> None:
    """Each prefix fits its text's output limit (``Translator.prefix_ids``)."""
    if len(prefixes) != len(texts):
        raise RequestError(
            f"{len(prefixes)} prefixes for {len(texts)} texts: give one per text "
            "(null for none)"
        )
    names = [where.format(k) for k in range(len(texts))]
    split = tr.encode([t.strip() for t in texts])
    try:
        tr.prefix_ids(split, prefixes, names)
    except InputError as err:
        raise RequestError(str(err)) from None


def piece_ids(tr: Translator, pieces: Sequence[str]) -> list[int]:
    """Target pieces (as ``tgt_tokens`` spells them) → their ids; a piece outside
    the vocabulary, or a control piece, is a ``RequestError``."""
    vocab = tr.tokenizer.processor("tgt")
    ids = []
    for k, piece in enumerate(pieces):
        token = vocab.piece_to_id(piece)
        if vocab.id_to_piece(token) != piece or vocab.is_control(token):
            raise RequestError(
                f"prefix_pieces[{k}] {piece!r} is not a piece of the target "
                "vocabulary (tgt_tokens and steps' alternatives spell them)"
            )
        ids.append(token)
    return ids


def check_knockout(tr: Translator, text: str, ko: Knockout) -> None:
    """The knock-out names words and heads the text and the model have."""
    try:
        tr.knockout_masks(tr.encode([text.strip()]), [ko])
    except InputError as err:
        raise RequestError(str(err)) from None


def check_whatif(
    tr: Translator, req: Any, forced: bool, ko: Knockout | None
) -> str | list[int] | None:
    """An ``/attention`` request's prefix (returned: text or piece ids) and
    knock-out ``ko``, checked."""
    prefix: str | list[int] | None = req.prefix or None
    if req.prefix_pieces:
        if prefix:
            raise RequestError("give prefix or prefix_pieces, not both")
        prefix = piece_ids(tr, req.prefix_pieces)
    if prefix and forced:
        raise RequestError(
            "prefix continues the model's own translation: give it or a "
            "reference, not both"
        )
    if prefix:
        check_prefixes(tr, [req.text], [prefix], "text")
    if ko is None:
        return prefix
    if req.attribution or req.occlusion:
        raise RequestError(
            "attribution and occlusion explain the whole model: ask for them "
            "without a knockout"
        )
    check_knockout(tr, req.text, ko)
    return prefix


def whatif_parts(
    tr: Translator,
    att: Any,
    prefix: str | list[int] | None,
    knocked: dict | None,
    stats: list[Any] | None,
    occluded: list[np.ndarray] | None,
    k: int,
) -> dict[str, Any]:
    """The what-if fields of pair ``k``'s ``/attention`` record (its map ``att``)."""
    if isinstance(prefix, list):
        prefix = tr.tokenizer.decode_tgt(prefix)
    occ = None if occluded is None else occluded[k]
    maps = {"attention": att.weights, "attribution": att.attribution, "occlusion": occ}
    return {
        "prefix": prefix or None,
        "knockout": knocked,
        "steps": None if stats is None else steps_record(tr, stats[k], att.tgt_tokens),
        "occlusion": None if occ is None else np.asarray(occ).tolist(),
        "correlations": correlations(maps),
    }


def steps_record(tr: Translator, stats: Any, tgt_tokens: Sequence[str]) -> list[dict]:
    """``StepStats`` of one translation → ``/attention``'s ``steps``."""
    pieces = tr.tokenizer.tgt_pieces
    out = []
    for t, token in enumerate(tgt_tokens):
        ids = stats.top_ids[t].tolist()
        alts = [
            {"piece": _piece(pieces, i), "prob": float(p)}
            for i, p in zip(ids, stats.top_probs[t].tolist(), strict=True)
        ]
        out.append(
            {
                "piece": token,
                "prob": float(stats.prob[t]),
                "entropy": float(stats.entropy[t]),
                "alternatives": alts,
            }
        )
    return out


def _piece(pieces: Any, token: int) -> str:
    return EOS_PIECE if token == EOS_ID else pieces([token])[0]


def knockout_records(
    tr: Translator,
    searcher: Translator,
    split: EncodedSplit,
    prefix_ids: list[list[int]] | None,
    kos: Sequence[Knockout | None],
) -> list[dict | None]:
    """Per pair with a knock-out: the model's own translation without it (same
    prefix), and its log-probability with and without the knock-out."""
    found = searcher.search(split, prefix_ids)
    hyps = [hs[0] for hs in found]
    own = forced_split(split, [h.tokens for h in hyps])
    intact = log_probabilities(tr, own)
    knocked = log_probabilities(tr, own, kos)
    texts = tr.detokenize(hyps)
    out: list[dict | None] = []
    for k, ko in enumerate(kos):
        if not ko:
            out.append(None)
            continue
        out.append(
            {
                "knocked_out": ko.describe(),
                "original": texts[k],
                "original_log_prob": intact[k],
                "knocked_log_prob": knocked[k],
                "change": knocked[k] - intact[k],
            }
        )
    return out


def occlusions(tr: Translator, split: EncodedSplit) -> list[np.ndarray]:
    """Each pair's occlusion map ``(T, S)`` over pieces (``whatif.occlusion_maps``)."""
    return [m.numpy() for m in occlusion_maps(tr, split)]


def correlations(maps: dict[str, Any]) -> dict[str, float | None] | None:
    """The Spearman ρ of each pair of the maps given (name → ``(T, S)``, None: not
    asked for); None when fewer than two."""
    given = [(name, m) for name, m in maps.items() if m is not None]
    if len(given) < 2:
        return None
    out: dict[str, float | None] = {}
    for i, (a, ma) in enumerate(given):
        for b, mb in given[i + 1 :]:
            rho = spearman(ma, mb)
            out[f"{a}~{b}"] = None if np.isnan(rho) else float(rho)
    return out
