"""Read one split of a parallel corpus as a memory-mapped Hugging Face ``Dataset``
with columns ``src``, ``tgt`` (and ``alignment`` when gold links exist).

Sources (``DataConfig.name``):

- ``phrasebook``: the built-in English–French corpus with gold alignments
  (``seq2seq/phrasebook``), either direction.
- ``multi30k``: ``data.local_dir`` (``{train,validation,test}.jsonl``) or, when it is
  unset, the hub dataset ``data.hub_id`` (default ``bentrevett/multi30k``).
- ``hub``: any hub dataset, ``data.hub_id`` with its configuration ``data.hub_config``
  (``wmt14`` with ``de-en``), a column per language or a ``translation`` column.
- ``local``: ``data.local_dir`` with ``<split>.jsonl|tsv|csv`` (a column per language)
  or parallel text ``<split>.<lang>``, each optionally ``.gz`` (``data/files.py``).

A split is found by its name, its aliases (``val``, ``valid``, ``dev``), a suffixed
name when it is the only one (``test_2016_flickr``), or ``data.splits.<split>``.
Nothing holds a whole corpus as Python lists: the files go through ``datasets``'
Arrow builders into memory-mapped tables, and a command reads only the splits it
needs. Each split has a fingerprint (a streaming hash of its files, or the hub's
fingerprint) that keys the prepared cache without reading the corpus.

Pairs with an empty side are dropped, counted and logged (an empty reference cannot
be scored); length filtering happens in ``prepare``. ``data.alignments.<split>=FILE``
attaches word links to a split (``links_file.py``), replacing the corpus's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import datasets
from datasets import Dataset, DatasetDict

from seq2seq.config import Corpus, DataConfig
from seq2seq.data.columns import CLEAN_BATCH, SPLITS, file_digest
from seq2seq.data.files import FolderSource
from seq2seq.data.hub import HubSource
from seq2seq.data.links_file import read_links_file
from seq2seq.errors import CorpusError

__all__ = ["CorpusError", "LoadedCorpus", "corpus_source", "read_corpus"]

log = logging.getLogger(__name__)

DEFAULT_HUB_ID = "bentrevett/multi30k"


class Source(Protocol):
    """Where one corpus's splits come from."""

    def fingerprint(self, split: str) -> str:
        """What identifies the split's content, without reading it into memory."""

    def raw(self, split: str, work_dir: Path) -> tuple[Dataset, str]:
        """The split as the source has it (any columns) and a name for messages."""

    def pick(self, ds: Dataset, where: str, work_dir: Path) -> Dataset:
        """``ds`` cleaned to columns ``src``, ``tgt`` (+ ``alignment``), written
        under ``work_dir``."""


@dataclass
class LoadedCorpus:
    """Splits and, per split, how many pairs were filtered and why."""

    splits: DatasetDict
    filtered: dict[str, dict[str, int]] = field(default_factory=dict)


def corpus_source(cfg: DataConfig) -> Source:
    """The source of the corpus ``cfg`` names."""
    name = Corpus(cfg.name)
    if name == Corpus.phrasebook:
        return PhrasebookSource(cfg)
    names = _split_names(cfg)
    if name == Corpus.multi30k and cfg.local_dir is None:
        hub_id = cfg.hub_id or DEFAULT_HUB_ID
        return HubSource(hub_id, cfg.hub_config, names, cfg.src_lang, cfg.tgt_lang)
    if name == Corpus.hub:
        if not cfg.hub_id:
            raise CorpusError("a hub corpus needs the dataset's id (e.g. wmt14)")
        return HubSource(cfg.hub_id, cfg.hub_config, names, cfg.src_lang, cfg.tgt_lang)
    if cfg.local_dir is None:
        raise CorpusError(f"a {name} corpus needs a folder of corpus files")
    return FolderSource(Path(cfg.local_dir), names, cfg.src_lang, cfg.tgt_lang)


def _split_names(cfg: DataConfig) -> dict[str, str | None]:
    names = getattr(cfg, "splits", None)
    return {split: getattr(names, split, None) if names else None for split in SPLITS}


def split_fingerprint(cfg: DataConfig, split: str, source: Source | None = None) -> str:
    """The split's content fingerprint, its links file included."""
    source = source or corpus_source(cfg)
    digest = hashlib.sha256(source.fingerprint(split).encode())
    links = getattr(cfg.alignments, split)
    if links:
        digest.update(b"\x00links\x00" + file_digest(Path(links)).encode())
    return digest.hexdigest()


def read_split(
    cfg: DataConfig, split: str, work_dir: Path, source: Source | None = None
) -> tuple[Dataset, int]:
    """``split`` as a ``Dataset`` of ``src``, ``tgt`` (+ ``alignment``) under
    ``work_dir`` (Arrow files, memory-mapped), and the number of empty pairs dropped."""
    source = source or corpus_source(cfg)
    with terminal_progress_only():
        work_dir.mkdir(parents=True, exist_ok=True)
        raw, where = source.raw(split, work_dir)
        ds = source.pick(raw, where, work_dir)
        links = getattr(cfg.alignments, split)
        if links:
            cols = ds.select_columns(["src", "tgt"]).to_dict()
            lines = read_links_file(links, cols["src"], cols["tgt"], split)
            ds = ds.remove_columns(
                [c for c in ds.column_names if c == "alignment"]
            ).add_column("alignment", lines)
        return drop_empty(ds, split, work_dir)


@contextlib.contextmanager
def terminal_progress_only() -> Iterator[None]:
    """``datasets``' progress bars on a terminal only: redirected to a log file,
    their carriage-return updates would fill it."""
    quiet = not sys.stderr.isatty() and datasets.is_progress_bar_enabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if quiet:
            datasets.enable_progress_bars()


def drop_empty(ds: Dataset, split: str, work_dir: Path) -> tuple[Dataset, int]:
    """``ds`` without the pairs with an empty side, and how many there were."""
    kept = ds.filter(
        lambda src, tgt: [bool(s) and bool(t) for s, t in zip(src, tgt, strict=True)],
        input_columns=["src", "tgt"],
        batched=True,
        batch_size=CLEAN_BATCH,
        cache_file_name=str(work_dir / "kept.indices.arrow"),
    )
    empty = ds.num_rows - kept.num_rows
    if empty:
        log.warning("%s: filtered %d pairs with an empty side", split, empty)
        kept = kept.flatten_indices(cache_file_name=str(work_dir / "kept.arrow"))
    return (kept if empty else ds), empty


def read_corpus(
    cfg: DataConfig, links_for: Sequence[str] = SPLITS, splits: Sequence[str] = SPLITS
) -> LoadedCorpus:
    """The ``splits`` of the corpus as a ``DatasetDict``, loaded into memory (for
    small corpora, tests and tools: preparation reads split by split instead).
    ``data.alignments`` files are read for the splits in ``links_for`` only."""
    source = corpus_source(cfg)
    out, filtered = {}, {}
    with tempfile.TemporaryDirectory(prefix="seq2seq-corpus-") as tmp:
        for split in splits:
            split_cfg = cfg if split in links_for else _without_links(cfg)
            ds, empty = read_split(split_cfg, split, Path(tmp) / split, source)
            out[split] = Dataset.from_dict(ds.to_dict())  # in memory: tmp goes
            filtered[split] = {"empty": empty}
    return LoadedCorpus(DatasetDict(out), filtered)


def _without_links(cfg: DataConfig) -> Any:
    from omegaconf import OmegaConf

    if OmegaConf.is_config(cfg):
        copy = OmegaConf.to_container(cfg)
        copy["alignments"] = {}
        return OmegaConf.merge(OmegaConf.structured(DataConfig), copy)
    from dataclasses import replace

    from seq2seq.config import AlignmentFiles

    return replace(cfg, alignments=AlignmentFiles())


# --- the built-in phrasebook ----------------------------------------------------------
class PhrasebookSource:
    """The generated phrasebook: its content is a function of its settings and the
    generator's version, so that is its fingerprint (generated only on a miss)."""

    def __init__(self, cfg: DataConfig) -> None:
        pair = (cfg.src_lang, cfg.tgt_lang)
        if pair not in (("en", "fr"), ("fr", "en")):
            raise CorpusError(
                f"the phrasebook is English–French: {pair[0]}→{pair[1]} is neither "
                "en→fr nor fr→en"
            )
        self.pair = pair
        self.settings = cfg.phrasebook
        self._columns: dict[str, dict[str, list[str]]] | None = None

    def fingerprint(self, split: str) -> str:
        from seq2seq.phrasebook import GENERATOR_VERSION

        pb = self.settings
        sizes = (pb.train_size, pb.validation_size, pb.test_size, pb.seed)
        return json.dumps(["phrasebook", GENERATOR_VERSION, *sizes, *self.pair, split])

    def raw(self, split: str, work_dir: Path) -> tuple[Dataset, str]:
        from seq2seq.phrasebook import phrasebook_columns, reverse_columns

        if self._columns is None:
            pb = self.settings
            columns = phrasebook_columns(
                pb.train_size, pb.validation_size, pb.test_size, pb.seed
            )
            reverse = self.pair == ("fr", "en")
            self._columns = reverse_columns(columns) if reverse else columns
        return Dataset.from_dict(self._columns[split]), f"phrasebook [{split}]"

    def pick(self, ds: Dataset, where: str, work_dir: Path) -> Dataset:
        return ds
