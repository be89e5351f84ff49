"""A folder of corpus files read through ``datasets``' Arrow builders.

``<split>.jsonl`` (``json`` builder), ``<split>.tsv`` / ``.csv`` (``csv``, every
column a string, nothing turned into NaN) or parallel text ``<split>.<lang>``
(``text``, one dataset a side, joined column-wise); each may be gzipped. The builders
stream the file into an Arrow table on disk, so a 1 GB file costs no 1 GB of Python
objects. A UTF-8 byte-order mark (Windows tools write one) is read as such.

When a builder refuses a file, its message rarely names the line, so the file is
scanned once more, line by line, to say where and what (``diagnose``): invalid UTF-8,
invalid JSON, a missing key, a wrong number of fields.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import datasets
from datasets import Dataset, Features, Value

from seq2seq.data.columns import (
    SPLIT_ALIASES,
    SPLITS,
    clean,
    file_digest,
    named_split,
    pick_columns,
)
from seq2seq.disk import refusal
from seq2seq.errors import CorpusError, SplitChoiceError

_TABLE = re.compile(r"^(?P<stem>.+)\.(?P<ext>jsonl|tsv|csv)(?:\.gz)?$")
_TEXT = re.compile(
    r"^(?P<stem>.+?)\.(?P<lang>[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]+)?)(?:\.gz)?$"
)


class FolderSource:
    """``data.local_dir``: one table file a split, or one text file a split and side."""

    def __init__(
        self, folder: Path, names: dict[str, str | None], src: str, tgt: str
    ) -> None:
        if not folder.is_dir():
            raise CorpusError(f"{folder} is not a folder")
        self.folder, self.names, self.src, self.tgt = folder, names, src, tgt
        self.files = sorted(p.name for p in folder.iterdir() if p.is_file())
        self.tables = {m["stem"]: n for n in self.files if (m := _TABLE.match(n))}
        self.texts: dict[str, dict[str, str]] = {}
        for name in self.files:
            m = _TEXT.match(name)
            if m and not _TABLE.match(name):
                self.texts.setdefault(m["stem"], {})[m["lang"]] = name
        if not self.tables and not self.texts:
            raise CorpusError(
                f"{folder}: found no corpus files; expected <split>.jsonl|tsv|csv or "
                f"<split>.<lang>[.gz] for splits {', '.join(SPLITS)}; "
                f"files present: {self.files}"
            )

    def paths(self, split: str) -> list[Path]:
        """The files of ``split``: one table, or the source and the target text."""
        stem = self._stem(split)
        if self.tables:
            return [self.folder / self.tables[stem]]
        langs = self.texts[stem]
        for lang in (self.src, self.tgt):
            if lang not in langs:
                raise CorpusError(
                    f"{self.folder}: no file for language {lang!r} of {stem!r}: "
                    f"expected {stem}.{lang} or {stem}.{lang}.gz; languages present: "
                    f"{sorted(langs)}"
                )
        return [self.folder / langs[self.src], self.folder / langs[self.tgt]]

    def fingerprint(self, split: str) -> str:
        return " ".join(
            f"{path.name}:{file_digest(path)}" for path in self.paths(split)
        )

    def raw(self, split: str, work_dir: Path) -> tuple[Dataset, str]:
        paths = self.paths(split)
        if len(paths) == 2:
            return self._parallel(*paths, work_dir), str(paths[0].with_suffix(""))
        path = paths[0]
        kind = _TABLE.match(path.name)["ext"]
        try:
            if kind == "jsonl":
                ds = _load("json", path, work_dir)
                _check_keys(ds, path, (self.src, self.tgt))
                return ds, str(path)
            header = _header(path, kind)
            for lang in (self.src, self.tgt):
                if lang not in header:
                    raise CorpusError(
                        f"{path}: no column for language {lang!r}; columns present: "
                        f"{header}"
                    )
            features = Features({name: Value("string") for name in header})
            options = {"features": features, "na_filter": False}
            if kind == "tsv":
                options.update(delimiter="\t", quoting=csv.QUOTE_NONE)
            return _load("csv", path, work_dir, **options), str(path)
        except CorpusError:
            raise
        except Exception as err:  # the builder's message rarely names the line
            if refusal(err) is not None:
                raise  # a full disk under the builder's cache, not the corpus
            if diagnose(path, kind, (self.src, self.tgt)) == 0:
                return _no_pairs(self.src, self.tgt), str(path)  # builders refuse
            raise CorpusError(f"{path}: could not be read ({err})") from err

    def pick(self, ds: Dataset, where: str, work_dir: Path) -> Dataset:
        return pick_columns(
            ds, self.src, self.tgt, where, work_dir, extra=("alignment",)
        )

    def _parallel(self, src_path: Path, tgt_path: Path, work_dir: Path) -> Dataset:
        sides = []
        for path, name in ((src_path, self.src), (tgt_path, self.tgt)):
            try:
                ds = _load("text", path, work_dir / name, keep_linebreaks=False)
            except Exception as err:
                if refusal(err) is not None:
                    raise
                if diagnose(path, "text", ()) > 0:
                    raise CorpusError(f"{path}: could not be read ({err})") from err
                ds = Dataset.from_dict(
                    {"text": []}, Features({"text": Value("string")})
                )
            sides.append(ds.rename_column("text", name))
        if sides[0].num_rows != sides[1].num_rows:
            raise CorpusError(
                f"parallel files differ in length: {src_path} has {sides[0].num_rows} "
                f"lines, {tgt_path} has {sides[1].num_rows} lines"
            )
        return datasets.concatenate_datasets(sides, axis=1)

    def _stem(self, split: str) -> str:
        stems = list(self.tables) if self.tables else list(self.texts)
        asked = self.names.get(split)
        if asked is not None:
            return named_split(str(self.folder), split, asked, stems)
        aliases = SPLIT_ALIASES[split]
        exact = [s for s in stems if s in aliases]
        if exact:
            return exact[0]
        suffixed = [s for s in stems if any(re.match(rf"{a}[_.-]", s) for a in aliases)]
        if len(suffixed) == 1:
            return suffixed[0]
        if suffixed:
            raise SplitChoiceError(
                f"{self.folder}: several files could be split {split!r}: {suffixed}",
                split,
            )
        raise SplitChoiceError(
            f"{self.folder}: missing split {split!r}: expected {split}.jsonl|tsv|csv "
            f"or {split}.<lang>[.gz] (names accepted: {', '.join(aliases)}); "
            f"files present: {self.files}",
            split,
        )


def _load(builder: str, path: Path, work_dir: Path, **options) -> Dataset:
    """One file through a ``datasets`` builder, cached under ``work_dir`` (pyarrow's
    JSON reader skips a byte-order mark itself)."""
    return datasets.load_dataset(
        builder,
        data_files={"train": str(path)},
        split="train",
        cache_dir=str(work_dir),
        **options,
    )


def _check_keys(ds: Dataset, path: Path, langs: tuple[str, ...]) -> None:
    """Every line has a key per language (pyarrow fills a missing one with null)."""
    for lang in langs:
        if lang not in ds.column_names:
            raise CorpusError(
                f"{path}: no key for language {lang!r}; keys present: "
                f"{sorted(ds.column_names)}"
            )
    nulls = sum(ds.data.column(lang).null_count for lang in langs)
    if nulls:
        diagnose(path, "jsonl", langs)  # names the first line without the key


def _header(path: Path, kind: str) -> list[str]:
    for line in _lines(path):
        rows = _csv_rows([line], kind)
        return rows[0] if rows else []
    raise CorpusError(f"{path}: empty file; expected a header row naming the languages")


def _csv_rows(lines: list[str], kind: str) -> list[list[str]]:
    if kind == "tsv":
        return list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    return list(csv.reader(lines))


def _lines(path: Path) -> Iterator[str]:
    """Decoded lines without line ends, a byte-order mark dropped; invalid UTF-8 and
    a broken gzip stream raise ``CorpusError`` naming the file and line."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        raw = opener(path, "rb")
    except OSError as err:
        raise CorpusError(f"{path}: cannot be opened ({err})") from err
    with raw:
        reader = io.BufferedReader(raw) if path.suffix == ".gz" else raw
        number = 0
        try:
            for number, data in enumerate(reader, start=1):
                if number == 1 and data.startswith(codecs.BOM_UTF8):
                    data = data[len(codecs.BOM_UTF8) :]
                try:
                    yield data.decode("utf-8").rstrip("\n").rstrip("\r")
                except UnicodeDecodeError as err:
                    raise CorpusError(
                        f"{path}:{number}: invalid UTF-8 ({err.reason})"
                    ) from err
        except (OSError, EOFError) as err:
            raise CorpusError(f"{path}: not a readable gzip file ({err})") from err


def _no_pairs(src: str, tgt: str) -> Dataset:
    features = Features({src: Value("string"), tgt: Value("string")})
    return Dataset.from_dict({src: [], tgt: []}, features)


def diagnose(path: Path, kind: str, langs: tuple[str, ...]) -> int:
    """Scan ``path`` line by line and raise ``CorpusError`` at the first line a
    builder would refuse; when every line reads, the number of records."""
    records = 0
    if kind == "jsonl":
        for number, line in enumerate(_lines(path), start=1):
            if not line.strip():
                continue
            records += 1
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{path}:{number}: invalid JSON ({err.msg})") from err
            if not isinstance(record, dict):
                raise CorpusError(f"{path}:{number}: expected a JSON object per line")
            for lang in langs:
                if lang not in record:
                    raise CorpusError(
                        f"{path}:{number}: no key for language {lang!r}; "
                        f"keys present: {sorted(record)}"
                    )
    elif kind in ("tsv", "csv"):
        lines = list(_lines(path))
        rows = _csv_rows(lines, kind)
        width = len(rows[0]) if rows else 0
        for number, row in enumerate(rows[1:], start=2):
            if len(row) != width:
                raise CorpusError(
                    f"{path}:{number}: expected {width} fields ({rows[0]}), "
                    f"got {len(row)}"
                )
        records = max(len(rows) - 1, 0)
    else:
        records = sum(1 for _ in _lines(path))
    return records


__all__ = ["FolderSource", "clean", "diagnose"]
