"""What a request may hold and what an answer holds (pydantic; the OpenAPI schemas
at ``/docs``).

Requests are strict: unknown fields, a string where a number goes, a number where a
string goes are refused (422), never coerced. Nothing in a request names a file or a
checkpoint: the server's model is fixed when it starts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_BEAM = 32  # a request's beam_size at most
MAX_NBEST = 10  # a request's nbest at most


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TranslateRequest(Request):
    """Texts to translate (at most ``max_texts``, each at most ``max_input_pieces``
    pieces, none blank); ``beam_size`` None: the server's; ``nbest`` alternatives
    per text (beam search with at least that many beams)."""

    texts: list[str] = Field(min_length=1, examples=[["the small blue chairs"]])
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    nbest: int = Field(1, ge=1, le=MAX_NBEST)


class AttentionRequest(Request):
    """One text; ``reference`` forces the model through that translation instead of
    its own; ``attribution`` adds gradient × input beside the attention;
    ``beam_size`` and ``nbest`` as for ``/translate`` (the attention is of the best)."""

    text: str = Field(examples=["the small blue chairs"])
    reference: str | None = None
    attribution: bool = False
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    nbest: int = Field(1, ge=1, le=MAX_NBEST)


class Candidate(BaseModel):
    text: str
    score: float  # the search's score (length-normalised log-probability)


class TranslateResponse(BaseModel):
    translations: list[str]  # the best per text, in order
    nbest: list[list[Candidate]]  # per text its alternatives, best first


class Word(BaseModel):
    text: str
    pieces: list[int]  # the word's piece indices in src_tokens / tgt_tokens


class AttentionResponse(BaseModel):
    """Piece tokens (``</s>`` last on both sides); weights ``(T, S)``: rows target
    pieces, columns source pieces; heads ``(H, T, S)`` for multi-head attention;
    self_attention ``(layers, heads, S, S)`` when the encoder has it; links Pharaoh
    ``i-j`` (source word, target word; each target word to its strongest source
    word), piece_links the same over pieces; attribution ``(T, S)`` and its Spearman
    correlation with the weights when asked for."""

    text: str
    translation: str
    forced: bool  # the target is the given reference, not the model's translation
    nbest: list[Candidate]  # the search's alternatives, best first ([] when forced)
    src_tokens: list[str]
    tgt_tokens: list[str]
    src_words: list[Word]
    tgt_words: list[Word]
    weights: list[list[float]]
    heads: list[list[list[float]]] | None = None
    self_attention: list[list[list[list[float]]]] | None = None
    links: str
    piece_links: str
    attribution: list[list[float]] | None = None
    spearman: float | None = None
    caveat: str


class ErrorResponse(BaseModel):
    error: str  # one line: what was wrong and how to fix it
