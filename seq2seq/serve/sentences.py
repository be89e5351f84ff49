"""A paragraph cut into sentences and put back together around their translations.

The model was trained on single sentences, so a paragraph is translated sentence by
sentence: each line break ends a sentence, and within a line pysbd (a rule-based
splitter with rules for about twenty languages, abbreviations such as "Dr." or "e.g."
included) finds the rest; a language it does not know gets its English rules. The
text between sentences (spaces, line breaks) is kept exactly, so joining the
translations gives the paragraph's layout back. pysbd's time grows with the square of
the text it reads, so it reads a long line in windows of about ``CHUNK`` characters:
the sentences it finds there but the last are kept, and the next window starts at that
last one (a "sentence" of more than ``CHUNK`` characters is cut at a space).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pysbd
from pysbd.languages import LANGUAGE_CODES

LINE = re.compile(r"[^\S\n]*\n\s*")  # a line break with the blanks around it
CHUNK = 1000  # characters pysbd reads at once, about
SPACE, TEXT = re.compile(r"\s"), re.compile(r"\S")


@dataclass(frozen=True)
class Paragraph:
    """A text as ``parts``: kept text, sentence, kept text, ..., kept text (always
    one more kept part than sentences)."""

    parts: tuple[str, ...]

    @property
    def sentences(self) -> tuple[str, ...]:
        return self.parts[1::2]

    def join(self, translations: Sequence[str]) -> str:
        """The paragraph with each sentence replaced by its translation."""
        if len(translations) != len(self.sentences):
            raise ValueError(
                f"{len(translations)} translations for {len(self.sentences)} sentences"
            )
        out = list(self.parts)
        out[1::2] = translations
        return "".join(out)


@functools.lru_cache(maxsize=8)
def _segmenter(language: str) -> pysbd.Segmenter:
    code = language if language in LANGUAGE_CODES else "en"
    return pysbd.Segmenter(language=code, clean=False)


def split_sentences(text: str, language: str = "en") -> Paragraph:
    """``text`` cut into sentences (line breaks, then pysbd's rules for
    ``language``); the text around them kept as it is."""
    parts: list[str] = []
    kept = 0  # where the text not yet in ``parts`` starts
    for line in LINE.split(text):
        for sentence in _within(line, language):
            at = text.index(sentence, kept)
            parts += [text[kept:at], sentence]
            kept = at + len(sentence)
    parts.append(text[kept:])
    return Paragraph(tuple(parts))


def _within(line: str, language: str) -> list[str]:
    """The line's sentences, in order, pysbd reading windows of about ``CHUNK``
    characters."""
    found: list[str] = []
    start = 0
    while TEXT.search(line, start):
        end = len(line)
        if end - start > 2 * CHUNK:  # a window ends at a space
            space = SPACE.search(line, start + CHUNK)
            end = space.start() if space else end
        window = line[start:end]
        sentences = _segment(window, language)
        at = window.rfind(sentences[-1]) if len(sentences) > 1 else 0
        if end < len(line) and at > 0:  # the last may go on past the window
            sentences.pop()
            start += at
        else:
            start = end
        found += sentences
    return found


def _segment(text: str, language: str) -> list[str]:
    """pysbd's sentences of ``text``, stripped; ``text`` (stripped) alone where they
    are not the text cut (pysbd should never change the text)."""
    found = [s.strip() for s in _segmenter(language).segment(text)]
    found = [s for s in found if s]
    at = 0
    for sentence in found:
        at = text.find(sentence, at)
        if at < 0:
            return [text.strip()]
        at += len(sentence)
    return found
