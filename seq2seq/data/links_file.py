"""Word links read from a file: ``data.alignments.<split>=FILE``.

One Pharaoh line per pair (``i-j`` sure, ``i?j`` possible; ``i`` a source and ``j`` a
target whitespace word, counted from 0; an empty line: no links), in the order of the
split's pairs as the corpus holds them. Checked here, before anything is cached or
trained, so that a file for another split, direction or corpus fails at once with
the file and line; guided alignment and AER then read the links like the
phrasebook's gold.
"""

from __future__ import annotations

import re
from pathlib import Path

from seq2seq.errors import UserError

_LINK = re.compile(r"^(\d+)[-?](\d+)$")


class LinksFileError(UserError, ValueError):
    """A links file that does not fit its split: names the file and line."""


def read_links_file(
    path: str | Path, src_texts: list[str], tgt_texts: list[str], split: str
) -> list[str]:
    """The links of ``path``, one string per pair of ``split`` (whose texts are
    ``src_texts`` / ``tgt_texts``), each checked against its pair's word counts."""
    path = Path(path)
    if not path.is_file():
        raise LinksFileError(f"{path}: no such links file (for the {split} split)")
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != len(src_texts):
        raise LinksFileError(
            f"{path}: {len(lines)} lines, but the {split} split has "
            f"{len(src_texts)} pairs; expected one Pharaoh line per pair, in order"
        )
    for number, (line, src, tgt) in enumerate(
        zip(lines, src_texts, tgt_texts, strict=True), start=1
    ):
        n_src, n_tgt = len(src.split()), len(tgt.split())
        for token in line.split():
            match = _LINK.match(token)
            if match is None:
                raise LinksFileError(
                    f"{path}:{number}: {token!r} is not a link; expected i-j (sure) "
                    "or i?j (possible), word indices from 0"
                )
            i, j = int(match[1]), int(match[2])
            if i >= n_src or j >= n_tgt:
                raise LinksFileError(
                    f"{path}:{number}: link {token} is outside the pair's {n_src} "
                    f"source and {n_tgt} target words (source-target order of the "
                    "run's direction?)"
                )
    return lines
