"""Both directions, live: a second model, trained the other way on the same corpus,
reads each shown pair the other way, and the two directions' word links are
combined as ``seq2seq-align reverse_checkpoint=...`` combines them.

The reverse model is forced through the typed text while it reads the shown
translation (``alignment.twoway.swapped``); ``alignment.twoway.two_way_links`` reads
both directions' word attention (mixed with the lexicon of the ``Readout``) and
``TwoWay.combined`` applies the rule (``geometric`` by default). Nothing here
computes links itself, so the page's links are the command's for the same pair.
The pair read is the one shown, by the intact models (a knock-out changes what is
shown, not the models that read it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from seq2seq.alignment.maps import AttentionMap
from seq2seq.alignment.twoway import Readout, TwoWay, swapped, two_way_links
from seq2seq.config import Symmetrize
from seq2seq.data.splits import EncodedSplit
from seq2seq.decoding.translator import Translator


def pharaoh(links: set[tuple[int, int]]) -> str:
    """Links as a Pharaoh line ``i-j`` (source word, target word), sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


@dataclass(frozen=True)
class BothWays:
    """The reverse model and how the two directions' links are read (``readout``:
    the lexicon and geometric's thresholds; ``rule``: how they are combined)."""

    reverse: Translator
    readout: Readout = field(default_factory=Readout)
    rule: Symmetrize = Symmetrize.geometric
    names: Sequence[str] = ()  # the reverse checkpoints' file names, for /info

    def read(
        self, forward: Translator, split: EncodedSplit
    ) -> list[tuple[AttentionMap | None, dict[str, Any] | None]]:
        """Per pair of ``split`` (``tgt_ids`` the shown pieces, ``tgt_text`` the
        shown text): the reverse model's attention map on the pair the other way,
        and the ``two_way`` record (None when either model's pieces are not the
        texts' words); both None for an empty translation (nothing to read)."""
        out: list[tuple[AttentionMap | None, dict[str, Any] | None]]
        out = [(None, None)] * len(split)
        kept = [k for k, text in enumerate(split.tgt_text) if text.strip()]
        if not kept:
            return out
        pairs = split.select(kept)
        maps = self.reverse.attention_maps(swapped(pairs, self.reverse))
        links = two_way_links(forward, self.reverse, pairs, readout=self.readout)
        for k, att, pair in zip(kept, maps, links, strict=True):
            out[k] = (att, None if pair is None else self.record(pair))
        return out

    def record(self, pair: TwoWay) -> dict[str, Any]:
        """``/attention``'s ``two_way``: the combined links and what they come from,
        all in the forward orientation (source word, target word)."""
        return {
            "rule": str(self.rule),
            "readout": self.readout.describe(),
            "links": pharaoh(pair.combined(self.rule, self.readout)),
            "forward_links": pharaoh(pair.forward),
            "reverse_links": pharaoh(pair.reverse),
            "forward_attention": pair.forward_attention.tolist(),
            "reverse_attention": pair.reverse_attention.tolist(),
        }

    def info(self) -> dict[str, Any]:
        """The reverse model and the readout, for ``/info``."""
        cfg = self.reverse.config
        languages = None
        if cfg is not None:
            languages = {"source": cfg.data.src_lang, "target": cfg.data.tgt_lang}
        return {
            "checkpoints": list(self.names),
            "step": self.reverse.step,
            "languages": languages,
            "symmetrize": str(self.rule),
            "readout": self.readout.describe(),
        }
