"""HTML whose text is translated and whose markup is kept: the text nodes out, their
translations back in.

Python's ``html.parser`` reads the document; every tag is written back as it came
(a start tag's source text, attributes and their quoting untouched; an end tag as
``</name>``), and so are comments, declarations and processing instructions. Each
text node is one text to translate, so a sentence that an inline tag cuts
(``a <b>big</b> cat``) is translated in pieces: keeping each tag around its own
words would need the words' alignment, which the model's attention gives only
roughly. The text of ``script``, ``style`` and ``code`` elements, and text that is
only whitespace, are kept as they are. Translations are escaped (``&``, ``<``,
``>``), so a translation cannot become markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

KEPT_ELEMENTS = {"script", "style", "code"}  # their text is not prose


@dataclass(frozen=True)
class Markup:
    """A document as ``parts``: markup (written as it came) and text nodes, the
    indices of the text nodes to translate in ``texts``."""

    parts: tuple[str, ...]
    texts: tuple[int, ...]

    @property
    def text_nodes(self) -> list[str]:
        return [self.parts[k] for k in self.texts]

    def fill(self, translations: Sequence[str]) -> str:
        """The document with each text node replaced by its translation."""
        if len(translations) != len(self.texts):
            raise ValueError(
                f"{len(translations)} translations for {len(self.texts)} text nodes"
            )
        out = list(self.parts)
        for k, text in zip(self.texts, translations, strict=True):
            out[k] = html.escape(text, quote=False)
        return "".join(out)


class _Reader(HTMLParser):
    """Collects ``parts``; consecutive data (the parser may cut a text at a stray
    ``<``) is one text node."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.texts: list[int] = []
        self.data: list[str] = []  # the text node being read
        self.kept = 0  # how many KEPT_ELEMENTS are open

    def flush(self) -> None:
        text, self.data = "".join(self.data), []
        if not text:
            return
        if self.cdata_elem is not None:  # inside script or style: raw text
            self.parts.append(text)
        elif text.strip() and not self.kept:
            self.texts.append(len(self.parts))
            self.parts.append(text)
        else:
            self.parts.append(html.escape(text, quote=False))

    def markup(self, source: str) -> None:
        self.flush()
        self.parts.append(source)

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.markup(self.get_starttag_text() or f"<{tag}>")
        self.kept += tag in KEPT_ELEMENTS

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.markup(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        self.markup(f"</{tag}>")
        if tag in KEPT_ELEMENTS and self.kept:
            self.kept -= 1

    def handle_comment(self, data: str) -> None:
        self.markup(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.markup(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.markup(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:  # <![CDATA[...]]>, <![if ...]>
        self.markup(f"<![{data}]]>" if data.startswith("CDATA[") else f"<![{data}]>")


def read_markup(document: str) -> Markup:
    """``document``'s markup and text nodes (``html.parser``: it reads any text,
    well-formed or not, without raising)."""
    reader = _Reader()
    reader.feed(document)
    reader.close()
    reader.flush()
    return Markup(tuple(reader.parts), tuple(reader.texts))
