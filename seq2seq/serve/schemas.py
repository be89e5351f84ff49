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
MAX_TOP_K = 20  # a request's top_k at most


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TranslateRequest(Request):
    """Texts to translate (at most ``max_texts``, each at most ``max_input_pieces``
    pieces, none blank); ``beam_size`` None: the server's; ``nbest`` alternatives
    per text (beam search with at least that many beams)."""

    texts: list[str] = Field(min_length=1, examples=[["the small blue chairs"]])
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    nbest: int = Field(1, ge=1, le=MAX_NBEST)
    # per text a target prefix its translations start with (null or "": none)
    prefixes: list[str | None] | None = None


class KnockoutRequest(Request):
    """What to knock out (``decoding/knockout.py``): source ``words`` (indices of
    the text's whitespace words, from 0: masked from the attention, the rest
    renormalized), cross-attention ``heads`` (multi-head attention), encoder
    ``self_heads`` as ``[layer, head]`` pairs; several at once."""

    words: list[int] = Field(default_factory=list, max_length=256)
    heads: list[int] = Field(default_factory=list, max_length=64)
    self_heads: list[list[int]] = Field(default_factory=list, max_length=256)


class AttentionRequest(Request):
    """One text; ``reference`` forces the model through that translation instead of
    its own; ``attribution`` adds gradient × input beside the attention;
    ``beam_size`` and ``nbest`` as for ``/translate`` (the attention is of the best);
    ``prefix``: the translation continues it; ``knockout``: the translation and its
    attention of the model with those parts knocked out, and the change in the
    log-probability of the model's own translation; ``top_k``: each step's
    probability, entropy and ``top_k`` alternatives; ``occlusion``: how much each
    written piece's log-probability drops without each source word."""

    text: str = Field(examples=["the small blue chairs"])
    reference: str | None = None
    attribution: bool = False
    beam_size: int | None = Field(None, ge=1, le=MAX_BEAM)
    nbest: int = Field(1, ge=1, le=MAX_NBEST)
    prefix: str | None = None  # the translation starts with it (not with reference)
    # the same as target pieces (tgt_tokens' spelling), kept exactly as given: what
    # the page sends when an alternative is chosen (a text is encoded anew)
    prefix_pieces: list[str] | None = Field(None, max_length=1000)
    knockout: KnockoutRequest | None = None  # decode with these knocked out
    top_k: int = Field(0, ge=0, le=MAX_TOP_K)  # each step's k best pieces (0: none)
    occlusion: bool = False  # occlusion beside the attention (one model)


class Candidate(BaseModel):
    text: str
    score: float  # the search's score (length-normalised log-probability)


class TranslateResponse(BaseModel):
    translations: list[str]  # the best per text, in order
    nbest: list[list[Candidate]]  # per text its alternatives, best first


class Word(BaseModel):
    text: str
    pieces: list[int]  # the word's piece indices in src_tokens / tgt_tokens


class MapRecord(BaseModel):
    """A text, what the model was forced through, and the attention map between
    them: pieces and words of both sides, weights ``(T, S)`` (rows target pieces),
    heads ``(H, T, S)`` or None, Pharaoh links over words and over pieces."""

    text: str
    translation: str
    src_tokens: list[str]
    tgt_tokens: list[str]
    src_words: list[Word]
    tgt_words: list[Word]
    weights: list[list[float]]
    heads: list[list[list[float]]] | None = None
    links: str
    piece_links: str


class AttentionResponse(MapRecord):
    """Piece tokens (``</s>`` last on both sides); weights ``(T, S)``: rows target
    pieces, columns source pieces; heads ``(H, T, S)`` for multi-head attention;
    self_attention ``(layers, heads, S, S)`` when the encoder has it; links Pharaoh
    ``i-j`` (source word, target word; each target word to its strongest source
    word), piece_links the same over pieces; attribution ``(T, S)`` and its Spearman
    correlation with the weights when asked for."""

    forced: bool  # the target is the given reference, not the model's translation
    nbest: list[Candidate]  # the search's alternatives, best first ([] when forced)
    self_attention: list[list[list[list[float]]]] | None = None
    attribution: list[list[float]] | None = None
    spearman: float | None = None
    prefix: str | None = None  # the prefix the translation continues
    steps: list[Step] | None = None  # with top_k > 0, one per target piece (</s> last)
    knockout: KnockoutResult | None = None
    # occlusion (T, S): per written piece, its log-probability's drop (nats) when
    # each source word is knocked out, shared among the word's pieces (EOS column 0)
    occlusion: list[list[float]] | None = None
    # the Spearman ρ of each pair of the maps given: "attention~attribution",
    # "attention~occlusion", "attribution~occlusion"
    correlations: dict[str, float | None] | None = None
    # with a reverse model (seq2seq-serve reverse_checkpoint=...), else absent (the
    # route answers the fields set): its attention reading the pair the other way,
    # and both directions' word links
    reverse: ReverseAttention | None = None
    two_way: TwoWayLinks | None = None
    caveat: str


class ReverseAttention(MapRecord):
    """The reverse model forced through the typed text (``translation``) while
    reading the shown translation (``text``): ``src_tokens`` the translation's
    pieces, ``tgt_tokens`` the text's, ``</s>`` last; its links ``i-j``: a word of
    the translation, a word of the text."""


class TwoWayLinks(BaseModel):
    """Both directions' word links, in the forward orientation (``i-j``: source
    word, target word), as ``seq2seq-align reverse_checkpoint=... format=pharaoh
    words=true`` reads them: each direction's attention over words mixed with its
    lexicon (``readout``), its argmax links, and the two combined by ``rule``."""

    rule: str  # seq2seq-serve's symmetrize=
    readout: str  # the lexicon's share and geometric's thresholds (two_way.*)
    links: str  # the combined links
    forward_links: str
    reverse_links: str  # the reverse model's, transposed
    forward_attention: list[list[float]]  # (target words, source words), mixed
    reverse_attention: list[list[float]]  # the reverse model's, transposed


class Alternative(BaseModel):
    piece: str
    prob: float


class Step(BaseModel):
    """One target step of the shown translation: the piece written, its probability,
    the step's entropy (nats) and its most probable pieces."""

    piece: str
    prob: float
    entropy: float
    alternatives: list[Alternative]


class KnockoutResult(BaseModel):
    """What the knock-out changed: the model's own translation without it (same
    prefix), that translation's log-probability (with ``</s>``) with and without the
    knock-out, and the change (knocked minus intact)."""

    knocked_out: str  # in words: "word 2, head 1"
    original: str
    original_log_prob: float
    knocked_log_prob: float
    change: float


class ErrorResponse(BaseModel):
    error: str  # one line: what was wrong and how to fix it
