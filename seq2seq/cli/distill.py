"""``seq2seq-distill``: a teacher's translations of a split as a corpus folder.

Sequence-level knowledge distillation (Kim & Rush, 2016) trains a student on the
beam translations of its teacher (one checkpoint or an ensemble). This writes, in
``output=DIR``, the ``train.jsonl`` that ``data=local data.local_dir=DIR`` (or
``data=multi30k data.local_dir=DIR``) reads, one key per language, holding the
teacher's translations as targets (``mode=replace``) or the original pairs followed by
them (``mode=add``), and ``validation.jsonl`` / ``test.jsonl`` copied unchanged, so
the student is chosen and scored on real references.

A command of its own, not a mode of ``seq2seq-translate``: it reads a corpus split
with the checkpoint's corpus settings (as ``seq2seq-evaluate`` does), decodes it for
hours in resumable chunks (``decoding/distill.py``: rerun the same command after a kill)
and writes a corpus, where ``seq2seq-translate`` turns lines into lines.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from seq2seq.cli.app import command, load_translator
from seq2seq.cli.checks import (
    check_decoding_overrides,
    checkpoint_paths,
    corpus_settings,
)
from seq2seq.config_checks import AT_LEAST_1, check_folder, check_values

log = logging.getLogger(__name__)


def check_distill(cfg: DictConfig) -> None:
    check_decoding_overrides(cfg)
    check_values(cfg, "", {"chunk_sentences": AT_LEAST_1})
    check_folder(cfg.data.local_dir, "data.local_dir")


def distill(cfg: DictConfig) -> Path:
    """Decode ``cfg.split`` in chunks, then write the distilled corpus folder."""
    import torch

    from seq2seq.data.corpus import read_corpus
    from seq2seq.data.splits import encode_corpus_split
    from seq2seq.decoding.distill import (
        ChunkFolder,
        decode_in_chunks,
        decoding_identity,
        distilled_rows,
        write_jsonl,
    )

    translator = load_translator(cfg)
    data_cfg = corpus_settings(translator.config.data, cfg.data)
    split = str(cfg.split.value if hasattr(cfg.split, "value") else cfg.split)
    encoded = encode_corpus_split(data_cfg, translator.tokenizer, split)
    out = Path(cfg.output)
    paths = checkpoint_paths(cfg.checkpoint)
    runtime = f"{translator.device.type} {translator.amp_dtype or torch.float32}"
    identity = decoding_identity(
        paths, encoded, translator.decode, cfg.chunk_sentences, runtime
    )
    hyps = decode_in_chunks(translator, encoded, ChunkFolder(out / "chunks", identity))
    langs = (str(data_cfg.src_lang), str(data_cfg.tgt_lang))
    src, tgt = distilled_rows(encoded, hyps, str(cfg.mode))
    write_jsonl(out / f"{split}.jsonl", src, tgt, langs)
    others = [s for s in ("train", "validation", "test") if s != split]
    loaded = read_corpus(data_cfg, links_for=(), splits=others).splits
    for name in others:
        write_jsonl(
            out / f"{name}.jsonl", loaded[name]["src"], loaded[name]["tgt"], langs
        )
    print(
        f"{out}: {split} of {data_cfg.name} {langs[0]}->{langs[1]} translated by "
        f"{len(paths)} model(s), beam {translator.beam_size}; {len(src)} pairs "
        f"(mode={cfg.mode}); train a student with data.local_dir={out}"
    )
    return out


main = command("distill", distill, check_distill)

if __name__ == "__main__":
    main()
