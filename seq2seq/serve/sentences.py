"""A paragraph cut into sentences and put back together around their translations.

The model was trained on single sentences, so a paragraph is translated sentence by
sentence: each line break ends a sentence, and within a line pysbd (a rule-based
splitter with rules for about twenty languages, abbreviations such as "Dr." or "e.g."
included) finds the rest; a language it does not know gets its English rules. The
text between sentences (spaces, line breaks) is kept exactly, so joining the
translations gives the paragraph's layout back. pysbd's time grows with the square of
the text it reads, so a long line goes to it in parts of about ``CHUNK`` characters,
cut where a sentence mark ends a word (a cut can fall after an abbreviation, at most
once a part).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pysbd
from pysbd.languages import LANGUAGE_CODES

LINE = re.compile(r"[^\S\n]*\n\s*")  # a line break with the blanks around it
MARK = re.compile(r"(?<=[.!?])\s+")  # where a part of a long line may end
CHUNK = 1000  # characters pysbd reads at once


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
        for sentence in (s for part in _parts(line) for s in _within(part, language)):
            at = text.index(sentence, kept)
            parts += [text[kept:at], sentence]
            kept = at + len(sentence)
    parts.append(text[kept:])
    return Paragraph(tuple(parts))


def _parts(line: str) -> list[str]:
    """``line`` cut after sentence marks into parts of about ``CHUNK`` characters."""
    parts, start = [], 0
    for mark in MARK.finditer(line):
        if mark.start() - start >= CHUNK:
            parts.append(line[start : mark.start()])
            start = mark.end()
    parts.append(line[start:])
    return parts


def _within(line: str, language: str) -> list[str]:
    """The line's sentences, in order; the whole line (stripped) where pysbd's
    sentences are not the line's text cut (it should never change the text)."""
    if not line.strip():
        return []
    found = [s.strip() for s in _segmenter(language).segment(line)]
    found = [s for s in found if s]
    at = 0
    for sentence in found:
        at = line.find(sentence, at)
        if at < 0:
            return [line.strip()]
        at += len(sentence)
    return found
