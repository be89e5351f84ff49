"""Writing what ``seq2seq-align`` collected: Pharaoh links, JSON, NumPy, PNG, HTML.

Items are ``align.Attention`` records: piece tokens with end-of-sentence last, weights
``(T, S)``, optional heads, gold links, attribution and its Spearman correlation.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from seq2seq.metrics import is_special, word_alignment_from_attention
from seq2seq.visualize import alignment_html, figure_to_png, merge_subwords, to_pharaoh


def pharaoh_line(att, words: bool, shifted: bool, threshold: float | None) -> str:
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


def merged(att):
    """The same record over words: pieces merged (``merge_subwords``) everywhere."""

    def merge(matrix):
        return merge_subwords(matrix, att.src_tokens, att.tgt_tokens)[0]

    weights, src, tgt = merge_subwords(att.weights, att.src_tokens, att.tgt_tokens)
    heads = None if att.heads is None else np.stack([merge(h) for h in att.heads])
    attr = None if att.attribution is None else merge(att.attribution)
    return replace(
        att,
        src_tokens=src,
        tgt_tokens=tgt,
        weights=weights,
        heads=heads,
        attribution=attr,
    )


def _record(att) -> dict:
    record = {
        "title": att.title,
        "src_tokens": att.src_tokens,
        "tgt_tokens": att.tgt_tokens,
        "weights": np.asarray(att.weights).tolist(),
    }
    if att.heads is not None:
        record["heads"] = np.asarray(att.heads).tolist()
    if att.gold is not None:
        record["gold"] = att.gold
    if att.attribution is not None:
        record["attribution"] = np.asarray(att.attribution).tolist()
        rho = att.spearman
        record["spearman"] = None if rho is None or np.isnan(rho) else float(rho)
    return record


def _html_item(att) -> dict:
    return {
        "src_tokens": att.src_tokens,
        "tgt_tokens": att.tgt_tokens,
        "weights": att.weights,
        "heads": att.heads,
        "gold": att.gold,
        "attribution": att.attribution,
        "spearman": att.spearman,
        "title": att.title,
    }


def write_files(cfg: DictConfig, run_dir: Path, items: list, figure) -> Path:
    """html / json: one file; png / npy: one file per sentence in a folder (npy with
    ``tokens.json`` naming each matrix's tokens)."""
    if cfg.format == "html":
        page = alignment_html([_html_item(a) for a in items])
        return emit(cfg, run_dir, "alignments.html", page)
    if cfg.format == "json":
        records = [_record(a) for a in items]
        return emit(cfg, run_dir, "alignments.json", json.dumps(records))
    folder = Path(cfg.output) if cfg.output else run_dir / "alignments"
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for i, att in enumerate(items):
        if cfg.format == "png":
            (folder / f"alignment_{i}.png").write_bytes(figure_to_png(figure(att)))
            continue
        np.save(folder / f"alignment_{i}.npy", att.weights)
        if att.attribution is not None:
            np.save(folder / f"attribution_{i}.npy", att.attribution)
        index.append(
            {
                "file": f"alignment_{i}.npy",
                "title": att.title,
                "src_tokens": att.src_tokens,
                "tgt_tokens": att.tgt_tokens,
            }
        )
    if index:  # the tokens of each matrix (rows: target, columns: source)
        (folder / "tokens.json").write_text(json.dumps(index), encoding="utf-8")
    print(f"wrote {len(items)} {cfg.format} file(s) to {folder}")
    return folder


def emit(cfg: DictConfig, run_dir: Path, name: str, text: str) -> Path:
    path = Path(cfg.output) if cfg.output else run_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return path
