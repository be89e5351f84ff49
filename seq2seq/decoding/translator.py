"""``Translator``: a trained model with everything needed to use it, in one object.

Model, tokenizer, device, precision (the autocast dtype), batch budget and decoding
settings travel together, so evaluation, translation, validation and alignment decode
the same way and none of them can forget a piece. ``from_checkpoint`` rebuilds it from
one self-contained checkpoint: the resolved config, the tokenizer model and the
weights all travel inside it. This is the Python API::

    translator = Translator.from_checkpoint("best.pt", beam_size=5)
    translator.translate(["Ein Hund läuft."])
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq.config import DecodeConfig, DecodeOptions, TrainConfig
from seq2seq.data.batching import Batch, VocabCheck, make_loader
from seq2seq.data.splits import EncodedSplit, encode_texts
from seq2seq.data.tokenizer import PAD_ID, Tokenizer
from seq2seq.decoding.ensemble import Ensemble
from seq2seq.decoding.forced import Forced, forced_outputs
from seq2seq.decoding.knockout import (
    Knockout,
    KnockoutMasks,
    Knockouts,
    per_text,
    split_masks,
)
from seq2seq.decoding.maps import (
    AttentionMap,
    AttentionMaps,
    ForcedAttention,
    forced_split,
    piece_maps,
)
from seq2seq.decoding.prefix import batch_prefixes, prefix_ids
from seq2seq.decoding.search import Hypothesis, run_step, translate_batch
from seq2seq.decoding.settings import decode_settings
from seq2seq.errors import InputError
from seq2seq.model.checkpoint import load_checkpoint
from seq2seq.model.device import autocast, resolve_precision, select_device
from seq2seq.model.seq2seq import Seq2Seq, build_model

log = logging.getLogger(__name__)


def _load(
    path: Path, device: torch.device
) -> tuple[Tokenizer, DictConfig, int, Seq2Seq]:
    """A checkpoint's tokenizer, resolved config, step and model (eval, on device)."""
    state = load_checkpoint(path, map_location="cpu")
    cfg = OmegaConf.merge(OmegaConf.structured(TrainConfig), state["config"])
    tokenizer = Tokenizer.from_bytes(state["tokenizer"])
    model = build_model(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return tokenizer, cfg, int(state["step"]), model


DEFAULT_BATCH_TOKENS = DecodeConfig.batch_tokens


@dataclass(frozen=True)
class Translator:
    """A model ready to translate, score and show its attention (see the module
    docstring). ``amp_dtype`` None is fp32; ``config`` and ``step`` describe the
    training run when the translator comes from a checkpoint."""

    model: Seq2Seq | Ensemble
    tokenizer: Tokenizer
    device: torch.device
    amp_dtype: torch.dtype | None = None
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    decode: DictConfig = dataclasses.field(default_factory=decode_settings)
    config: DictConfig | None = None
    step: int | None = None

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path | Sequence[str | Path],
        options: DecodeOptions | None = None,
        **overrides: Any,
    ) -> Translator:
        """Weights, config and tokenizer from a checkpoint (several paths: an
        ``Ensemble`` of them, which must share one tokenizer); the model in eval mode
        on the device. ``options`` (``config.DecodeOptions``: device, precision,
        batch budget, beam size, ...) with the keyword ``overrides`` on top, each a
        field of it (``beam_size=5``); decoding settings left None are the (first)
        checkpoint's, the batch budget its ``decode.batch_tokens``."""
        options = dataclasses.replace(options or DecodeOptions(), **overrides)
        paths = [path] if isinstance(path, str | Path) else list(path)
        if not paths:
            raise InputError("from_checkpoint needs at least one checkpoint")
        torch_device = select_device(options.device)
        loaded = [_load(Path(p), torch_device) for p in paths]
        tokenizer, cfg, step, _ = loaded[0]
        for (other, *_), other_path in zip(loaded[1:], paths[1:], strict=True):
            if other.to_bytes() != tokenizer.to_bytes():
                raise InputError(
                    f"{other_path} and {paths[0]} have different tokenizers: the "
                    "members of an "
                    "ensemble must share one vocabulary (train them on the same "
                    "prepared corpus)"
                )
        models = [m for *_, m in loaded]
        model = models[0] if len(models) == 1 else Ensemble(models).eval()
        decode = decode_settings(cfg.decode, **options.decode_overrides())
        return cls(
            model,
            tokenizer,
            torch_device,
            amp_dtype=resolve_precision(options.precision, torch_device, decoding=True),
            batch_tokens=decode.batch_tokens,
            decode=decode,
            config=cfg,
            step=step,
        )

    def with_decoding(self, base: Any = None, **overrides: Any) -> Translator:
        """A copy with other decoding settings: ``base`` (a ``DecodeConfig``) or this
        translator's, with the overrides that are not None on top."""
        decode = decode_settings(self.decode if base is None else base, **overrides)
        return dataclasses.replace(self, decode=decode)

    # ---------------------------------------------------------------- text in/out
    def encode(self, src: Sequence[str], tgt: Sequence[str] | None = None):
        """Texts as an ``EncodedSplit`` with this model's tokenizer."""
        return encode_texts(self.tokenizer, src, tgt)

    def detokenize(self, hyps: Sequence[Hypothesis]) -> list[str]:
        return [self.tokenizer.decode_tgt(h.tokens) for h in hyps]

    def translate(
        self,
        texts: Sequence[str],
        prefixes: Sequence[str | None] | None = None,
        knockouts: Knockouts = None,
    ) -> list[str]:
        """One translation per text, in order; empty or blank texts stay empty.
        ``prefixes`` and ``knockouts`` as in ``nbest``."""
        found = self.nbest(texts, 1, prefixes, knockouts)
        return [nbest[0][0] if nbest else "" for nbest in found]

    def nbest(
        self,
        texts: Sequence[str],
        n: int = 1,
        prefixes: Sequence[str | None] | None = None,
        knockouts: Knockouts = None,
    ) -> list[list[tuple[str, float]]]:
        """Per text its ``n`` best translations with their scores, best first (beam
        search with ``n_best=n``; greedy gives one); blank texts get ``[]``.
        ``prefixes``: per text a target prefix (detokenized text, encoded as the
        target side is; None or "" for none) that every translation starts with;
        ``knockouts``: one ``Knockout`` for every text, or one per text (None for
        none): what to knock out of the model (``decoding/knockout.py``)."""
        keep = [i for i, text in enumerate(texts) if text.strip()]
        out: list[list[tuple[str, float]]] = [[] for _ in texts]
        if not keep:
            return out
        split = self.encode([texts[i].strip() for i in keep])
        translator = self
        if n > 1:
            translator = self.with_decoding(n_best=n, beam_size=max(n, self.beam_size))
        pre = None if prefixes is None else [prefixes[i] for i in keep]
        kos = per_text(knockouts, len(texts))
        kos = None if kos is None else [kos[i] for i in keep]
        found = translator.search(split, translator.prefix_ids(split, pre), kos)
        for i, hyps in zip(keep, found, strict=True):
            out[i] = [
                (text, h.score)
                for text, h in zip(translator.detokenize(hyps), hyps, strict=True)
            ]
        return out

    def attention(
        self,
        texts: Sequence[str],
        references: Sequence[str] | None = None,
        prefixes: Sequence[str | None] | None = None,
        knockouts: Knockouts = None,
    ) -> AttentionMaps:
        """One ``AttentionMap`` per text: where the model looked while writing its
        own translation (search, then forced through it), or, given ``references``,
        while reading them (forced); piece tokens, ``</s>`` last on both sides.
        ``prefixes`` and ``knockouts`` as in ``nbest`` (the attention is the
        knocked-out model's). A list that Jupyter draws as the viewer."""
        split = self.encode(texts, references)
        kos = per_text(knockouts, len(texts))
        if references is None:
            found = self.search(split, self.prefix_ids(split, prefixes), kos)
            split = forced_split(split, [hs[0].tokens for hs in found])
        return AttentionMaps(self.attention_maps(split, knockouts=kos))

    def prefix_ids(
        self,
        split: EncodedSplit,
        prefixes: Sequence[str | Sequence[int] | None] | None,
        names: Sequence[str] | None = None,
    ) -> list[list[int]] | None:
        """Each pair's prefix (text, target ids, or None) as target ids, checked
        against its output limit (``prefix.prefix_ids``)."""
        return prefix_ids(self.tokenizer, self.decode, split, prefixes, names)

    @property
    def beam_size(self) -> int:
        return int(self.decode.beam_size)

    # ------------------------------------------------------------------- splits
    @torch.inference_mode()
    def search(
        self,
        split: EncodedSplit,
        prefixes: Sequence[Sequence[int]] | None = None,
        knockouts: Sequence[Knockout | None] | None = None,
    ) -> list[list[Hypothesis]]:
        """Per pair of ``split``, in its order, the n-best hypotheses, best first;
        ``prefixes`` per pair its target prefix ids (``prefix_ids``), ``knockouts``
        per pair its knock-out (None: none)."""
        self.model.eval()
        masks = self.knockout_masks(split, knockouts)
        # one step for the whole run: built from the weights as they are now
        step = run_step(self.model, self.decode, self.device)
        out: list[list[Hypothesis] | None] = [None] * len(split)
        loader = make_loader(
            split, self.batch_tokens, shuffle=False, seed=0, vocab=self._vocab(split)
        )
        for batch in loader:
            ids = batch.ids.tolist()  # from the host's copy: no wait for the device
            batch = batch.to(self.device, non_blocking=True)
            extra = {
                "prefix": batch_prefixes(prefixes, ids, self.device),
                "knockout": None if masks is None else masks.batch(ids, self.device),
            }
            with autocast(self.device, self.amp_dtype):
                nbests = translate_batch(self.model, batch, self.decode, step, **extra)
            for index, nbest in zip(ids, nbests, strict=True):
                out[index] = nbest
        return out  # type: ignore[return-value]

    def knockout_masks(
        self, split: EncodedSplit, knockouts: Sequence[Knockout | None] | None
    ) -> KnockoutMasks | None:
        """The split's knock-outs as masks over its pairs, checked
        (``knockout.split_masks``); None without any."""
        return split_masks(split, knockouts, self.tokenizer, self.model)

    def _vocab(self, split: EncodedSplit) -> VocabCheck:
        """Ids outside the vocabulary end in an error naming the pair."""
        return VocabCheck.of(split, "the decoded split's", self.tokenizer)

    def hypotheses(self, split: EncodedSplit) -> list[Hypothesis]:
        """The best hypothesis for every pair of ``split``, in the split's order."""
        return [nbest[0] for nbest in self.search(split)]

    @torch.inference_mode()
    def loss(self, split: EncodedSplit) -> float:
        """Mean per-token cross-entropy (no smoothing) of ``split`` under teacher
        forcing."""
        self.model.eval()
        total, tokens = torch.zeros((), device=self.device), 0
        loader = make_loader(
            split,
            self.batch_tokens,
            shuffle=False,
            seed=0,
            sort_by="target",
            vocab=self._vocab(split),
        )
        for batch in loader:
            batch = batch.to(self.device, non_blocking=True)
            with autocast(self.device, self.amp_dtype):
                out = self.model(
                    batch.src,
                    batch.src_lengths,
                    batch.src_mask,
                    batch.tgt_in,
                    rows=batch.tgt_rows,
                    targets=batch.flat_targets(),
                )
            total += out.loss
            tokens += batch.n_tokens
        return float(total) / max(tokens, 1)

    @torch.inference_mode()
    def forced_attention(
        self,
        split: EncodedSplit,
        knockouts: Sequence[Knockout | None] | None = None,
    ) -> list[ForcedAttention]:
        """The attention of the model reading each source while it is forced through
        the pair's target (``split.tgt_ids``: a reference, or a hypothesis without
        its EOS), in the split's order, with the encoder's self-attention when the
        model has blocks; one batched pass, padding cut off. With ``knockouts``
        (per pair): the knocked-out model's attention (``forced_logprobs``)."""
        if knockouts is not None and any(knockouts):
            return self._knocked_attention(split, knockouts)
        self.model.eval()
        out: list[ForcedAttention | None] = [None] * len(split)
        for batch, ids, tgt_lengths, src_lengths in self.forced_batches(split):
            with autocast(self.device, self.amp_dtype):
                res = self.model(
                    batch.src,
                    batch.src_lengths,
                    batch.src_mask,
                    batch.tgt_in,
                    self_weights=True,
                )
            weights = res.attention.float().cpu()  # (B, T, S)
            heads, selfs = (
                None if x is None else x.float().cpu()
                for x in (res.head_attention, res.self_attention)
            )
            for row, index in enumerate(ids):
                t, s = tgt_lengths[row], src_lengths[row]
                out[index] = ForcedAttention(
                    weights[row, :t, :s].numpy(),
                    None if heads is None else heads[row, :, :t, :s].numpy(),
                    None if selfs is None else selfs[row, :, :, :s, :s].numpy(),
                )
        return out  # type: ignore[return-value]

    def forced_batches(
        self, split: EncodedSplit
    ) -> Iterator[tuple[Batch, list[int], list[int], list[int]]]:
        """The split's batches for a forced pass, on the device, each with its pairs'
        indices and their target and source lengths (EOS included), read from the
        host's copy: no wait for the device."""
        loader = make_loader(
            split, self.batch_tokens, shuffle=False, seed=0, vocab=self._vocab(split)
        )
        for batch in loader:
            tgt_lengths = (batch.tgt_out != PAD_ID).sum(dim=1).tolist()
            src_lengths, ids = batch.src_lengths.tolist(), batch.ids.tolist()
            yield (
                batch.to(self.device, non_blocking=True),
                ids,
                tgt_lengths,
                src_lengths,
            )

    @torch.inference_mode()
    def forced_passes(
        self,
        split: EncodedSplit,
        knockouts: Sequence[Knockout | None] | None = None,
    ) -> list[Forced]:
        """Per pair, forced through its target (``split.tgt_ids``, EOS added): the
        ``Forced`` of one sentence, padding cut off (log_probs ``(T, V)`` on the
        device, attention ``(T, S)`` and heads on the host), under ``knockouts``."""
        self.model.eval()
        masks = self.knockout_masks(split, knockouts)
        out: list[Forced | None] = [None] * len(split)
        for batch, ids, tgt_lengths, src_lengths in self.forced_batches(split):
            rows = None if masks is None else masks.batch(ids, self.device)
            with autocast(self.device, self.amp_dtype):
                res = forced_outputs(
                    self.model,
                    batch.src,
                    batch.src_lengths,
                    batch.src_mask,
                    batch.tgt_in,
                    rows,
                )
            attention = res.attention.float().cpu()
            heads = None if res.heads is None else res.heads.float().cpu()
            for row, index in enumerate(ids):
                t, s = tgt_lengths[row], src_lengths[row]
                out[index] = Forced(
                    res.log_probs[row, :t],
                    attention[row, :t, :s],
                    None if heads is None else heads[row, :, :t, :s],
                )
        return out  # type: ignore[return-value]

    def _knocked_attention(
        self, split: EncodedSplit, knockouts: Sequence[Knockout | None]
    ) -> list[ForcedAttention]:
        """``forced_attention`` of the knocked-out model (no self-attention maps)."""
        return [
            ForcedAttention(f.attention.numpy(), _numpy(f.heads))
            for f in self.forced_passes(split, knockouts)
        ]

    def attention_maps(
        self,
        split: EncodedSplit,
        titles: Sequence[str] | None = None,
        with_gold: bool = False,
        knockouts: Sequence[Knockout | None] | None = None,
    ) -> list[AttentionMap]:
        """``forced_attention`` of ``split`` as ``AttentionMap``s with their piece
        tokens; ``with_gold`` attaches the split's gold links; ``knockouts`` as in
        ``forced_attention``."""
        forced = self.forced_attention(split, knockouts)
        return piece_maps(self.tokenizer, split, forced, titles, with_gold)


def _numpy(x: torch.Tensor | None) -> Any:
    return None if x is None else x.numpy()
