"""LibreTranslate's side of its API: its request fields (JSON or a form) read and
checked in its order and words, its answers' schemas, and the model's language pair
as its ``/languages`` lists it. A refused request is a ``LibreError``: a status and
one line, as LibreTranslate answers it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from pydantic import BaseModel, Field

from seq2seq.serve.engine import Engine
from seq2seq.serve.schemas import MAX_NBEST

FORMATS = ("text", "html")
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# English names of common language codes (ISO 639-1); another code is its own name
NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "hi": "Hindi",
    "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
    "zh": "Chinese",
}  # fmt: skip


class LibreError(Exception):
    """A request LibreTranslate would refuse: its status and one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class LibreTranslateRequest(BaseModel):
    """LibreTranslate's ``/translate`` fields (as JSON, or as a form, where ``q`` is
    one string)."""

    q: str | list[str] = Field(examples=["the small blue chairs"])
    source: str = Field(examples=["en"])  # a code, or "auto": the model's source
    target: str = Field(examples=["fr"])
    format: str = Field("text", examples=["text"])  # text or html
    alternatives: int = Field(0, ge=0, le=MAX_NBEST - 1)
    api_key: str | None = None


class DetectedLanguage(BaseModel):
    confidence: float
    language: str


class LibreTranslateResponse(BaseModel):
    translatedText: str | list[str]  # LibreTranslate's names
    alternatives: list[str] | list[list[str]] | None = None
    detectedLanguage: DetectedLanguage | list[DetectedLanguage] | None = None


class Language(BaseModel):
    code: str
    name: str
    targets: list[str]


@dataclass(frozen=True)
class Asked:
    """A checked request: its texts, whether ``q`` was a list, HTML or text, how many
    alternatives, whether the source was ``auto``."""

    texts: list[str]
    batch: bool
    html: bool
    alternatives: int
    auto: bool


def language_pair(engine: Engine) -> tuple[str, str] | None:
    """The model's (source, target) codes; None when its checkpoint does not say."""
    cfg = engine.translator.config
    if cfg is None:
        return None
    return str(cfg.data.src_lang), str(cfg.data.tgt_lang)


def languages(engine: Engine) -> list[dict[str, Any]]:
    """LibreTranslate's ``/languages``: each language with the codes it translates
    into."""
    pair = language_pair(engine)
    if pair is None:
        return []
    src, tgt = pair
    return [
        {"code": src, "name": NAMES.get(src, src), "targets": [tgt]},
        {"code": tgt, "name": NAMES.get(tgt, tgt), "targets": []},
    ]


async def read_fields(request: Request) -> dict[str, Any]:
    """The body's fields: a JSON object, or a form (each field's first value,
    line breaks made ``\\n`` as LibreTranslate does)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind in FORM_TYPES:
        form = await request.form()
        fields = {k: form.get(k) for k in form}
        if isinstance(fields.get("q"), str):
            fields["q"] = "\n".join(fields["q"].splitlines())
        return fields
    try:
        fields = json.loads(await request.body())
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        raise LibreError(400, "Invalid JSON format")
    return fields


def check_request(fields: dict[str, Any], engine: Engine) -> Asked:
    """The fields checked in LibreTranslate's order and words; ``LibreError`` 400
    for the first that is wrong."""
    for name in ("q", "source", "target"):
        if not fields.get(name):
            raise LibreError(400, f"Invalid request: missing {name} parameter")
    q, source, target = fields["q"], fields["source"], fields["target"]
    batch = isinstance(q, list)
    if not (isinstance(q, str) or (batch and all(isinstance(t, str) for t in q))):
        raise LibreError(
            400, "Invalid request: q must be a string or a list of strings"
        )
    alternatives = _count(fields.get("alternatives", 0))
    most = engine.limits.max_texts
    if batch and len(q) > most:
        raise LibreError(
            400, f"Invalid request: request ({len(q)}) exceeds text limit ({most})"
        )
    _check_pair(str(source), str(target), language_pair(engine))
    form = fields.get("format") or "text"
    if form not in FORMATS:
        raise LibreError(400, f"{form} format is not supported")
    texts = list(q) if batch else [q]
    for text in texts:
        _check_unicode(text)
    return Asked(texts, batch, form == "html", alternatives, source == "auto")


def _check_unicode(text: str) -> None:
    """JSON may carry lone surrogates, which no tokenizer takes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise LibreError(
            400,
            f"Invalid request: q is not valid Unicode ({err.reason} at character "
            f"{err.start + 1}); send UTF-8 text",
        ) from None


def _count(value: Any) -> int:
    """``alternatives`` as LibreTranslate reads it (Python's ``int``: a number, its
    fraction dropped, or a string of digits), below 0 read as 0, at most
    ``MAX_NBEST`` - 1."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise LibreError(400, "Invalid request: alternatives parameter is not a number")
    try:
        count = max(0, int(value))
    except (ValueError, OverflowError):
        raise LibreError(
            400, "Invalid request: alternatives parameter is not a number"
        ) from None
    if count > MAX_NBEST - 1:
        raise LibreError(
            400, f"Invalid request: alternatives parameter must be <= {MAX_NBEST - 1}"
        )
    return count


def _check_pair(source: str, target: str, pair: tuple[str, str] | None) -> None:
    codes = set(pair or ())
    src = pair[0] if pair and source == "auto" else source
    for code in (src, target):
        if code not in codes:
            raise LibreError(400, f"{code} is not supported")
    if pair is not None and (src, target) != pair:
        raise LibreError(
            400,
            f"{NAMES.get(target, target)} ({target}) is not available as a target "
            f"language from {NAMES.get(src, src)} ({src})",
        )
