"""Prepare a corpus once: load it, train SentencePiece, encode every split, cache the
result.

The cache lives in ``cache_root/<corpus>-<src>-<tgt>-<key>/prepared.pkl`` where the key
hashes the corpus content (every split's text and alignments) and the settings that
change the result (languages, ``max_len``, tokenizer settings). The built-in phrasebook
is keyed by its settings and the source of its generator instead, so a cache hit skips
generating it. ``stats.json`` beside the pickle is for people.

Filtering: pairs with an empty side are dropped in every split when the corpus is
loaded. Pairs with more than ``max_len`` pieces on either side are dropped from
``train`` only; validation and test stay complete so scores compare with published ones.
Both are counted in the statistics and logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.data import phrasebook, phrasebook_lexicon
from seq2seq.data.batching import TokenBucketSampler, padding_fraction
from seq2seq.data.corpus import SPLITS, read_corpus
from seq2seq.data.splits import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

CACHE_VERSION = 1
TOKENIZER_SEED = 0


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
        "version": CACHE_VERSION,
        "name": data_cfg.name,
        "src_lang": data_cfg.src_lang,
        "tgt_lang": data_cfg.tgt_lang,
        "max_len": data_cfg.max_len,
        "tokenizer": {
            "vocab_size": tokenizer_cfg.vocab_size,
            "model_type": tokenizer_cfg.model_type,
            "joint": bool(tokenizer_cfg.joint),
            "character_coverage": tokenizer_cfg.character_coverage,
            "seed": TOKENIZER_SEED,
        },
    }


def _phrasebook_fingerprint(data_cfg: Any) -> str:
    """Settings and generator source: the phrasebook is a function of these alone."""
    pb = data_cfg.phrasebook
    digest = hashlib.sha256()
    for module in (phrasebook, phrasebook_lexicon):
        digest.update(Path(module.__file__).read_bytes())
    sizes = (pb.train_size, pb.validation_size, pb.test_size, pb.seed)
    digest.update(json.dumps(sizes).encode())
    return digest.hexdigest()


def _has_links_files(data_cfg: Any) -> bool:
    """Whether ``data.alignments`` names a file: then the links are content that the
    phrasebook's settings do not determine, and the corpus is fingerprinted."""
    return any(getattr(data_cfg.alignments, split) for split in SPLITS)


def _corpus_fingerprint(columns: dict[str, dict[str, list[str]]]) -> str:
    digest = hashlib.sha256()
    for split in SPLITS:
        for name in sorted(columns[split]):
            digest.update(f"\x00{split}/{name}\x00".encode())
            digest.update("\n".join(columns[split][name]).encode())
    return digest.hexdigest()


def _cache_dir(
    cache_root: Path, data_cfg: Any, settings: dict, fingerprint: str
) -> Path:
    blob = json.dumps({"settings": settings, "corpus": fingerprint}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return (
        Path(cache_root)
        / f"{data_cfg.name}-{data_cfg.src_lang}-{data_cfg.tgt_lang}-{key}"
    )


def _length_stats(lengths: list[int]) -> tuple[float, int]:
    if not lengths:
        return 0.0, 0
    ordered = sorted(lengths)
    return sum(ordered) / len(ordered), ordered[round(0.95 * (len(ordered) - 1))]


def _encode(tokenizer: Tokenizer, split: str, cols: dict, max_len: int) -> tuple:
    """Encode a split, dropping over-long train pairs: (EncodedSplit, too_long)."""
    src_ids = tokenizer.encode_src(cols["src"])
    tgt_ids = tokenizer.encode_tgt(cols["tgt"])
    alignment = cols.get("alignment")
    keep = range(len(src_ids))
    if split == "train":
        keep = [
            i
            for i in keep
            if 0 < len(src_ids[i]) <= max_len and 0 < len(tgt_ids[i]) <= max_len
        ]
    too_long = len(src_ids) - len(keep)
    if too_long:
        log.warning(
            "%s: filtered %d pairs over max_len=%d pieces", split, too_long, max_len
        )

    def pick(values: list) -> list:
        return values if too_long == 0 else [values[i] for i in keep]

    encoded = EncodedSplit(
        pick(cols["src"]), pick(cols["tgt"]), pick(src_ids), pick(tgt_ids),
        pick(alignment) if alignment is not None else None,
    )  # fmt: skip
    return encoded, too_long


def _build(data_cfg: Any, tokenizer_cfg: Any, columns: dict, filtered: dict) -> tuple:
    train = columns["train"]
    tokenizer = Tokenizer.train(
        train["src"],
        train["tgt"],
        vocab_size=tokenizer_cfg.vocab_size,
        model_type=tokenizer_cfg.model_type,
        joint=bool(tokenizer_cfg.joint),
        character_coverage=tokenizer_cfg.character_coverage,
        seed=TOKENIZER_SEED,
    )
    splits, split_stats = {}, {}
    for split in SPLITS:
        encoded, too_long = _encode(tokenizer, split, columns[split], data_cfg.max_len)
        splits[split] = encoded
        src_mean, src_p95 = _length_stats([len(x) for x in encoded.src_ids])
        tgt_mean, tgt_p95 = _length_stats([len(x) for x in encoded.tgt_ids])
        split_stats[split] = {
            "pairs": len(encoded),
            "filtered": {**filtered.get(split, {"empty": 0}), "too_long": too_long},
            "src_len_mean": round(src_mean, 2),
            "src_len_p95": src_p95,
            "tgt_len_mean": round(tgt_mean, 2),
            "tgt_len_p95": tgt_p95,
        }
    stats = {
        "corpus": data_cfg.name,
        "src_lang": data_cfg.src_lang,
        "tgt_lang": data_cfg.tgt_lang,
        "joint": tokenizer.joint,
        "src_vocab_size": tokenizer.src_vocab_size,
        "tgt_vocab_size": tokenizer.tgt_vocab_size,
        "splits": split_stats,
    }
    return tokenizer, splits, stats


def _write_cache(
    cache_dir: Path, tokenizer: Tokenizer, splits: dict, stats: dict
) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "version": CACHE_VERSION,
        "tokenizer": tokenizer.to_bytes(),
        "splits": {name: vars(split) for name, split in splits.items()},
        "stats": stats,
    }
    tmp = cache_dir / f"prepared.pkl.tmp{os.getpid()}"
    with open(tmp, "wb") as handle:
        pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, cache_dir / "prepared.pkl")
    (cache_dir / "stats.json").write_text(
        json.dumps(stats, indent=2, ensure_ascii=False)
    )


def _read_cache(cache_dir: Path) -> tuple | None:
    path = cache_dir / "prepared.pkl"
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            payload = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError) as err:
        log.warning("ignoring unreadable cache %s (%s)", path, err)
        return None
    if payload.get("version") != CACHE_VERSION:
        return None
    splits = {
        name: EncodedSplit(**fields) for name, fields in payload["splits"].items()
    }
    return Tokenizer.from_bytes(payload["tokenizer"]), splits, payload["stats"]


def prepare_data(data_cfg: Any, tokenizer_cfg: Any, cache_root: Path) -> PreparedData:
    """Load, tokenize and encode the corpus of ``data_cfg``, or read the cache."""
    start = time.perf_counter()
    settings = _settings(data_cfg, tokenizer_cfg)
    loaded = None
    if data_cfg.name == "phrasebook" and not _has_links_files(data_cfg):
        fingerprint = _phrasebook_fingerprint(data_cfg)
    else:
        loaded = read_corpus(data_cfg)
        fingerprint = _corpus_fingerprint(
            {s: loaded.splits[s].to_dict() for s in SPLITS}
        )
    cache_dir = _cache_dir(cache_root, data_cfg, settings, fingerprint)
    hit = _read_cache(cache_dir)
    if hit is not None:
        tokenizer, splits, stats = hit
        log.info("loaded prepared data from %s", cache_dir)
    else:
        loaded = loaded or read_corpus(data_cfg)
        columns = {s: loaded.splits[s].to_dict() for s in SPLITS}
        tokenizer, splits, stats = _build(
            data_cfg, tokenizer_cfg, columns, loaded.filtered
        )
        _write_cache(cache_dir, tokenizer, splits, stats)
        log.info("prepared data cached in %s", cache_dir)
    train = splits["train"]
    sampler = TokenBucketSampler(
        [len(x) for x in train.src_ids],
        [len(x) for x in train.tgt_ids],
        data_cfg.batch_tokens,
        shuffle=False,
        sort_by="target",  # as the trainer batches
    )
    stats = {
        **stats,
        "batch_tokens": data_cfg.batch_tokens,
        "train_batches": len(sampler),
        "padding_fraction": round(padding_fraction(sampler), 4),
        "cached": hit is not None,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return PreparedData(tokenizer, splits, stats, hit is not None, cache_dir)


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
