"""What every corpus source shares: the split names and their aliases, a file's
digest, and the one pass that turns a source's table into cleaned ``src`` / ``tgt``
columns. ``corpus.py`` chooses the source; ``files.py`` and ``hub.py`` read theirs
with these, so no source module imports the module that chooses among them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from datasets import Dataset

from seq2seq.errors import CorpusError, SplitChoiceError

SPLITS = ("train", "validation", "test")
SPLIT_ALIASES = {
    "train": ("train",),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test",),
}
CLEAN_BATCH = 10_000  # rows per batch of the cleaning map


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (1.4 GB/s here)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def clean(text: object) -> str:
    return "" if text is None else str(text).strip()


def named_split(where: str, split: str, asked: str, present: Sequence[str]) -> str:
    """The name ``asked`` for ``split``, which the corpus must have."""
    if asked not in present:
        raise SplitChoiceError(
            f"{where}: no split named {asked!r} (asked for the {split} split); "
            f"splits present: {sorted(present)}",
            split,
        )
    return asked


def aliases_of(name: str) -> list[str]:
    return [split for split, aliases in SPLIT_ALIASES.items() if name in aliases] or [
        name
    ]


def pick_columns(
    ds: Dataset,
    src: str,
    tgt: str,
    where: str,
    work_dir: Path,
    extra: Sequence[str] = (),
) -> Dataset:
    """Columns ``src`` / ``tgt`` (language columns or a ``translation`` column) as
    cleaned ``src`` / ``tgt``, plus the ``extra`` columns present, in one pass
    written to ``work_dir`` (never into the hub's own cache)."""
    columns = ds.column_names
    translation = src not in columns and tgt not in columns and "translation" in columns
    present = _translation_languages(ds) if translation else columns
    for lang in (src, tgt):
        if lang not in present:
            raise CorpusError(
                f"{where}: no column for language {lang!r}; "
                f"columns present: {sorted(present)}"
            )
    keep = [c for c in extra if c in columns]

    def select(batch: dict[str, list]) -> dict[str, list]:
        if translation:
            pairs = batch["translation"]
            out = {
                "src": [clean(p.get(src)) for p in pairs],
                "tgt": [clean(p.get(tgt)) for p in pairs],
            }
        else:
            out = {
                "src": list(map(clean, batch[src])),
                "tgt": list(map(clean, batch[tgt])),
            }
        out.update({c: [clean(v) for v in batch[c]] for c in keep})
        return out

    return ds.map(
        select,
        batched=True,
        batch_size=CLEAN_BATCH,
        remove_columns=columns,
        cache_file_name=str(work_dir / "picked.arrow"),
        desc=f"reading {where}",
    )


def _translation_languages(ds: Dataset) -> list[str]:
    feature = ds.features["translation"]
    languages = getattr(feature, "languages", None)
    if languages:
        return list(languages)
    if isinstance(feature, dict):
        return list(feature)
    return list(ds[0]["translation"]) if ds.num_rows else []
