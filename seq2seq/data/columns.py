"""What every corpus source shares: the split names and their aliases, a file's
digest, and the one pass that turns a source's table into cleaned ``src`` / ``tgt``
columns. ``corpus.py`` chooses the source; ``files.py`` and ``hub.py`` read theirs
with these, so no source module imports the module that chooses among them.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path

import xxhash
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
    """XXH3-128 of a file's bytes, hashed in place through a read-only map.

    Every byte is read, so an edit that keeps the file's size and times still changes
    the key; XXH3 over the mapped pages runs at memory speed (9 GB/s on a Xeon core,
    where SHA-256 read in blocks ran at 0.7–1.4 GB/s), which is what keeps a cache hit
    at WMT scale under a second. A key, not a defence against forgery."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # an empty file cannot be mapped
            return xxhash.xxh3_128_hexdigest(b"")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as pages:
            return xxhash.xxh3_128_hexdigest(pages)


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
