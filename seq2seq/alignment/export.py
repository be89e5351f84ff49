"""Exports of attention maps: Pharaoh links, JSON records, NumPy arrays and PNG files.

Maps are ``AttentionMap`` records over pieces (end-of-sentence last) or, after
``words.merged``, over words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from seq2seq.alignment.links import to_pharaoh
from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.render import alignment_figure, figure_to_png
from seq2seq.alignment.words import (
    is_special,
    merge_subwords,
    word_alignment_from_attention,
)
from seq2seq.config import WeightScale
from seq2seq.disk import atomic_file, make_folder, write_atomic

ELSEWHERE = "write elsewhere (output=PATH, or hydra.run.dir=DIR)"


def pharaoh_line(
    att: AttentionMap, words: bool, shifted: bool, threshold: float | None
) -> str:
    """One sentence's links ``i-j`` (source, target), sorted.

    Over tokens (pieces and ``</s>``) by default; with ``words`` over whitespace words,
    end-of-sentence excluded (comparable with gold alignments), reading either the
    step that predicts the word or, ``shifted``, the step where it is the input.
    Without ``threshold`` each target links to its argmax; with it, every cell
    ``>= threshold`` (many-to-many).
    """
    w = np.asarray(att.weights, dtype=np.float64)
    if not words:
        return to_pharaoh(w, threshold)
    if threshold is None:
        links = word_alignment_from_attention(
            w, att.src_tokens, att.tgt_tokens, shifted=shifted
        )
        return " ".join(f"{i}-{j}" for i, j in sorted(links))
    if shifted:  # row t becomes the step where target piece t is the input
        w = np.concatenate([w[1:], w[-1:]], axis=0)
    m, src, tgt = merge_subwords(w, att.src_tokens, att.tgt_tokens)
    keep_src = [k for k, t in enumerate(src) if not is_special(t)]
    keep_tgt = [k for k, t in enumerate(tgt) if not is_special(t)]
    return to_pharaoh(m[np.ix_(keep_tgt, keep_src)], threshold)


def json_text(items: Sequence[AttentionMap]) -> str:
    """All maps as one JSON list of records (``AttentionMap.to_dict``)."""
    return json.dumps([att.to_dict() for att in items])


def write_png(
    items: Sequence[AttentionMap],
    folder: Path,
    prefix: str = "alignment",
    scale: WeightScale | str = "linear",
) -> Path:
    """``<prefix>_<i>.png``: one heatmap per map on the colour ``scale``, each
    written whole or not at all."""
    make_folder(folder, "pictures", ELSEWHERE)
    for i, att in enumerate(items):
        png = figure_to_png(alignment_figure(att, scale=scale))
        write_atomic(folder / f"{prefix}_{i}.png", png, "a picture", ELSEWHERE)
    return folder


def write_npy(items: Sequence[AttentionMap], folder: Path) -> Path:
    """``alignment_<i>.npy`` (and ``attribution_<i>.npy``) per map, with
    ``tokens.json`` naming each matrix's tokens (rows: target, columns: source)."""
    make_folder(folder, "matrices", ELSEWHERE)
    index = []
    for i, att in enumerate(items):
        _save_npy(folder / f"alignment_{i}.npy", att.weights)
        if att.attribution is not None:
            _save_npy(folder / f"attribution_{i}.npy", att.attribution)
        index.append(
            {
                "file": f"alignment_{i}.npy",
                "title": att.title,
                "src_tokens": att.src_tokens,
                "tgt_tokens": att.tgt_tokens,
            }
        )
    write_atomic(folder / "tokens.json", json.dumps(index), "the index", ELSEWHERE)
    return folder


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_file(path, "a matrix", ELSEWHERE, binary=True) as out:
        np.save(out, array)
