"""The prepared cache on disk: encoded splits as memory-mapped arrays, texts as Arrow.

One folder per prepared corpus, written once and then only read::

    manifest.json          format version, settings, statistics, each ids file's
                           largest id, and per file its size, SHA-256 and
                           modification time (written last)
    tokenizer/joint.model  (or src.model + tgt.model)
    <split>/src.ids        every source piece id of the split, back to back
                           (uint16 when the vocabulary fits, else int32)
    <split>/src.offsets.npy  (pairs + 1,) int64: pair i is ids[offsets[i]:offsets[i+1]]
    <split>/src.lengths.npy  (pairs,) int32: what batch planning reads
    <split>/tgt.*          the same for the target side
    <split>/rows.npy       (pairs,) int64: each pair's row in text.arrow (pairs over
                           data.max_len leave gaps)
    <split>/text.arrow     src, tgt (+ alignment): the Arrow stream file ``datasets``
                           wrote when it read the corpus, moved here

This is fairseq's binarized layout (ids + an index) kept in numpy's own formats, and
Hugging Face's Arrow files for the texts: every process maps the same pages
read-only, so eight ranks share one copy in the page cache and a training process
holds no Python object per training sentence.

A folder is built under another name and renamed into place when complete, so a
process killed while building leaves nothing that looks prepared. Reading checks
the manifest: a file whose size, inode, modification or change time differ from the
manifest's is hashed, and a folder whose hash differs is reported as damaged
(``check_store`` returns None with the reason, and the caller rebuilds it); one whose
hash agrees (a copy, a ``chmod``) has its new times recorded, so it is hashed once.
``verify=True`` hashes every file whatever its times, for a suspect cache.

What the fast path trusts: a file of the recorded size, inode and times is taken as
written, unread, so that mapping a cache of millions of pairs costs a few ``stat``
calls instead of reading gigabytes. Every write through the kernel moves the change
time (ctime), and no program can set it back (``touch``, ``rsync -a`` and ``cp -a``
restore the modification time only; a copy is a new inode), so bytes changed by any
program are hashed. What it cannot see is bytes changed beneath the kernel (a disk's
silent error): the largest id of each ids file is kept in the manifest and checked
against the tokenizer when the cache is opened, and every batch is checked against
the vocabulary before it reaches the embedding (``batching.VocabCheck``), so damage
that leaves the vocabulary ends in an error naming the split and pair, and
``seq2seq-prepare verify=true`` finds damage that stays inside it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

FORMAT_VERSION = 3  # 3: the largest id of each ids file
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")


def ids_dtype(vocab_size: int) -> np.dtype:
    """The narrowest id type for a vocabulary: half the bytes of int32 below 65,536."""
    return np.dtype(
        np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    )


class Pieces(Sequence[list[int]]):
    """The piece ids of one side of a split, pair by pair, from memory-mapped arrays.

    ``pieces[i]`` is a list of ints, as a tokenizer returns it; ``lengths`` is the
    array batch planning reads; ``path`` the ids file, for messages.
    """

    def __init__(
        self,
        ids: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
        path: Path | None = None,
    ):
        self.ids, self.offsets, self.lengths = ids, offsets, lengths
        self.path = path

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.ids[self.offsets[index] : self.offsets[index + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return (self[i] for i in range(len(self)))


class Texts(Sequence[str]):
    """One text column of a split, pair by pair, from a memory-mapped Arrow table
    that is opened on first use (training reads the texts only for subword sampling
    and guided alignment)."""

    def __init__(self, table: Callable[[], pa.Table], name: str, rows: np.ndarray):
        self.table, self.name, self.rows = table, name, rows

    @property
    def column(self) -> pa.ChunkedArray:
        return self.table().column(self.name)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return self.take(range(*index.indices(len(self))))
        return self.column[int(self.rows[index])].as_py()

    def take(self, indices: Sequence[int] | np.ndarray) -> list[str]:
        """The texts at ``indices``, in one Arrow gather."""
        rows = self.rows[np.asarray(indices, dtype=np.int64)]
        return self.column.take(rows).to_pylist()

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), 65536):
            yield from self.take(range(start, min(start + 65536, len(self))))


class SplitWriter:
    """Appends encoded pairs of one split, chunk by chunk, to its files."""

    def __init__(self, folder: Path, dtype: np.dtype) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.dtype = folder, dtype
        # closed by close(), which the builder always reaches or abandons the folder
        self.handles = {side: open(folder / f"{side}.ids", "wb") for side in SIDES}  # noqa: SIM115
        self.lengths: dict[str, list[np.ndarray]] = {side: [] for side in SIDES}
        self.max_id = dict.fromkeys(SIDES, -1)  # -1: no ids
        self.rows: list[np.ndarray] = []

    def add(self, ids: dict[str, list[list[int]]], rows: np.ndarray) -> None:
        """``ids[side]``: the pieces of the pairs at text ``rows``."""
        for side in SIDES:
            lengths = np.fromiter(map(len, ids[side]), np.int32, len(ids[side]))
            flat = np.fromiter(
                (i for seq in ids[side] for i in seq), self.dtype, int(lengths.sum())
            )
            self.handles[side].write(flat.tobytes())
            self.lengths[side].append(lengths)
            if flat.size:
                self.max_id[side] = max(self.max_id[side], int(flat.max()))
        self.rows.append(np.asarray(rows, dtype=np.int64))

    def close(self) -> dict[str, int]:
        """Write the indices; returns the pair and piece counts and each side's
        largest id (``src_max_id``, -1 for none)."""
        counts = {"pairs": int(sum(map(len, self.rows)))}
        for side in SIDES:
            self.handles[side].close()
            lengths = _concat(self.lengths[side], np.int32)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            np.save(self.folder / f"{side}.lengths.npy", lengths)
            np.save(self.folder / f"{side}.offsets.npy", offsets)
            counts[f"{side}_pieces"] = int(offsets[-1])
            counts[f"{side}_max_id"] = self.max_id[side]
        np.save(self.folder / "rows.npy", _concat(self.rows, np.int64))
        return counts


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def keep_table(ds: Any, path: Path) -> None:
    """Make ``ds`` (a ``datasets.Dataset``) the Arrow stream file ``path``: its own
    cache file when it has exactly one (moved, not copied), else written batch by
    batch."""
    files = ds.cache_files
    if len(files) == 1 and ds._indices is None:
        os.replace(files[0]["filename"], path)
        return
    with (
        pa.OSFile(str(path), "wb") as sink,
        pa.ipc.new_stream(sink, ds.data.schema) as writer,
    ):
        for batch in ds.data.to_batches(max_chunksize=10_000):
            writer.write_batch(batch)


def table_chunks(path: Path, rows: int) -> Iterator[pa.Table]:
    """The table at ``path`` in chunks of about ``rows`` rows, read with plain reads:
    unlike a memory map, a pass over a large file leaves none of it in this
    process's resident memory."""
    with pa.OSFile(str(path)) as source:
        pending: list[pa.RecordBatch] = []
        count = 0
        for batch in pa.ipc.open_stream(source):
            pending.append(batch)
            count += batch.num_rows
            if count >= rows:
                yield pa.Table.from_batches(pending)
                pending, count = [], 0
        if pending:
            yield pa.Table.from_batches(pending)


def iter_rows(path: Path, column: str, rows: np.ndarray) -> Iterator[str]:
    """``column`` at the sorted ``rows`` of the table at ``path``, in one pass."""
    start = 0
    for chunk in table_chunks(path, 65_536):
        stop = start + chunk.num_rows
        lo, hi = np.searchsorted(rows, [start, stop])
        if hi > lo:
            yield from chunk.column(column).take(rows[lo:hi] - start).to_pylist()
        start = stop


def map_table(path: Path) -> pa.Table:
    """The table at ``path``, memory-mapped read-only (no copy), read at random:
    only the pages of the rows asked for become resident."""
    return pa.ipc.open_stream(pa.py_buffer(_random_map(path))).read_all()


def _random_map(path: Path) -> mmap.mmap:
    """A read-only map of ``path`` advised for random access: the kernel's read-ahead
    would otherwise bring in (and count in this process's memory) 128 KiB around
    every pair a batch reads."""
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_RANDOM)
    return mapped


def map_array(path: Path, dtype: np.dtype, header: bool = False) -> np.ndarray:
    """A read-only array over ``path`` (raw, or ``.npy`` with ``header``), mapped for
    random access."""
    if header:
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0
                if major == 1
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(handle)
            offset = handle.tell()
    else:
        shape, offset = None, 0
    mapped = _random_map(path)
    array = np.frombuffer(mapped, dtype=dtype, offset=offset)
    return array if shape is None else array.reshape(shape)


# --- the manifest ---------------------------------------------------------------------
def write_manifest(folder: Path, content: dict[str, Any]) -> None:
    """Record every file's size, hash, inode and times, then the manifest itself, all
    synced: the manifest's presence is what says the folder is complete."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        _fsync(path)
        files[str(path.relative_to(folder))] = {
            "sha256": _digest(path),
            **_stamp(path.stat()),
        }
    _write_json(
        folder / MANIFEST, {"format": FORMAT_VERSION, **content, "files": files}
    )


def _stamp(stat: os.stat_result) -> dict[str, int]:
    """What the fast path compares: a change to any of these hashes the file."""
    return {
        "size": stat.st_size,
        "inode": stat.st_ino,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
    }


def _write_json(path: Path, content: dict[str, Any]) -> None:
    """``path`` replaced atomically (a reader sees the old or the new, whole)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(content, indent=1, ensure_ascii=False))
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_store(
    folder: Path, verify: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """The manifest of a complete, intact folder, or None and why not (empty when
    there is no folder at all). A file is hashed when its size, inode or times moved,
    or every file with ``verify``; files that moved and hash as recorded have their
    new stamps written back (best effort: a read-only cache is hashed each time)."""
    path = folder / MANIFEST
    if not path.is_file():
        return None, f"{folder} has no manifest" if folder.exists() else ""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return None, f"{path} is unreadable ({err})"
    if manifest.get("format") != FORMAT_VERSION:
        return None, (
            f"{path}: format {manifest.get('format')}, not {FORMAT_VERSION} (format 3 "
            "records each ids file's largest id, checked against the tokenizer)"
        )
    restamped = False
    for name, want in manifest.get("files", {}).items():
        file = folder / name
        if not file.is_file():
            return None, f"{file} is missing"
        stat = file.stat()
        if stat.st_size != want["size"]:
            return None, f"{file} has {stat.st_size} bytes, the manifest {want['size']}"
        stamp = _stamp(stat)
        moved = verify or any(want.get(key) != value for key, value in stamp.items())
        if not moved:
            continue
        if _digest(file) != want["sha256"]:
            return None, f"{file} differs from the file the manifest recorded"
        restamped |= any(want.get(key) != value for key, value in stamp.items())
        want.update(stamp)
    if restamped:
        try:
            _write_json(path, manifest)
        except OSError as err:
            log.debug("could not record %s's new file times: %s", folder, err)
    return manifest, ""


def _digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


# --- reading --------------------------------------------------------------------------
@dataclass
class StoredSplit:
    """A split's memory-mapped columns, as ``EncodedSplit`` takes them."""

    src_text: Texts
    tgt_text: Texts
    src_ids: Pieces
    tgt_ids: Pieces
    alignment: Texts | None


def open_split(folder: Path, dtype: str) -> StoredSplit:
    """Map one split read-only."""
    pieces = {}
    for side in SIDES:
        offsets = map_array(folder / f"{side}.offsets.npy", np.int64, header=True)
        lengths = np.load(folder / f"{side}.lengths.npy", mmap_mode="r")  # read whole
        ids_path = folder / f"{side}.ids"
        ids = (
            map_array(ids_path, np.dtype(dtype))
            if ids_path.stat().st_size
            else np.zeros(0, dtype=dtype)
        )
        pieces[side] = Pieces(ids, offsets, lengths, ids_path)
    rows = map_array(folder / "rows.npy", np.int64, header=True)
    path = folder / "text.arrow"
    table = functools.cache(lambda: map_table(path))
    alignment = None
    with pa.OSFile(str(path)) as source:
        names = pa.ipc.open_stream(source).schema.names
    if "alignment" in names:
        alignment = Texts(table, "alignment", rows)
    return StoredSplit(
        Texts(table, "src", rows),
        Texts(table, "tgt", rows),
        pieces["src"],
        pieces["tgt"],
        alignment,
    )
