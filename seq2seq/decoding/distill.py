"""Sequence-level knowledge distillation (Kim & Rush, 2016): a teacher's beam
translations of a whole split, decoded in chunks that survive a killed run.

A training split is large (29,000 sentences for Multi30k, millions for WMT) and a beam
over it runs for hours, so the hypotheses are written a chunk at a time
(``chunk-00000.txt``, one line per sentence, ``chunk_sentences`` sentences each, each
written atomically by ``seq2seq.disk``): a run that is killed keeps every finished
chunk, and the next run decodes only the rest. Each chunk is decoded on its own, so a
resumed run writes exactly what an uninterrupted one would.

``manifest.json`` beside the chunks holds the identity of what they were decoded from:
the digest of every checkpoint file, of the split's sources, the decoding settings,
the chunk size, the device and the precision. Chunks of another identity (a retrained
teacher, another corpus, another beam) are deleted, never reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from seq2seq.data.columns import file_digest
from seq2seq.data.splits import EncodedSplit
from seq2seq.disk import make_folder, write_atomic
from seq2seq.errors import InputError

log = logging.getLogger(__name__)

ELSEWHERE = "give another output=DIR"
MANIFEST = "manifest.json"


def decoding_identity(
    checkpoints: Sequence[str | Path],
    split: EncodedSplit,
    decode: Any,
    chunk: int,
    runtime: str = "",
) -> dict[str, Any]:
    """What the chunks depend on, as plain JSON: checkpoint digests (in order: an
    ensemble's members), a digest of the sources, the decoding settings, the chunk
    size, the number of sentences and ``runtime`` (device and precision: bf16 and
    fp32 can choose other words)."""
    sources = hashlib.sha256()
    for text in split.src_text:
        sources.update(text.encode("utf-8") + b"\n")
    settings = OmegaConf.to_container(decode, resolve=True, enum_to_str=True)
    return {
        "checkpoints": [file_digest(Path(p)) for p in checkpoints],
        "sources": sources.hexdigest(),
        "sentences": len(split),
        "decode": settings,
        "chunk_sentences": chunk,
        "runtime": runtime,
    }


@dataclass(frozen=True)
class ChunkFolder:
    """The chunks of one decoding: ``chunk-NNNNN.txt`` and ``manifest.json``."""

    folder: Path
    identity: dict[str, Any]

    def chunk_path(self, index: int) -> Path:
        return self.folder / f"chunk-{index:05d}.txt"

    def open(self) -> list[int]:
        """Make the folder ready for this identity; the indices of the chunks already
        done. Chunks of another identity are deleted (with a warning)."""
        make_folder(self.folder, "distillation chunks", ELSEWHERE)
        manifest = self.folder / MANIFEST
        stale = manifest.is_file() and _read_manifest(manifest) != self.identity
        chunks = sorted(self.folder.glob("chunk-*.txt"))
        if stale or (chunks and not manifest.is_file()):
            log.warning(
                "%s: %d chunks decoded from other checkpoints, sources or settings: "
                "deleted, decoding from the start",
                self.folder,
                len(chunks),
            )
            for path in chunks:
                path.unlink()
            chunks = []
        if stale or not manifest.is_file():
            text = json.dumps(self.identity, indent=1, sort_keys=True) + "\n"
            write_atomic(manifest, text, "the distillation manifest", ELSEWHERE)
        return [int(p.stem.split("-")[1]) for p in chunks]


def _read_manifest(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a damaged manifest: nothing it names is trusted
        return None


def decode_in_chunks(
    translator: Any,
    split: EncodedSplit,
    chunks: ChunkFolder,
) -> list[str]:
    """The best translation of every pair of ``split`` (detokenized, in order),
    decoding only the chunks ``chunks`` does not hold yet and writing each as it
    finishes; ``translator`` is a ``Translator``."""
    size = int(chunks.identity["chunk_sentences"])
    done = set(chunks.open())
    count = (len(split) + size - 1) // size
    if done:
        log.info("resuming: %d of %d chunks already decoded", len(done), count)
    out: list[str] = []
    for index in range(count):
        path = chunks.chunk_path(index)
        rows = range(index * size, min((index + 1) * size, len(split)))
        if index not in done:
            texts = translator.detokenize(translator.hypotheses(split.select(rows)))
            texts = [" ".join(t.split()) for t in texts]  # one line each, always
            write_atomic(
                path, "".join(t + "\n" for t in texts), "hypotheses", ELSEWHERE
            )
            log.info("chunk %d of %d: %d sentences", index + 1, count, len(rows))
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        if len(lines) != len(rows):
            raise InputError(
                f"{path}: {len(lines)} lines where {len(rows)} were written; delete "
                "it to decode it again"
            )
        out.extend(lines)
    return out


def distilled_rows(
    split: EncodedSplit, hypotheses: Sequence[str], mode: str
) -> tuple[list[str], list[str]]:
    """Sources and targets of the distilled training split: ``replace``, the
    teacher's translations alone; ``add``, the original pairs followed by the
    teacher's. Pairs whose translation is empty are left out."""
    pairs = [(s, h) for s, h in zip(split.src_text, hypotheses, strict=True) if h]
    if mode == "add":
        pairs = list(zip(split.src_text, split.tgt_text, strict=True)) + pairs
    elif mode != "replace":
        raise InputError(f"mode={mode}: expected replace or add")
    return [s for s, _ in pairs], [t for _, t in pairs]


def write_jsonl(
    path: Path, src: Sequence[str], tgt: Sequence[str], langs: tuple[str, str]
) -> Path:
    """One JSON object a pair, a key per language: what ``data=local`` reads."""
    lines = (
        json.dumps({langs[0]: s, langs[1]: t}, ensure_ascii=False) + "\n"
        for s, t in zip(src, tgt, strict=True)
    )
    return write_atomic(path, "".join(lines), "the distilled corpus", ELSEWHERE)
