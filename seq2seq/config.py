"""Typed configuration schemas, registered in Hydra's ConfigStore.

Every YAML file in ``configs/`` is validated against these dataclasses, so a typo in
an override (``trainer.max_epoch=3``) is an error instead of a silent no-op, and every
choice is an ``Enum``: ``decode.stop=bset`` fails when Hydra composes the config and
names the allowed values. The dataclass is the one place of each default; the YAML
files set only what differs. What a type cannot say (ranges, settings that must agree)
``config_checks.py`` checks right after composition. Modules never read these objects
directly; only the builders and the entry points do.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# The packaged Hydra configs (``configs/`` beside the package).
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


class Choice(str, Enum):
    """A config choice: an Enum whose members compare, hash and print as their string
    value (``Stop.best == "best"``), so YAML, checkpoints and logs keep plain strings.
    Member names equal their values: OmegaConf converts by name."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def _missing_(cls, value: object) -> None:
        """``Stop("bset")`` (a library call with a plain string): name the choices."""
        choices = ", ".join(member.value for member in cls)
        raise ValueError(
            f"{value!r} is not a valid {cls.__name__}: choose one of {choices}"
        )


def choice(name: str, *values: str) -> type[Choice]:
    """A ``Choice`` Enum named ``name`` whose members are ``values``."""
    return Choice(name, [(v, v) for v in values], module=__name__, qualname=name)


Corpus = choice("Corpus", "phrasebook", "multi30k", "hub", "local")
# Every corpus is read as these three splits (data/corpus.py).
Split = choice("Split", "train", "validation", "test")
# seq2seq-distill's training split: the teacher's translations alone, or beside the
# original pairs
DistillMode = choice("DistillMode", "replace", "add")
PieceModel = choice("PieceModel", "unigram", "bpe")
AttentionType = choice(
    "AttentionType",
    "bahdanau",
    "luong_dot",
    "luong_general",
    "luong_concat",
    "multihead",
    "none",
)
DecoderStyle = choice("DecoderStyle", "bahdanau", "luong")
# What turns attention scores into weights (model/attention.py): softmax, or the
# sparse sparsemax / 1.5-entmax of the entmax package, which give exact zeros.
Normalizer = choice("Normalizer", "softmax", "sparsemax", "entmax15")
Bridge = choice("Bridge", "bridge", "zero")
OptimizerName = choice("OptimizerName", "adam", "adamw")
Schedule = choice("Schedule", "plateau", "constant", "warmup", "budget")
# Beam search's stop rule (see decoding/search.py).
Stop = choice("Stop", "bound", "best")
# Decay of the teacher-forcing ratio (scheduled sampling).
Sampling = choice("Sampling", "none", "linear", "exponential", "inverse_sigmoid")
# auto: training in bf16 autocast on CUDA and on CPUs that compute bf16 natively (AMX,
# AVX512-BF16), else fp32; decoding in bf16 on CUDA, fp32 on CPU. fp16: CUDA only.
Precision = choice("Precision", "auto", "fp32", "bf16", "fp16")
# The search's vocabulary projection (decoding/search.py): auto: on CPU, the fastest
# of fp32, int8 and (where native) bf16, timed once; else the model's precision.
VocabPrecision = choice("VocabPrecision", "auto", "fp32", "bf16", "int8")
NonFinite = choice("NonFinite", "skip", "stop")
# torch.compile's mode for the step loop (trainer.compile): default, or
# reduce-overhead (CUDA graphs on CUDA), spelled as torch spells them.
CompileMode = choice("CompileMode", "default", "reduce-overhead")
# Which attention seq2seq-align shows: the decoder's over the source, or the
# encoder's self-attention (model.encoder.self_attention.layers > 0).
AttentionView = choice("AttentionView", "cross", "self")
AlignFormat = choice("AlignFormat", "png", "html", "terminal", "pharaoh", "json", "npy")
# How a weight becomes a colour (alignment/scale.py): linear, or a power (w^1/2) or
# log scale (six decades) that shows the small weights of a saturated map.
WeightScale = choice("WeightScale", "linear", "power", "log")
# How two directions' word alignments combine (alignment/symmetrize.py): three rules
# over their links, or `geometric` over their attention.
Symmetrize = choice(
    "Symmetrize", "intersection", "union", "grow-diag-final-and", "geometric"
)


class Metric(Choice):
    """What early stopping and the plateau schedule watch."""

    bleu = "bleu"
    chrf = "chrf"
    ter = "ter"
    loss = "loss"

    @property
    def mode(self) -> str:
        """``max`` when higher is better, ``min`` for the loss and TER."""
        return "min" if self in (Metric.loss, Metric.ter) else "max"


@dataclass
class PhrasebookConfig:
    """Sizes and seed of the built-in English–French corpus (either direction)."""

    train_size: int = 20000
    validation_size: int = 500
    test_size: int = 500
    seed: int = 1234


@dataclass
class AlignmentFiles:
    """Word links per split, one Pharaoh line (``i-j`` sure, ``i?j`` possible, over
    whitespace words, source-target of the run's direction) per pair of the split as
    the corpus holds it. A file replaces the corpus's own links (the phrasebook's
    gold): ``train`` guides the attention (``trainer.guided_alignment``; links from an
    external aligner or from ``seq2seq-align``), ``validation`` / ``test`` are the
    gold that AER is scored against. None: the corpus's links, if it has any."""

    train: str | None = None
    validation: str | None = None
    test: str | None = None


@dataclass
class SplitNames:
    """The corpus's own name of each split (a hub dataset's split, a local file's
    stem); None: the usual names (``validation`` also as ``valid``, ``val``,
    ``dev``). WMT14 keeps newstest2013 as ``validation`` and newstest2014 as
    ``test``; ``data.splits.test=test_2017_flickr`` picks another test set."""

    train: str | None = None
    validation: str | None = None
    test: str | None = None


@dataclass
class DataConfig:
    """Where the parallel corpus comes from and how it is batched."""

    name: Corpus = Corpus.phrasebook
    hub_id: str | None = None  # e.g. bentrevett/multi30k, wmt14
    hub_config: str | None = None  # the hub dataset's configuration, e.g. de-en
    local_dir: str | None = None
    splits: SplitNames = field(default_factory=SplitNames)
    src_lang: str = "en"
    tgt_lang: str = "fr"
    # pairs with more pieces on either side are filtered (and counted)
    max_len: int = 100
    batch_tokens: int = 4096  # padded tokens per batch, max(source, target) side
    # prepared corpora and tokenizers, keyed by content hash
    cache_dir: str = "data/cache"
    phrasebook: PhrasebookConfig = field(default_factory=PhrasebookConfig)
    alignments: AlignmentFiles = field(default_factory=AlignmentFiles)


@dataclass
class TokenizerConfig:
    """SentencePiece settings."""

    vocab_size: int = 8000
    model_type: PieceModel = PieceModel.unigram
    joint: bool = True  # one model for both sides, or one per side
    character_coverage: float = 1.0
    # SentencePiece trains on a seeded sample of this many training sentences (both
    # sides together when joint); a corpus with fewer trains on all of them, in order.
    train_sentences: int = 1_000_000
    # Subword regularization (data/sampling.py): each training epoch cuts the training
    # split into pieces drawn with probability ∝ P(segmentation) ** sampling_alpha over
    # all segmentations (SentencePiece's enable_sampling, nbest_size=-1). Small: more
    # varied, shorter pieces; large: close to the cached pieces. 0: off, the cached
    # pieces. unigram only. Validation, test, decoding and the cache never sample.
    sampling_alpha: float = 0.0


@dataclass
class AttentionConfig:
    """Attention type and the decoder style it classically pairs with."""

    type: AttentionType = AttentionType.bahdanau
    # the decoder style this attention classically pairs with
    style: DecoderStyle = DecoderStyle.bahdanau
    # hidden size of the additive / concat scorer (default: decoder)
    dim: int | None = None
    heads: int = 4  # multihead only
    # scores → weights: softmax, or sparsemax / entmax15 (exact zeros; Peters et al.)
    normalizer: Normalizer = Normalizer.softmax


@dataclass
class SelfAttentionConfig:
    """Transformer blocks over the bi-GRU's states (model/self_attention.py; RNMT+'s
    cascaded encoder). 0 layers: none, the plain bi-GRU encoder."""

    layers: int = 0
    heads: int = 4  # must divide the encoder's output size, 2 * encoder.hidden_size
    # inner size of the position-wise feed-forward layer; None: 4 * 2 * hidden_size,
    # the Transformer's ratio (d_ff = 4 d_model)
    ffn: int | None = None
    dropout: float = 0.1  # on each block's sublayer outputs (residual dropout)
    attention_dropout: float = 0.0  # on the attention weights, in training
    qk_norm: bool = False  # layer norm on each head's queries and keys
    # attention output projection and feed-forward output start at 0: each block
    # starts as the identity
    zero_init_out: bool = False


@dataclass
class EncoderConfig:
    hidden_size: int = 256  # per direction
    layers: int = 2
    dropout: float = 0.2  # between GRU layers
    # GRU transitions per time step and layer (Nematus' deep transition); 1: plain GRU
    transition_depth: int = 1
    self_attention: SelfAttentionConfig = field(default_factory=SelfAttentionConfig)


@dataclass
class DecoderConfig:
    style: DecoderStyle | None = None  # None: the attention's classic style
    hidden_size: int = 512
    layers: int = 1
    input_feeding: bool = True  # Luong style only
    dropout: float = 0.2  # on the output layer's input
    # GRU transitions per time step and layer (Nematus' deep transition); 1: plain GRU
    transition_depth: int = 1
    # RNMT+: attend with the bottom layer, feed its context to every layer above
    # (Luong style, no input feeding, 2+ layers)
    context_to_layers: bool = False


@dataclass
class ModelConfig:
    emb_dim: int = 256
    emb_dropout: float = 0.2
    word_dropout: float = 0.0  # probability of replacing a whole input token by UNK
    bridge: Bridge = Bridge.bridge
    tie_embeddings: bool = False
    # Per-gate layer normalization in every encoder and decoder GRU (RNMT+)
    layer_norm: bool = False
    # Residual connections from the third GRU layer up, encoder and decoder (RNMT+)
    residual: bool = False
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)
    attention: AttentionConfig = field(default_factory=AttentionConfig)


@dataclass
class OptimConfig:
    name: OptimizerName = OptimizerName.adam
    lr: float = 1e-3
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.0
    # the encoder's self-attention blocks (model.encoder.self_attention) in their own
    # parameter group: their learning rate is lr × this scale, and it ramps up
    # linearly over self_attention_warmup_steps on top of the schedule's own warm-up
    self_attention_lr_scale: float = 1.0
    self_attention_warmup_steps: int = 0


@dataclass
class SchedulerConfig:
    name: Schedule = Schedule.plateau
    factor: float = 0.5  # plateau: multiply the lr by this
    patience: int = 2  # plateau: validations without improvement
    min_lr: float = 1e-5
    # warm-up (linear) before the schedule; `warmup`: then 1/sqrt decay
    warmup_steps: int = 0


@dataclass
class DecodeConfig:
    beam_size: int = 1  # 1 = greedy
    length_penalty: float = 1.0  # GNMT alpha
    # maximum output length a * |src| + b (pieces with EOS). a None: seq2seq-train fits
    # it on the training pairs, the smallest a whose limit covers max_len_coverage of
    # their targets, and saves it in the checkpoint (the exact stop rule searches up to
    # the limit, so a tight one is faster); elsewhere None reads as 1.5
    max_len_a: float | None = None
    max_len_b: int = 5
    max_len_coverage: float = 0.999
    n_best: int = 1
    # beam search: when a sentence is done. bound: no live hypothesis can still beat
    # the finished ones at any remaining length (exact). best: its best hypothesis
    # right now has ended (the rule of JoeyNMT and OpenNMT-py; faster, may differ).
    stop: Stop = Stop.bound
    # GNMT coverage penalty beta (beam search; 0: off): rewards finished hypotheses
    # whose attention has covered the whole source, against under-translation
    coverage_penalty: float = 0.0
    # padded source tokens per decoding batch (validation, evaluate, translate, align);
    # training batches are data.batch_tokens. Chosen by
    # scripts/benchmarks/bench_decode.py.
    batch_tokens: int = 4096
    # the search's vocabulary projection (most of a step's FLOPs) in fp32, bf16 or
    # int8 (CPU only), each row's best candidates recomputed in fp32; auto: on CPU the
    # fastest of them by a one-off timing of the projection, else fp32 (under
    # autocast, as on CUDA, autocast decides). Its scores are not fp32's and its speed
    # depends on the CPU, so it is opt-in (docs/performance.md).
    vocab_precision: VocabPrecision = VocabPrecision.fp32


@dataclass
class SamplingConfig:
    """Scheduled sampling: decay of the teacher-forcing ratio with the step."""

    schedule: Sampling = Sampling.none
    # linear: steps to reach min_ratio; exponential: decay constant; inverse sigmoid: k
    k: float = 1000.0
    min_ratio: float = 0.75  # lowest teacher-forcing ratio


@dataclass
class TrainerConfig:
    seed: int = 42
    device: str = "auto"  # auto | cpu | cuda
    precision: Precision = Precision.auto  # auto: bf16 where native (CUDA, AMX, ...)
    threads: int | None = None  # torch CPU threads; None leaves torch's default
    # torch.compile of the steps taken by hand (training/runtime.py, compile_scope):
    # auto: the deep GRU's recurrent steps (deep transition without layer norm) on a
    # CPU with a C++ compiler, where they win; true: also the decoder's step loop body
    # (Bahdanau, Luong with input feeding) and layer-normed deep GRU steps, on any
    # device; false: nothing (every step eager). Compiled at the first step.
    compile: str = "auto"
    # torch.compile's mode for it: default, or reduce-overhead (CUDA graphs, one
    # recorded per loop shape; on CPU the same as default)
    compile_mode: CompileMode = CompileMode.default
    # under reduce-overhead: the loop's batch size and source length padded up to
    # multiples of this (masked; 0: no padding), so that few graphs are recorded
    compile_bucket: int = 8
    max_epochs: int = 20
    max_steps: int | None = None
    max_minutes: float | None = None  # wall-clock budget for training
    label_smoothing: float = 0.1
    # MB of float32 logits above which a batch's output layer and loss run fused, in
    # chunks of rows of this size (at most 32 MB on CPU): the whole (tokens ×
    # vocabulary) logits never exist (32k pieces × 4,096 tokens: 1 GB with their
    # gradient). 0: never fused
    loss_chunk_mb: int = 128
    # weight of the gold-alignment loss on the attention (needs gold links; 0: off)
    guided_alignment: float = 0.0
    # R-Drop weight alpha (Liang et al., 2021; 0: off): each batch runs twice with
    # other dropout masks, and the objective adds alpha/2 times the symmetric KL of
    # the two predictions to their mean cross-entropy (the paper's objective halved)
    rdrop: float = 0.0
    # exponential moving average of the weights (0: off): validation, best.pt and every
    # score use the average, which follows the trained weights with this decay after
    # a warm-up (0.999 averages about the last thousand steps; training/ema.py)
    ema_decay: float = 0.0
    clip_grad_norm: float | None = 5.0
    accumulate: int = 1
    log_every: int = 50
    valid_every: int | None = None  # steps; validation also runs at every epoch end
    valid_max_sentences: int | None = None  # decode only the first N validation pairs
    # beam size for validation (1: greedy, cheap); null: decode.beam_size
    valid_beam_size: int | None = None
    early_stopping_metric: Metric = Metric.bleu
    patience: int | None = None  # validations without improvement before stopping
    nonfinite: NonFinite = NonFinite.skip
    alignment_samples: int = 4  # validation sentences rendered as heatmaps
    # draw each sample's occlusion beside its attention (a forced pass per sample
    # of W + 1 rows, W its source words) and log their mean Spearman rho
    alignment_occlusion: bool = False
    keep_last: int = 0  # also keep the last N validated checkpoints, for averaging
    resume: bool = False
    resume_from: str | None = None
    teacher_forcing: SamplingConfig = field(default_factory=SamplingConfig)
    progress: bool = True


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    evaluate_test: bool = True  # score the best checkpoint on the test split at the end


@dataclass
class PrepareConfig(TrainConfig):
    """``seq2seq-prepare`` reads ``data`` and ``tokenizer`` only; the training
    groups are here so that ``experiment=NAME`` composes and prepares exactly the
    cache ``seq2seq-train experiment=NAME`` will read."""

    # hash every file of a cache found, whatever its time (a copied or suspect
    # cache); a file that differs is named and the cache rebuilt
    verify: bool = False


@dataclass
class PhrasebookOverrides:
    """``PhrasebookConfig`` fields to change; None keeps the checkpoint's."""

    train_size: int | None = None
    validation_size: int | None = None
    test_size: int | None = None
    seed: int | None = None


@dataclass
class DataOverrides:
    """The corpus fields of ``DataConfig`` that ``seq2seq-evaluate`` may change on the
    checkpoint's (``data.local_dir=DIR data.name=local``): typed, so a typo fails like
    anywhere else; None keeps the checkpoint's value."""

    name: Corpus | None = None
    hub_id: str | None = None
    hub_config: str | None = None
    local_dir: str | None = None
    splits: SplitNames = field(default_factory=SplitNames)
    src_lang: str | None = None
    tgt_lang: str | None = None
    phrasebook: PhrasebookOverrides = field(default_factory=PhrasebookOverrides)
    alignments: AlignmentFiles = field(default_factory=AlignmentFiles)


@dataclass
class TwoWayReadout:
    """How two directions' word attention becomes links (alignment/twoway.py). The
    defaults are the best on the phrasebook's validation split over two seeds of
    `bahdanau` (docs/results.md, "Attention mixed with a lexicon"); 0 / 0 / null is
    the plain attention and geometric."""

    # share of an IBM Model 1 lexicon (EM on the corpus's train split) in a log-linear
    # mix with each direction's attention, before any rule; 0: attention alone
    lexicon: float = 0.4
    lexicon_iterations: int = 10  # EM steps
    # geometric: a target word's best source word links only at weight >= floor
    floor: float = 0.2
    add: float | None = 0.3  # geometric: every word pair at weight >= add links too


@dataclass
class DecodeOptions:
    """How a trained model decodes for ``seq2seq-evaluate``, ``-translate``, ``-align``
    and ``Translator.from_checkpoint``: the one declaration of the settings they share
    (the commands' schemas inherit it, so the keys stay top-level: ``beam_size=5``).
    A decoding field None keeps the checkpoint's ``decode`` value."""

    beam_size: int | None = None  # decode.beam_size
    length_penalty: float | None = None  # decode.length_penalty
    stop: Stop | None = None  # beam search's stop rule (decode.stop)
    coverage_penalty: float | None = None  # decode.coverage_penalty
    batch_tokens: int | None = None  # None: the checkpoint's decode.batch_tokens
    vocab_precision: VocabPrecision | None = None  # decode.vocab_precision
    device: str = "auto"
    precision: Precision = Precision.auto  # decoding autocast (auto: bf16 on CUDA)

    def decode_overrides(self) -> dict[str, Any]:
        """The fields that are ``DecodeConfig``'s too, by name (None included)."""
        decode = {f.name for f in fields(DecodeConfig)}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in decode}

    @classmethod
    def of(cls, cfg: Any) -> DecodeOptions:
        """The options of a command's config (any node with these keys)."""
        return fields_of(cls, cfg)


T = TypeVar("T")


def fields_of(cls: type[T], cfg: Any) -> T:
    """A ``cls`` (a dataclass) of the values of the same names in ``cfg`` (a command's
    config, say), carried by name: a new field of ``cls`` needs no copying by hand."""
    return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})


@dataclass
class EvaluateConfig(DecodeOptions):
    # a path, or a list of paths ([a.pt,b.pt]): an ensemble of one vocabulary
    checkpoint: Any = MISSING
    split: Split = Split.test
    lowercase: bool = False  # also report lowercased BLEU (sacreBLEU -lc, 13a)
    # also report BLEU on the literature's scale (multi-bleu.perl on lowercased,
    # normalized, Moses-tokenized text; decoding/scores.py)
    paper_bleu: bool = False
    alignment: bool = False  # report AER when the corpus has gold alignments
    # alignment: a model trained the other way (tgt->src) on the same corpus (or a
    # list: an ensemble); AER also of both directions combined (intersection, union,
    # grow-diag-final-and, geometric)
    reverse_checkpoint: Any = None
    # with reverse_checkpoint: lexicon, floor and add of the two-way readout
    two_way: TwoWayReadout = field(default_factory=TwoWayReadout)
    # the checkpoint's corpus settings with these on top (another corpus or folder)
    data: DataOverrides = field(default_factory=DataOverrides)


@dataclass
class TranslateConfig(DecodeOptions):
    # a path, or a list of paths ([a.pt,b.pt]): an ensemble of one vocabulary
    checkpoint: Any = MISSING
    input: str | None = None  # a file; stdin when unset
    output: str | None = None  # a file; stdout when unset
    max_input_pieces: int = 250  # longer lines are truncated, with a warning
    # a file of target prefixes, one per input line (blank: none): each translation
    # starts with its line's prefix and continues it
    prefixes: str | None = None


@dataclass
class DistillConfig(DecodeOptions):
    """``seq2seq-distill``: a teacher's translations of a split as a corpus folder."""

    # a path, or a list of paths ([a.pt,b.pt]): an ensemble of one vocabulary
    checkpoint: Any = MISSING
    output: str = MISSING  # the distilled corpus folder (its chunks/ resume a run)
    split: Split = Split.train  # the split whose sources are translated
    mode: DistillMode = DistillMode.replace  # replace: distilled targets; add: both
    chunk_sentences: int = 1000  # sentences a chunk file: what a killed run keeps
    # the checkpoint's corpus settings with these on top (another corpus or folder)
    data: DataOverrides = field(default_factory=DataOverrides)


@dataclass
class ServeConfig(DecodeOptions):
    """``seq2seq-serve``'s settings and the one place of the server's defaults: the
    server's parts (``serve.engine.Limits``, ``serve.app.Serving``, ``Batcher``,
    ``BodyGuard``) take theirs from these fields, by name."""

    # a path, or a list of paths ([a.pt,b.pt]): an ensemble of one vocabulary
    checkpoint: Any = MISSING
    host: str = "127.0.0.1"  # this machine only; 0.0.0.0 serves every interface
    port: int = 8000  # 0: any free port (the start line names it)
    max_input_pieces: int = 250  # longer texts are refused (422)
    max_texts: int = 32  # texts per /translate request
    # gather the requests that come while a search runs into the next search
    batching: bool = True
    # how long a request that finds the model idle waits for others (0: none)
    max_wait_ms: float = 0.0
    batch_pieces: int = 2048  # source pieces of one gathered search at most
    max_queue: int = 256  # requests waiting at most; more are answered 429
    timeout_s: float = 30.0  # a request waiting and running longer is answered 503
    max_body_bytes: int = 1048576  # larger request bodies are answered 413
    # a model trained the other way (tgt->src) on the same corpus (or a list: an
    # ensemble): the page and /attention show its attention and both directions'
    # word links, combined by `symmetrize` through `two_way` as seq2seq-align does
    reverse_checkpoint: Any = None
    symmetrize: Symmetrize = Symmetrize.geometric
    two_way: TwoWayReadout = field(default_factory=TwoWayReadout)
    metrics: bool = True  # GET /metrics in Prometheus' text format
    cache_size: int = 256  # recent answers kept (LRU) and answered again; 0: none
    # the key clients send as "Authorization: Bearer KEY" (null: the environment's
    # SEQ2SEQ_API_KEY, else none); required to serve beyond this machine
    api_key: str | None = None
    allow_anonymous: bool = False  # serve beyond this machine without a key
    # origins whose pages may call the API (CORS), e.g. [https://example.org]
    cors_origins: list[str] = field(default_factory=list)


@dataclass
class KnockoutConfig:
    """What ``seq2seq-align`` knocks out: source words (indices of the whitespace
    words, from 0), cross-attention heads, encoder self-attention heads as
    ``[layer, head]`` pairs."""

    words: list[int] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    self_heads: list[list[int]] = field(default_factory=list)


@dataclass
class AlignConfig(DecodeOptions):
    # a path, or a list of paths ([a.pt,b.pt]): an ensemble of one vocabulary
    checkpoint: Any = MISSING
    text: str | None = None
    reference: str | None = None  # force-decode this translation instead of searching
    split: Split | None = None
    index: list[int] | None = None  # split: these pairs; None: the whole split
    references: bool = False  # split: force-decode its references (gold's words)
    format: AlignFormat = AlignFormat.png
    merge_subwords: bool = False
    words: bool = False  # pharaoh: links over whitespace words, no end-of-sentence
    shifted: bool = False  # words: read the step where the word is the decoder input
    threshold: float | None = None  # pharaoh: all links with weight >= threshold
    # pharaoh words: a model trained the other way (tgt->src) on the same corpus (or
    # a list: an ensemble); write both directions' links combined by `symmetrize`
    reverse_checkpoint: Any = None
    # geometric: the best on the phrasebook's validation split for every model pair
    # (docs/results.md, "Symmetrized alignments")
    symmetrize: Symmetrize = Symmetrize.geometric
    # with reverse_checkpoint: lexicon, floor and add of the two-way readout
    two_way: TwoWayReadout = field(default_factory=TwoWayReadout)
    # true (or gradient): gradient × input beside the attention; occlusion: how much
    # each written piece's log-probability drops without each source word; with
    # their Spearman correlation with the attention
    attribution: Any = False
    # decode and draw with these knocked out (decoding/knockout.py)
    knockout: KnockoutConfig = field(default_factory=KnockoutConfig)
    # cross: the decoder's attention over the source; self: the encoder's
    # self-attention (source on both axes), of layer `layer` (None: the last)
    view: AttentionView = AttentionView.cross
    layer: int | None = None  # view=self: the block, from 0
    head: int | None = None  # one head, from 0 (None: all heads and their mean)
    scale: WeightScale = WeightScale.linear  # png, terminal; html: the page's first
    output: str | None = None  # file or folder; default under the run directory
    device: str = "cpu"  # DecodeOptions' field, another default: one sentence runs fast
    # a folder: the corpus report of split= (report.html, sentences.tsv) instead of
    # format=; attribution occlusion unless attribution=true (docs/corpus_report.md)
    report: str | None = None


SCHEMAS: dict[str, type] = {
    "prepare_schema": PrepareConfig,
    "train_schema": TrainConfig,
    "evaluate_schema": EvaluateConfig,
    "translate_schema": TranslateConfig,
    "distill_schema": DistillConfig,
    "align_schema": AlignConfig,
    "serve_schema": ServeConfig,
}


def register_configs() -> None:
    """Register the top-level schemas; primary configs name them first."""
    store = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        store.store(name=name, node=schema)
