"""``AttentionMap``: one sentence's attention matrix with its tokens, the record that
extraction, AER, the exports, the renderers and the viewer all pass around.

Weights are ``(T, S)``: one row per target token (the end-of-sentence step last), one
column per source token (the source's end-of-sentence last). Attention weights
describe how the model mixed the source states; they are not a causal explanation of
its output (``CAVEAT``, printed wherever a map is shown).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CAVEAT = (
    "Attention shows how the model mixed the source; it is not a causal explanation."
)


@dataclass
class AttentionMap:
    """weights ``(T, S)``; heads ``(heads, T, S)`` for multi-head attention; gold links
    (Pharaoh over whitespace words) when known; attribution ``(T, S)`` (gradient ×
    input) and its Spearman correlation with the weights, when asked for."""

    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    heads: np.ndarray | None = None
    gold: str | None = None
    attribution: np.ndarray | None = None
    spearman: float | None = None
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (lists, no NaN); optional parts only when present."""
        record: dict[str, Any] = {
            "title": self.title,
            "src_tokens": list(self.src_tokens),
            "tgt_tokens": list(self.tgt_tokens),
            "weights": np.asarray(self.weights).tolist(),
        }
        if self.heads is not None:
            record["heads"] = np.asarray(self.heads).tolist()
        if self.gold is not None:
            record["gold"] = self.gold
        if self.attribution is not None:
            record["attribution"] = np.asarray(self.attribution).tolist()
            rho = self.spearman
            record["spearman"] = None if rho is None or np.isnan(rho) else float(rho)
        return record


def zero_share(matrices: Sequence[Any]) -> float:
    """The share of weights that are exactly 0 over all cells of ``matrices`` (each
    ``(T, S)`` over real positions): what sparse attention (``attention.normalizer``)
    buys in readability; a softmax gives 0 unless a weight underflows."""
    cells = [np.asarray(as_numpy(w)) for w in matrices]
    total = sum(c.size for c in cells)
    return sum(int((c == 0).sum()) for c in cells) / total if total else 0.0


def as_numpy(weights: Any) -> np.ndarray:
    """A NumPy view of an array-like or a (possibly CUDA, bf16) torch tensor."""
    if hasattr(weights, "detach"):  # torch.Tensor, without importing torch here
        weights = weights.detach().double().cpu().numpy()
    return np.asarray(weights)


def as_matrix(weights: Any, n_src: int, n_tgt: int) -> np.ndarray:
    """``weights`` as a float64 ``(T, S)`` array, checked against the token counts."""
    w = np.asarray(as_numpy(weights), dtype=np.float64)
    if w.shape != (n_tgt, n_src):
        raise ValueError(
            f"weights of shape {tuple(w.shape)} do not match {n_tgt} target and "
            f"{n_src} source tokens (want (T, S) = ({n_tgt}, {n_src}))"
        )
    return w
