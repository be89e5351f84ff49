"""Rebuild a trained model from one self-contained checkpoint, and feed it text.

``evaluate``, ``translate`` and ``align`` need nothing but the checkpoint: the resolved
config, the tokenizer model and the weights all travel inside it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config import DecodeConfig, TrainConfig
from seq2seq.data.corpus import load_corpus
from seq2seq.data.prepare import EncodedSplit
from seq2seq.data.tokenizer import Tokenizer
from seq2seq.model.search import check_stop_rule
from seq2seq.model.seq2seq import Seq2Seq, build_model

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    model: Seq2Seq
    tokenizer: Tokenizer
    config: DictConfig  # the training run's resolved config
    step: int


def load_model(path: str | Path, device: torch.device) -> LoadedModel:
    """Load weights, config and tokenizer from a checkpoint; model in eval mode."""
    state = load_checkpoint(Path(path), map_location="cpu")
    cfg = OmegaConf.merge(OmegaConf.structured(TrainConfig), state["config"])
    tokenizer = Tokenizer.from_bytes(state["tokenizer"])
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return LoadedModel(model, tokenizer, cfg, int(state["step"]))


def decode_settings(
    base: DictConfig, beam_size=None, length_penalty=None, stop=None
) -> DictConfig:
    """The checkpoint's decoding settings with the command line's overrides on top."""
    cfg = OmegaConf.merge(OmegaConf.structured(DecodeConfig), base)
    if beam_size is not None:
        cfg.beam_size = beam_size
    if length_penalty is not None:
        cfg.length_penalty = length_penalty
    if stop is not None:
        cfg.stop = stop
    check_stop_rule(cfg.stop)
    return cfg


def encode_texts(
    tokenizer: Tokenizer,
    src: list[str],
    tgt: list[str] | None = None,
    alignment: list[str] | None = None,
) -> EncodedSplit:
    """Encode raw text with an existing tokenizer (never retrains it)."""
    tgt = tgt if tgt is not None else [""] * len(src)
    return EncodedSplit(
        src_text=list(src),
        tgt_text=list(tgt),
        src_ids=tokenizer.encode_src(list(src)),
        tgt_ids=tokenizer.encode_tgt(list(tgt)),
        alignment=alignment,
    )


def encode_corpus_split(data_cfg, tokenizer: Tokenizer, split: str) -> EncodedSplit:
    """Load ``split`` of the corpus that ``data_cfg`` describes and encode it."""
    corpus = load_corpus(data_cfg)
    if split not in corpus:
        raise ValueError(f"split {split!r} not in the corpus; it has {sorted(corpus)}")
    ds = corpus[split]
    alignment = ds["alignment"] if "alignment" in ds.column_names else None
    return encode_texts(tokenizer, ds["src"], ds["tgt"], alignment)
