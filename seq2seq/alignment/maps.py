"""``AttentionMap`` (made in ``decoding/maps.py``): one sentence's attention matrix with
its tokens, the record that extraction, AER, the exports, the renderers and the viewer
all pass around; and the helpers that read it.

Weights are ``(T, S)``: one row per target token (the end-of-sentence step last), one
column per source token (the source's end-of-sentence last). Attention weights
describe how the model mixed the source states; they are not a causal explanation of
its output (``CAVEAT``, printed wherever a map is shown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from seq2seq.decoding.maps import AttentionMap

# AttentionMap is made where the attention is read (decoding/maps.py, the
# Translator); it is named here too, beside the helpers every reader of it uses.
__all__ = ["CAVEAT", "AttentionMap", "as_matrix", "as_numpy", "zero_share"]

CAVEAT = (
    "Attention shows how the model mixed the source; it is not a causal explanation."
)


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
