"""What the server does with a ``Translator``: requests checked and priced, then run
in batches on the model's thread.

A request becomes a job: a ``key`` (jobs of one key share a search), a payload and a
cost (its source pieces, what the batch budget counts). ``check_*`` refuse what the
model cannot take (``RequestError``, a 422 with one line); ``run`` is the batcher's
runner. Translations are ``Translator.nbest``'s and attention ``Translator.attention``'s
(search, then forced through the hypothesis, or through a given reference), each
with its words, Pharaoh links and, when asked, gradient × input attribution; with a
reverse model (``twoway.BothWays``), its attention on the pair the other way and the
two directions' symmetrized word links.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from seq2seq.alignment.attribution import model_attribution, spearman
from seq2seq.alignment.export import pharaoh_line
from seq2seq.alignment.links import to_pharaoh
from seq2seq.alignment.maps import CAVEAT, AttentionMap
from seq2seq.alignment.words import group_pieces, is_special
from seq2seq.config import ServeConfig, fields_of
from seq2seq.decoding.maps import forced_split
from seq2seq.decoding.translator import Translator
from seq2seq.decoding.whatif import step_distributions
from seq2seq.model.seq2seq import Seq2Seq
from seq2seq.serve.schemas import AttentionRequest, TranslateRequest
from seq2seq.serve.twoway import BothWays
from seq2seq.serve.whatif import (
    RequestError,
    check_prefixes,
    check_whatif,
    knockout_of,
    knockout_records,
    occlusions,
    whatif_parts,
)

TRANSLATE, ATTENTION = "translate", "attention"


@dataclass(frozen=True)
class Limits:
    """What one request may ask: texts per request, pieces per text (the defaults
    are ``ServeConfig``'s)."""

    max_texts: int = ServeConfig.max_texts
    max_input_pieces: int = ServeConfig.max_input_pieces

    @classmethod
    def of(cls, cfg: Any) -> Limits:
        """The limits of ``seq2seq-serve``'s config (the fields of these names)."""
        return fields_of(cls, cfg)


@dataclass(frozen=True)
class CheckedRequest:
    """A request the engine took (``check_*``): the key of the searches it can share
    (``batcher.Batcher`` gathers by it), what ``run`` needs, and its cost in source
    pieces."""

    key: Hashable
    payload: Any
    cost: int


class Engine:
    """A ``Translator`` behind the API (its methods run on the model's thread,
    except ``check_*`` and ``info``, which only tokenize or read)."""

    def __init__(
        self,
        translator: Translator,
        limits: Limits,
        names: Sequence[str] = (),
        both: BothWays | None = None,
    ):
        self.translator = translator
        self.limits = limits
        self.names = list(names)  # the checkpoints' file names, for /info
        self.both = both  # a model trained the other way, when given

    @property
    def explains(self) -> bool:
        """Gradient × input explains one model, not an ensemble."""
        return isinstance(self.translator.model, Seq2Seq)

    # --------------------------------------------------------------- checks
    def _pieces(self, text: str, where: str, target: bool = False) -> int:
        """The text's pieces (source side; ``target``: the target's), checked: valid
        Unicode, not blank, not longer than ``max_input_pieces``."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise RequestError(
                f"{where}: not valid Unicode ({err.reason} at character "
                f"{err.start + 1}); send UTF-8 text"
            ) from None
        if not text.strip():
            raise RequestError(f"{where} is empty: give a sentence")
        tokenizer = self.translator.tokenizer
        encode = tokenizer.encode_tgt if target else tokenizer.encode_src
        n = len(encode([text.strip()])[0])
        most = self.limits.max_input_pieces
        if n > most:
            raise RequestError(
                f"{where} has {n} pieces: this server takes at most {most} "
                "(max_input_pieces); split it into sentences"
            )
        return n

    def check_translate(self, req: TranslateRequest) -> CheckedRequest:
        most = self.limits.max_texts
        if len(req.texts) > most:
            raise RequestError(
                f"{len(req.texts)} texts: this server takes at most {most} a request "
                "(max_texts); send them in several requests"
            )
        cost = sum(self._pieces(t, f"texts[{k}]") for k, t in enumerate(req.texts))
        if req.prefixes is not None:
            check_prefixes(self.translator, req.texts, req.prefixes, "texts[{}]")
        payload = (list(req.texts), req.prefixes)
        return CheckedRequest((TRANSLATE, req.beam_size, req.nbest), payload, cost)

    def check_attention(self, req: AttentionRequest) -> CheckedRequest:
        cost = self._pieces(req.text, "text")
        if req.reference is not None:
            self._pieces(req.reference, "reference", target=True)
        for asked, name in (
            (req.attribution, "attribution"),
            (req.occlusion, "occlusion"),
        ):
            if asked and not self.explains:
                raise RequestError(
                    f"{name} explains one model: this server runs an ensemble "
                    "(start it with one checkpoint)"
                )
        forced = req.reference is not None
        ko = knockout_of(req.knockout)
        prefix = check_whatif(self.translator, req, forced, ko)
        key = (ATTENTION, forced, req.attribution, req.beam_size, req.nbest)
        key += (req.top_k, req.occlusion)
        return CheckedRequest(key, (req.text, req.reference, prefix, ko), cost)

    # ------------------------------------------------------------ the thread
    def run(self, key: Hashable, payloads: Sequence[Any]) -> list[Any]:
        """The batcher's runner: one search for all ``payloads`` of ``key``."""
        kind, *settings = key  # type: ignore[misc]
        if kind == TRANSLATE:
            return self.translate(payloads, *settings)
        return self.attention(payloads, *settings)

    def searcher(self, beam_size: int | None, n: int = 1) -> Translator:
        """The translator with a request's beam size, searching for ``n`` best
        (as ``Translator.nbest`` does: at least ``n`` beams)."""
        translator = self.translator
        if beam_size is not None:
            translator = translator.with_decoding(beam_size=beam_size)
        if n > 1:
            beams = max(n, translator.beam_size)
            translator = translator.with_decoding(n_best=n, beam_size=beams)
        return translator

    def translate(
        self, payloads: Sequence[tuple[list[str], Any]], beam_size: int | None, n: int
    ) -> list[dict[str, Any]]:
        """Per payload (texts, their prefixes or None) its translations and n-best
        lists."""
        translator = self.searcher(beam_size)
        texts = [t for texts, _ in payloads for t in texts]
        prefixes = None
        if any(pre is not None for _, pre in payloads):
            prefixes = [
                p for texts, pre in payloads for p in (pre or [None] * len(texts))
            ]
        nbest = iter(translator.nbest(texts, n, prefixes))
        out = []
        for texts, _ in payloads:
            lists = [next(nbest)[:n] for _ in texts]
            out.append(
                {
                    "translations": [c[0][0] if c else "" for c in lists],
                    "nbest": [[{"text": t, "score": s} for t, s in c] for c in lists],
                }
            )
        return out

    def attention(
        self,
        payloads: Sequence[tuple[str, str | None, str | None, Any]],
        forced: bool,
        explain: bool,
        beam_size: int | None = None,
        n: int = 1,
        top_k: int = 0,
        occlude: bool = False,
    ) -> list[dict[str, Any]]:
        """Per payload (text, reference, prefix, knock-out) its attention record:
        ``Translator.attention`` of the text (the search's best, with its ``n``
        best, continuing its prefix, under its knock-out; or forced through the
        reference), with each step's ``top_k`` best pieces and occlusion when
        asked."""
        tr = self.translator
        texts = [p[0] for p in payloads]
        refs = [p[1] for p in payloads] if forced else None
        prefixes = [p[2] for p in payloads]
        kos = [p[3] for p in payloads] if any(p[3] for p in payloads) else None
        split = tr.encode(texts, refs)
        nbest: list[list[dict[str, Any]]] = [[] for _ in texts]
        knocked: list[Any] = [None] * len(texts)
        if forced:
            translations = list(refs or [])
        else:
            searcher = self.searcher(beam_size, n)
            prefix_ids = tr.prefix_ids(split, prefixes)
            found = searcher.search(split, prefix_ids, kos)
            if kos is not None:
                knocked = knockout_records(tr, searcher, split, prefix_ids, kos)
            hyps = [hs[0] for hs in found]
            split = forced_split(split, [h.tokens for h in hyps])
            translations = tr.detokenize(hyps)
            split.tgt_text = translations  # what the reverse model reads
            nbest = [
                [
                    {"text": t, "score": h.score}
                    for t, h in zip(tr.detokenize(hs[:n]), hs[:n], strict=True)
                ]
                for hs in found
            ]
        maps = tr.attention_maps(split, knockouts=kos)
        stats = step_distributions(tr, split, top_k, kos) if top_k else None
        occluded = occlusions(tr, split) if occlude else None
        both = self.both.read(tr, split) if self.both is not None else None
        out = []
        for k, att in enumerate(maps):
            if explain:
                src, tgt = split.src_ids[k], split.tgt_ids[k]
                att.attribution = model_attribution(tr, src, tgt).cpu().numpy()
                att.spearman = spearman(att.weights, att.attribution)
            rec = record(att, texts[k], translations[k], forced, nbest[k])
            rec.update(
                whatif_parts(tr, att, prefixes[k], knocked[k], stats, occluded, k)
            )
            if both is not None:
                back, links = both[k]  # None, None: an empty translation
                if back is not None:
                    back = record(back, translations[k], texts[k], True)
                rec["reverse"], rec["two_way"] = back, links
            out.append(rec)
        return out

    def warm(self) -> None:
        """One translation and one attention map, so the first request is not slow."""
        self.translate([(["warm up"], None)], None, 1)
        self.attention([("warm up", None, None, None)], False, False)

    # ------------------------------------------------------------------ info
    def info(self, serving: dict[str, Any]) -> dict[str, Any]:
        """The model, its languages and vocabulary, the decoding settings, the
        limits and the version: what ``/info`` answers."""
        tr, cfg = self.translator, self.translator.config
        model: dict[str, Any] = {
            "checkpoints": self.names,
            "step": tr.step,
            "ensemble": not self.explains,
            "parameters": sum(p.numel() for p in tr.model.parameters()),
        }
        languages = vocabulary = None
        if cfg is not None:
            model["attention"] = str(cfg.model.attention.type)
            model["heads"] = int(cfg.model.attention.heads)
            languages = {"source": cfg.data.src_lang, "target": cfg.data.tgt_lang}
        vocabulary = {
            "source": tr.tokenizer.src_vocab_size,
            "target": tr.tokenizer.tgt_vocab_size,
        }
        decoding = OmegaConf.to_container(tr.decode, resolve=True, enum_to_str=True)
        return {
            "version": _version(),
            "model": model,
            "languages": languages,
            "vocabulary": vocabulary,
            "decoding": decoding,
            "device": str(tr.device),
            "attribution": self.explains,
            "limits": asdict(self.limits),
            "serving": serving,
            "reverse": None if self.both is None else self.both.info(),
        }


def _version() -> str:
    try:
        return metadata.version("seq2seq")
    except metadata.PackageNotFoundError:
        return "unknown"


def _words(tokens: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"text": text, "pieces": idx}
        for text, idx in group_pieces(tokens)
        if not is_special(text)
    ]


def _listed(value: Any) -> Any:
    return None if value is None else np.asarray(value).tolist()


def record(
    att: AttentionMap,
    text: str,
    translation: str,
    forced: bool,
    nbest: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """An ``AttentionMap`` as ``/attention`` answers it (``AttentionResponse``)."""
    rho = att.spearman
    return {
        "text": text,
        "translation": translation,
        "forced": forced,
        "nbest": list(nbest),
        "src_tokens": list(att.src_tokens),
        "tgt_tokens": list(att.tgt_tokens),
        "src_words": _words(att.src_tokens),
        "tgt_words": _words(att.tgt_tokens),
        "weights": _listed(att.weights),
        "heads": _listed(att.heads),
        "self_attention": _listed(getattr(att, "self_attention", None)),
        "links": pharaoh_line(att, words=True, shifted=False, threshold=None),
        "piece_links": to_pharaoh(att.weights),
        "attribution": _listed(att.attribution),
        "spearman": None if rho is None or np.isnan(rho) else float(rho),
        "caveat": CAVEAT,
    }
