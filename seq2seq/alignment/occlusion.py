"""Occlusion beside attention: a causal attribution, drawn and exported like
gradient × input.

``decoding.whatif.occlusion_maps`` gives, per written piece, the drop of its
log-probability (nats) when each source word is knocked out (masked from the
attention, the rest renormalized). To share the heatmaps' [0, 1] scale with the
attention, a row is drawn as each word's share of the row's positive drops (a word
whose absence *raises* the piece's probability counts 0; a row with no positive drop
stays 0); the Spearman ρ with the attention is over the drops themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seq2seq.alignment.attribution import spearman
from seq2seq.alignment.maps import AttentionMap
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import occlusion_maps

OCCLUSION = "occlusion"


def shares(drops: np.ndarray) -> np.ndarray:
    """drops ``(T, S)`` → each row's positive drops as shares of their sum."""
    positive = np.clip(np.asarray(drops, dtype=np.float64), 0.0, None)
    total = positive.sum(axis=-1, keepdims=True)
    return np.where(total > 0, positive / np.where(total > 0, total, 1.0), 0.0)


def attach_occlusion(
    translator: Translator,
    split: EncodedSplit,
    maps: Sequence[AttentionMap],
    gradients: Sequence[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Give each map of ``split``'s pairs its occlusion as the attribution (shares,
    ``attribution_method="occlusion"``) and the Spearman ρ of its weights and the
    drops; with each pair's gradient × input (``gradients``), the ρ of each pair of
    the three maps in ``correlations``. Returns the drops ``(T, S)`` per pair
    (nats)."""
    drops = [d.numpy() for d in occlusion_maps(translator, split)]
    for k, (att, drop) in enumerate(zip(maps, drops, strict=True)):
        att.attribution = shares(drop)
        att.attribution_method = OCCLUSION
        att.spearman = spearman(att.weights, drop)
        if gradients is not None:
            grad = gradients[k]
            att.correlations = {
                "attention~occlusion": _rho(att.spearman),
                "attention~gradient": _rho(spearman(att.weights, grad)),
                "gradient~occlusion": _rho(spearman(grad, drop)),
            }
    return drops


def _rho(value: float) -> float | None:
    return None if np.isnan(value) else float(value)
