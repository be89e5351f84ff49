"""LibreTranslate's API in front of the model, so LibreTranslate's clients (its web
page's forms, ``libretranslatepy``, editor and mobile plug-ins) can use this server
(its fields, schemas and checks: ``libre_fields``).

Mounted under ``PREFIX``: ``POST /libretranslate/translate`` and ``GET
/libretranslate/languages``, the two routes those clients call to translate (the
server's own ``/translate`` has another schema). Requests are JSON or forms (URL-encoded
or multipart) with LibreTranslate's fields (``q``, ``source``, ``target``, ``format``,
``alternatives``, ``api_key``); answers and errors are LibreTranslate's: ``{"error":
"..."}`` with 400 for a bad request, 403 for a refused key, 429 when the queue is full,
500 when translating failed.

The model translates one language pair. ``source: "auto"`` means its source language
(nothing is detected: the answer's ``detectedLanguage`` names it). Each text is cut into
sentences (``sentences``; in HTML each text node, ``markup``), and all the sentences of
a request go to the engine together: one job when they are at most ``max_texts``,
otherwise jobs of that many that the batcher gathers into one search.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from seq2seq.serve.abandon import ABANDONED, ClientGone, until_gone
from seq2seq.serve.auth import Unauthorized, bearer, require
from seq2seq.serve.batcher import Batcher, Busy, TimedOut
from seq2seq.serve.engine import Engine, RequestError
from seq2seq.serve.libre_fields import (
    FORM_TYPES,
    Asked,
    Language,
    LibreError,
    LibreTranslateRequest,
    LibreTranslateResponse,
    check_request,
    language_pair,
    languages,
    read_fields,
)
from seq2seq.serve.markup import read_markup
from seq2seq.serve.schemas import ErrorResponse, TranslateRequest
from seq2seq.serve.sentences import Paragraph, split_sentences

log = logging.getLogger(__name__)

PREFIX = "/libretranslate"
TAG = "LibreTranslate"


def check_key(request: Request, api_key: str | None) -> None:
    """The server's key (``auth``), sent as LibreTranslate's clients send it: the
    body's ``api_key``, else an ``Authorization: Bearer`` header. A wrong or
    missing one is LibreTranslate's 403 ``Invalid API key``."""
    presented = api_key if api_key else bearer(request.headers.raw)
    try:
        require(request.app.state.access, presented)
    except Unauthorized:
        raise LibreError(403, "Invalid API key") from None


@dataclass(frozen=True)
class Unit:
    """One text of ``q`` made ready: its paragraphs (the text, or each HTML text
    node) and, for HTML, how to put the translated nodes back."""

    text: str
    paragraphs: list[Paragraph]
    markup: Any = None  # markup.Markup for HTML


def units_of(asked: Asked, engine: Engine, language: str) -> list[Unit]:
    """Each text cut into its paragraphs' sentences (``language``: the splitter's),
    once its pieces are known to fit ``max_texts`` x ``max_input_pieces`` (what one
    ``/translate`` request may ask, and a bound on the splitter's time)."""
    markups = [read_markup(t) if asked.html else None for t in asked.texts]
    nodes = [
        m.text_nodes if m is not None else [t]
        for m, t in zip(markups, asked.texts, strict=True)
    ]
    encode = engine.translator.tokenizer.encode_src
    pieces = sum(len(ids) for ids in encode([t for ts in nodes for t in ts]))
    most = engine.limits.max_texts * engine.limits.max_input_pieces
    if pieces > most:
        raise LibreError(
            400,
            f"Invalid request: request ({pieces} pieces) exceeds text limit ({most} "
            "pieces: max_texts x max_input_pieces)",
        )
    return [
        Unit(text, [split_sentences(t, language) for t in ts], markup)
        for text, ts, markup in zip(asked.texts, nodes, markups, strict=True)
    ]


async def translate_sentences(
    request: Request, engine: Engine, sentences: list[str], n: int, timeout: float
) -> list[list[str]]:
    """Each sentence's ``n`` best translations, best first: jobs of at most
    ``max_texts`` sentences submitted together, so the batcher runs them as one
    search (up to its budget of pieces)."""
    if not sentences:
        return []
    step = engine.limits.max_texts
    jobs = []
    for start in range(0, len(sentences), step):
        chunk = sentences[start : start + step]
        try:
            jobs.append(engine.check_translate(TranslateRequest(texts=chunk, nbest=n)))
        except RequestError as err:
            raise LibreError(
                400, f"Invalid request: {_named(str(err), chunk)}"
            ) from None
    batcher: Batcher = request.app.state.batcher
    found = await until_gone(
        request,
        asyncio.gather(
            *(batcher.submit(job.key, job.payload, job.cost, timeout) for job in jobs)
        ),
    )
    return [[c["text"] for c in cands] for a, _ in found for cands in a["nbest"]]


def _named(message: str, chunk: Sequence[str]) -> str:
    """The engine's ``texts[k]`` named as the sentence it is."""

    def sentence(match: re.Match) -> str:
        text = chunk[int(match.group(1))]
        return f'the sentence "{text[:40]}{"..." if len(text) > 40 else ""}"'

    return re.sub(r"texts\[(\d+)\]", sentence, message)


def _joined(unit: Unit, nodes: list[list[list[str]]], k: int) -> str:
    """The unit's text with each sentence's ``k``-th candidate (its best where it
    has fewer); a text with nothing to translate as it came."""
    if not any(nodes):
        return unit.text
    filled = [
        p.join([c[k] if k < len(c) else c[0] for c in node])
        for p, node in zip(unit.paragraphs, nodes, strict=True)
    ]
    return unit.markup.fill(filled) if unit.markup is not None else filled[0]


def answer(asked: Asked, units: list[Unit], found: list[list[str]], src: str) -> dict:
    """LibreTranslate's answer: ``translatedText``, and ``alternatives`` (the
    sentences' k-th candidates joined, without repeats; none for HTML, as in
    LibreTranslate) and ``detectedLanguage`` when asked for."""
    candidates = iter(found)
    texts, alternatives = [], []
    for unit in units:
        nodes = [[next(candidates) for _ in p.sentences] for p in unit.paragraphs]
        text = _joined(unit, nodes, 0)
        others: list[str] = []
        for k in range(1, 0 if asked.html else asked.alternatives + 1):
            other = _joined(unit, nodes, k)
            if other.strip() and other != text and other not in others:
                others.append(other)
        texts.append(text)
        alternatives.append(others)
    out: dict[str, Any] = {"translatedText": texts if asked.batch else texts[0]}
    if asked.auto:
        detected = {"confidence": 100.0, "language": src}
        out["detectedLanguage"] = [detected] * len(texts) if asked.batch else detected
    if asked.alternatives > 0:
        out["alternatives"] = alternatives if asked.batch else alternatives[0]
    return out


def _body_schema() -> dict[str, Any]:
    schema = LibreTranslateRequest.model_json_schema()
    content = {kind: {"schema": schema} for kind in ("application/json", *FORM_TYPES)}
    return {"requestBody": {"required": True, "content": content}}


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 403, 429, 500)
}


def libretranslate_router(engine: Engine, timeout_s: float) -> APIRouter:
    """LibreTranslate's routes for ``engine`` (to include under ``PREFIX``)."""
    router = APIRouter(tags=[TAG])
    pair = language_pair(engine)
    splitter = pair[0] if pair else "en"

    @router.post(
        "/translate",
        response_model=LibreTranslateResponse,
        response_model_exclude_none=True,
        responses=ERRORS,
        openapi_extra=_body_schema(),
        summary="Translate",
    )
    async def translate(request: Request) -> Any:
        """Translate ``q`` (a string, or a list of strings) as LibreTranslate does;
        ``format`` html keeps the markup; ``alternatives``: that many others."""
        try:
            fields = await read_fields(request)
            check_key(request, fields.get("api_key"))
            asked = check_request(fields, engine)
            # off the event loop: parsing and splitting take up to a second
            units = await asyncio.to_thread(units_of, asked, engine, splitter)
            sentences = [s for u in units for p in u.paragraphs for s in p.sentences]
            n = 1 if asked.html else asked.alternatives + 1
            found = await translate_sentences(request, engine, sentences, n, timeout_s)
            return answer(asked, units, found, splitter)
        except LibreError as err:
            return _error(err.status, str(err))
        except ClientGone:
            return _error(ABANDONED, "the client closed the request")
        except Busy as err:
            return _error(429, f"Slowdown: the server is busy ({err}); try again soon")
        except TimedOut as err:
            return _error(500, f"Cannot translate text: {err} (timeout_s)")
        except Exception as err:  # a bug in this request: the others go on
            log.error("error while answering %s", request.url.path, exc_info=err)
            return _error(
                500,
                f"Cannot translate text: internal error ({type(err).__name__}), "
                "logged on the server",
            )

    @router.get("/languages", response_model=list[Language], summary="Languages")
    async def get_languages() -> Any:
        """The languages, each with the codes it translates into (LibreTranslate's
        ``/languages``): this model's one pair."""
        return languages(engine)

    return router


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)
