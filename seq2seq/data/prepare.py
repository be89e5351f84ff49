"""Prepare a corpus once: read it, train SentencePiece on a sample, encode every split
in chunks into the memory-mapped cache (``data/store.py``); afterwards only map it.

The cache lives in ``cache_root/<corpus>-<src>-<tgt>-<key>/``, where the key hashes
each split's fingerprint (an XXH3-128 of its files' bytes, the hub's fingerprint, or
the phrasebook's settings and generator version) and the settings that change the
result (languages, ``max_len``, tokenizer settings with ``train_sentences``). Finding
the key reads no corpus into memory, so a cache hit costs a hash of the files and
the mapping of a few arrays.

One process builds a cache, any others wait: the builder holds an exclusive lock on
``cache_root/.locks/<folder>.lock`` (``fcntl.flock``: the kernel releases it when
the process dies, even by kill -9) and builds in ``.building-<folder>-<pid>``, renamed
into place when the manifest is written. A waiting process (a second command, the
other ranks of a ``torchrun`` job) logs what it waits for and then maps the result;
no collective with a timeout is involved. A folder whose manifest does not match its
files (truncated, replaced) is rebuilt, with a warning naming the file.

Filtering: pairs with an empty side are dropped in every split when the corpus is
read. Pairs with more than ``max_len`` pieces on either side are dropped from
``train`` only; validation and test stay complete so scores compare with published
ones. Both are counted in the statistics and logged.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.data.batching import TokenBucketSampler, padding_fraction
from seq2seq.data.columns import SPLITS
from seq2seq.data.corpus import (
    corpus_source,
    read_split,
    split_fingerprint,
    terminal_progress_only,
)
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.store import (
    SIDES,
    SplitWriter,
    check_store,
    ids_dtype,
    iter_rows,
    keep_table,
    open_split,
    table_chunks,
    write_manifest,
)
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.disk import (
    folder_size,
    free_space,
    raise_if_refused,
    refusal,
    refused_error,
    size_text,
)

log = logging.getLogger(__name__)

TOKENIZER_SEED = 0
ENCODE_CHUNK = 50_000  # pairs encoded and written at a time
CACHE_ELSEWHERE = "set data.cache_dir=DIR to a writable disk with room"


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    splits: dict[str, EncodedSplit]
    stats: dict[str, Any]
    cached: bool
    cache_dir: Path


def resolve_cache_root(cache_dir: str | os.PathLike) -> Path:
    """``data.cache_dir`` as an absolute path; relative to the launch directory.

    Under Hydra, relative paths resolve against the original working directory (in
    case a run changes directory); otherwise against the current one. ``~`` expands.
    """
    path = Path(cache_dir).expanduser()
    if path.is_absolute():
        return path
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.utils import get_original_cwd

        if HydraConfig.initialized():
            return Path(get_original_cwd()) / path
    except ImportError:  # pragma: no cover - hydra is a dependency
        pass
    return path.resolve()


def _settings(data_cfg: Any, tokenizer_cfg: Any) -> dict[str, Any]:
    return {
        "name": str(data_cfg.name),
        "src_lang": data_cfg.src_lang,
        "tgt_lang": data_cfg.tgt_lang,
        "max_len": data_cfg.max_len,
        "tokenizer": {
            "vocab_size": tokenizer_cfg.vocab_size,
            "model_type": str(tokenizer_cfg.model_type),
            "joint": bool(tokenizer_cfg.joint),
            "character_coverage": tokenizer_cfg.character_coverage,
            "train_sentences": tokenizer_cfg.train_sentences,
            "seed": TOKENIZER_SEED,
        },
    }


def cache_folder(cache_root: Path, data_cfg: Any, settings: dict, prints: dict) -> Path:
    blob = json.dumps({"settings": settings, "splits": prints}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return (
        Path(cache_root)
        / f"{data_cfg.name}-{data_cfg.src_lang}-{data_cfg.tgt_lang}-{key}"
    )


# --- one builder, any number of waiting readers ---------------------------------------
@contextlib.contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of ``folder``'s build; say whom we wait for when it is taken."""
    locks = folder.parent / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / f"{folder.name}.lock"
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            log.info(
                "waiting for %s: %s is preparing it (lock %s)", folder, holder, path
            )
            start = time.perf_counter()
            fcntl.flock(handle, fcntl.LOCK_EX)
            log.info("%s is ready after %.0f s", folder, time.perf_counter() - start)
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- building -------------------------------------------------------------------------
def sample_rows(
    n: int, joint: bool, limit: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The training rows SentencePiece reads of each side, of ``n`` pairs: all of
    them when they are at most ``limit`` sentences (joint: both sides together),
    else a seeded sample of ``limit``."""
    rng = np.random.default_rng(seed)
    if (2 * n if joint else n) <= limit:
        return np.arange(n), np.arange(n)
    if joint:
        picked = np.sort(rng.choice(2 * n, size=limit, replace=False))
        return picked[picked < n], picked[picked >= n] - n
    src = np.sort(rng.choice(n, size=limit, replace=False))
    return src, np.sort(rng.choice(n, size=limit, replace=False))


def write_sample(table: Path, n: int, tcfg: Any, folder: Path) -> list[Path]:
    """The sentences SentencePiece trains on, one per line, streamed from ``table``
    into files under ``folder``: one (source then target) for a joint model, else
    one a side. A line break inside a sentence becomes a space, as SentencePiece's
    normalization would make it."""
    joint = bool(tcfg.joint)
    sampled = sample_rows(n, joint, tcfg.train_sentences, TOKENIZER_SEED)
    rows = dict(zip(SIDES, sampled, strict=True))
    files = (
        [folder / "sample.txt"] if joint else [folder / "src.txt", folder / "tgt.txt"]
    )
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(path, "w", encoding="utf-8"))
                   for path in files]  # fmt: skip
        for k, side in enumerate(SIDES):
            out = handles[0 if joint else k]
            for text in iter_rows(table, side, rows[side]):
                out.write(text.replace("\n", " ").replace("\r", " ") + "\n")
    return files


def _train_tokenizer(table: Path, n: int, tcfg: Any, folder: Path) -> Tokenizer:
    start = time.perf_counter()
    files = write_sample(table, n, tcfg, folder)
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    tokenizer = Tokenizer.train_from_files(
        files,
        vocab_size=tcfg.vocab_size,
        model_type=str(tcfg.model_type),
        character_coverage=tcfg.character_coverage,
        seed=TOKENIZER_SEED,
    )
    for path in files:
        path.unlink()
    log.info(
        "SentencePiece trained on %d sentences in %.1f s",
        lines,
        time.perf_counter() - start,
    )
    return tokenizer


def _encode_split(
    tokenizer: Tokenizer, table: Path, folder: Path, split: str, max_len: int
) -> dict[str, int]:
    """Encode the pairs of ``table`` chunk by chunk into ``folder``; the training
    split drops over-long pairs."""
    vocab = max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    writer = SplitWriter(folder, ids_dtype(vocab))
    start = 0
    for chunk in table_chunks(table, ENCODE_CHUNK):
        ids = {
            "src": tokenizer.encode_src(chunk.column("src").to_pylist()),
            "tgt": tokenizer.encode_tgt(chunk.column("tgt").to_pylist()),
        }
        rows = np.arange(start, start + chunk.num_rows)
        start += chunk.num_rows
        if split == "train":
            keep = [
                k
                for k, (s, t) in enumerate(zip(ids["src"], ids["tgt"], strict=True))
                if 0 < len(s) <= max_len and 0 < len(t) <= max_len
            ]
            if len(keep) < len(rows):
                ids = {side: [ids[side][k] for k in keep] for side in SIDES}
                rows = rows[keep]
        writer.add(ids, rows)
    counts = writer.close()
    too_long = start - counts["pairs"]
    if too_long:
        log.warning(
            "%s: filtered %d pairs over max_len=%d pieces", split, too_long, max_len
        )
    return {**counts, "too_long": too_long}


def _length_stats(lengths: np.ndarray) -> tuple[float, int]:
    if len(lengths) == 0:
        return 0.0, 0
    ordered = np.sort(lengths)
    return float(ordered.mean()), int(ordered[round(0.95 * (len(ordered) - 1))])


def _build(
    folder: Path, data_cfg: Any, tokenizer_cfg: Any, source: Any, settings: dict
) -> None:
    """Build the cache in a temporary folder, then rename it to ``folder``. A write
    the file system refuses (full, over quota, read-only), also inside ``datasets``
    or pyarrow, removes the temporary folder and says so, naming the file."""
    start = time.perf_counter()
    for stale in folder.parent.glob(f".building-{folder.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)  # a build killed before ours
    tmp = folder.parent / f".building-{folder.name}-{os.getpid()}"
    try:
        _build_in(tmp, folder, data_cfg, tokenizer_cfg, source, settings)
    except Exception as err:
        cause = refusal(err)
        if cause is None:
            raise
        free, used = free_space(tmp), folder_size(tmp)  # before it is removed
        shutil.rmtree(tmp, ignore_errors=True)
        raise refused_error(
            cause.errno,
            cause.filename or tmp,
            "the prepared cache",
            CACHE_ELSEWHERE,
            note=f"the partial cache{f' of {size_text(used)}' if used else ''} removed",
            free=free,
        ) from err
    log.info("prepared %s in %.1f s", folder, time.perf_counter() - start)


def _build_in(
    tmp: Path,
    folder: Path,
    data_cfg: Any,
    tokenizer_cfg: Any,
    source: Any,
    settings: dict,
) -> None:
    work = tmp / "work"
    empty, pairs = {}, {}
    for split in SPLITS:
        ds, empty[split] = read_split(data_cfg, split, work / split, source)
        (tmp / split).mkdir(parents=True)
        keep_table(ds, tmp / split / "text.arrow")
        pairs[split] = ds.num_rows
        del ds  # unmapped: later passes read the file, not a map of it
    gc.collect()
    shutil.rmtree(work, ignore_errors=True)
    tokenizer = _train_tokenizer(
        tmp / "train" / "text.arrow", pairs["train"], tokenizer_cfg, tmp
    )
    (tmp / "tokenizer").mkdir()
    for name, model in tokenizer.to_bytes().items():
        (tmp / "tokenizer" / f"{name}.model").write_bytes(model)
    split_stats, max_ids = {}, {}
    for split in SPLITS:
        counts = _encode_split(
            tokenizer, tmp / split / "text.arrow", tmp / split, split, data_cfg.max_len
        )
        for side in SIDES:
            max_ids[f"{split}/{side}.ids"] = counts[f"{side}_max_id"]
        src_mean, src_p95 = _length_stats(np.load(tmp / split / "src.lengths.npy"))
        tgt_mean, tgt_p95 = _length_stats(np.load(tmp / split / "tgt.lengths.npy"))
        split_stats[split] = {
            "pairs": counts["pairs"],
            "filtered": {"empty": empty[split], "too_long": counts["too_long"]},
            "src_len_mean": round(src_mean, 2),
            "src_len_p95": src_p95,
            "tgt_len_mean": round(tgt_mean, 2),
            "tgt_len_p95": tgt_p95,
        }
    dtype = ids_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    stats = {
        "corpus": str(data_cfg.name),
        "src_lang": data_cfg.src_lang,
        "tgt_lang": data_cfg.tgt_lang,
        "joint": tokenizer.joint,
        "src_vocab_size": tokenizer.src_vocab_size,
        "tgt_vocab_size": tokenizer.tgt_vocab_size,
        "splits": split_stats,
    }
    (tmp / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False))
    content = {"settings": settings, "ids_dtype": dtype.name, "max_ids": max_ids}
    write_manifest(tmp, {**content, "stats": stats})
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


# --- reading --------------------------------------------------------------------------
def ids_outside(manifest: dict, tokenizer: Tokenizer) -> str:
    """Why the manifest's largest ids do not fit the tokenizer (empty when they do):
    an id at or past a side's vocabulary size would index past the embedding."""
    sizes = {"src": tokenizer.src_vocab_size, "tgt": tokenizer.tgt_vocab_size}
    for name, largest in manifest.get("max_ids", {}).items():
        size = sizes[name.rsplit("/", 1)[-1].split(".")[0]]
        if largest >= size:
            return f"{name} holds ids up to {largest}, the tokenizer has {size} pieces"
    return ""


def _open(folder: Path, manifest: dict) -> tuple[Tokenizer, dict, dict] | str:
    """The tokenizer, splits and statistics of ``folder``, or why not."""
    models = {p.stem: p.read_bytes() for p in (folder / "tokenizer").glob("*.model")}
    tokenizer = Tokenizer.from_bytes(models)
    outside = ids_outside(manifest, tokenizer)
    if outside:
        return f"{folder}: {outside}"
    splits = {}
    for split in SPLITS:
        stored = open_split(folder / split, manifest["ids_dtype"])
        encoded = EncodedSplit(**vars(stored))
        # validation and test are small and read many times: plain lists
        splits[split] = encoded if split == "train" else encoded.in_memory()
    return tokenizer, splits, manifest["stats"]


def open_prepared(
    folder: Path, verify: bool = False, said: set[str] | None = None
) -> tuple[Tokenizer, dict, dict] | None:
    """The prepared data in ``folder``, or None (with a warning when it is damaged,
    unless the warning is in ``said``, to which it is added); ``verify``: hash every
    file first."""
    manifest, why = check_store(folder, verify)
    opened = why if manifest is None else _open(folder, manifest)
    if isinstance(opened, str):
        said = set() if said is None else said
        if opened and opened not in said:
            log.warning("rebuilding the prepared cache: %s", opened)
            said.add(opened)
        return None
    return opened


def prepare_data(
    data_cfg: Any, tokenizer_cfg: Any, cache_root: Path, verify: bool = False
) -> PreparedData:
    """Read, tokenize and encode the corpus of ``data_cfg``, or map its cache;
    ``verify``: hash every file of a cache found (``seq2seq-prepare verify=true``)."""
    start = time.perf_counter()
    source = corpus_source(data_cfg)
    prints = {s: split_fingerprint(data_cfg, s, source) for s in SPLITS}
    settings = _settings(data_cfg, tokenizer_cfg)
    folder = cache_folder(cache_root, data_cfg, settings, prints)
    said: set[str] = set()  # one warning, though the lock makes us look twice
    opened = open_prepared(folder, verify, said)
    hit = opened is not None
    if opened is None:
        try:
            with build_lock(folder):
                opened = open_prepared(folder, verify, said)  # built meanwhile?
                if opened is None:
                    with terminal_progress_only():
                        _build(folder, data_cfg, tokenizer_cfg, source, settings)
                    opened = open_prepared(folder)
                    assert opened is not None, f"{folder} was just built"
        except OSError as err:  # the lock's folder or file (the build says its own)
            raise_if_refused(err, cache_root, "the prepared cache", CACHE_ELSEWHERE)
            raise
        log.info("prepared data cached in %s", folder)
    else:
        log.info("loaded prepared data from %s", folder)
    tokenizer, splits, stats = opened
    train = splits["train"]
    sampler = TokenBucketSampler(
        train.src_lengths(),
        train.tgt_lengths(),
        data_cfg.batch_tokens,
        shuffle=False,
        sort_by="target",  # as the trainer batches
    )
    stats = {
        **stats,
        "batch_tokens": data_cfg.batch_tokens,
        "train_batches": len(sampler),
        "padding_fraction": round(padding_fraction(sampler), 4),
        "cached": hit,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return PreparedData(tokenizer, splits, stats, hit, folder)


def format_stats(stats: dict[str, Any]) -> str:
    """A small table of the statistics, for ``seq2seq-prepare`` to print."""
    vocab = "joint" if stats["joint"] else "separate"
    lines = [
        f"corpus {stats['corpus']} {stats['src_lang']}→{stats['tgt_lang']}"
        f"{' (cached)' if stats.get('cached') else ''}",
        f"vocabulary ({vocab}): source {stats['src_vocab_size']}, "
        f"target {stats['tgt_vocab_size']}",
        f"{'split':<11}{'pairs':>8}  {'filtered':<24}"
        f"{'src mean/p95':>14}{'tgt mean/p95':>14}",
    ]
    for split, row in stats["splits"].items():
        filtered = ", ".join(f"{k} {v}" for k, v in row["filtered"].items())
        lines.append(
            f"{split:<11}{row['pairs']:>8}  {filtered:<24}"
            f"{row['src_len_mean']:>8.1f} / {row['src_len_p95']:<3}"
            f"{row['tgt_len_mean']:>8.1f} / {row['tgt_len_p95']:<3}"
        )
    if "padding_fraction" in stats:
        lines.append(
            f"train batches at batch_tokens={stats['batch_tokens']}: "
            f"{stats['train_batches']}, padding {100 * stats['padding_fraction']:.1f}%"
        )
    return "\n".join(lines)
