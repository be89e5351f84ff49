"""The whole model: encoder, bridge and decoder, and ``build_model`` from the config.

Shapes: ``B`` batch, ``S`` source length, ``T`` target length, ``V`` target vocabulary.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from seq2seq.config import (
    AttentionType,
    Bridge,
    DecoderStyle,
    ModelConfig,
    Normalizer,
)
from seq2seq.config_checks import check_model
from seq2seq.model.attention import NoAttention, build_attention
from seq2seq.model.bahdanau import BahdanauDecoder
from seq2seq.model.decoder import Decoder
from seq2seq.model.decoder_state import DecoderState
from seq2seq.model.deep_gru import DeepGRU
from seq2seq.model.encoder import BRIDGES, BiGRUEncoder, EncoderOutput
from seq2seq.model.luong import LuongDecoder
from seq2seq.model.rnmt import RNMTDecoder
from seq2seq.model.self_attention import SelfAttentionStack

# The decoder styles (``decoder.style``), one module each; RNMT+'s decoder is the
# Luong style with ``decoder.context_to_layers`` (``decoder_class``).
DECODERS: dict[str, type[Decoder]] = {
    "bahdanau": BahdanauDecoder,
    "luong": LuongDecoder,
}


def decoder_class(style: DecoderStyle, context_to_layers: bool) -> type[Decoder]:
    """The class that builds ``style``'s decoder: ``RNMTDecoder`` for the Luong style
    with ``context_to_layers`` (another style refuses it when it is built)."""
    if context_to_layers and DecoderStyle(style) == DecoderStyle.luong:
        return RNMTDecoder
    return DECODERS[style]


class ModelOutput(NamedTuple):
    """logits ``(B, T, V)`` (``(N, V)`` given ``rows``; None given ``targets``);
    attention ``(B, T, S)`` (mean over heads for multi-head, zeros without
    attention); head_attention ``(B, heads, T, S)`` or None; loss, given
    ``targets``: the summed label-smoothed cross-entropy (``model/loss.py``);
    self_attention ``(B, layers, heads, S, S)``, the encoder's self-attention (rows:
    the querying source positions), given ``self_weights`` to a model with blocks,
    else None."""

    logits: Tensor | None
    attention: Tensor
    head_attention: Tensor | None
    loss: Tensor | None = None
    self_attention: Tensor | None = None


class Seq2Seq(nn.Module):
    """Encoder (+ self-attention blocks over its states) + bridge + decoder.
    ``encode``/``init_state``/``step`` serve search; ``forward`` is teacher forcing
    (optionally with scheduled sampling)."""

    def __init__(
        self,
        encoder: BiGRUEncoder,
        bridge: nn.Module,
        decoder: Decoder,
        self_attention: SelfAttentionStack | None = None,
    ):
        super().__init__()
        self.encoder = encoder
        self.bridge = bridge
        self.decoder = decoder
        # None: no module, so the parameters and their keys are as without blocks
        self.self_attention = self_attention

    def encode(
        self, src: Tensor, src_lengths: Tensor, src_mask: Tensor
    ) -> EncoderOutput:
        """src ``(B, S)``, src_lengths ``(B,)`` (CPU), src_mask ``(B, S)`` bool →
        ``EncoderOutput(memory (B, S, 2He), mask, final (B, L, Hd))``."""
        return self.encode_with_weights(src, src_lengths, src_mask)[0]

    def encode_with_weights(
        self, src: Tensor, src_lengths: Tensor, src_mask: Tensor, weights: bool = False
    ) -> tuple[EncoderOutput, Tensor | None]:
        """``encode``, and with ``weights`` the self-attention's ``(B, layers, heads,
        S, S)`` (None without blocks). The memory is the blocks' output; the bridge
        reads the GRU's final states, as without blocks."""
        memory, final = self.encoder(src, src_lengths)
        maps = None
        if self.self_attention is not None:
            memory, maps = self.self_attention(memory, src_mask, weights)
        return EncoderOutput(memory, src_mask, self.bridge(final[-1])), maps

    def init_state(self, enc: EncoderOutput) -> DecoderState:
        """The decoder's first state; attention keys are projected here, once."""
        return self.decoder.init_state(enc.memory, enc.mask, enc.final)

    def step(
        self, prev_tokens: Tensor, state: DecoderState
    ) -> tuple[Tensor, DecoderState, Tensor]:
        """prev_tokens ``(B,)`` → log_probs ``(B, V)``, new state, weights
        ``(B, S)``."""
        return self.decoder.step(prev_tokens, state)

    def forward(
        self,
        src: Tensor,
        src_lengths: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        sampling_ratio: float = 0.0,
        rows: Tensor | None = None,
        targets: Tensor | None = None,
        smoothing: float = 0.0,
        self_weights: bool = False,
    ) -> ModelOutput:
        """Teacher forcing over tgt_in ``(B, T)`` → ``ModelOutput``. With
        ``sampling_ratio`` p > 0, each (sentence, step) input is the previous
        prediction with probability p (scheduled sampling). ``rows`` (flat target
        positions, ``Batch.tgt_rows``): logits ``(N, V)`` for those positions only.
        ``targets`` (``Batch.flat_targets()`` with ``rows``): the loss instead of the
        logits, computed without the whole ``(N, V)`` logits when they are large.
        ``self_weights``: also the encoder's self-attention weights (for pictures;
        training never asks for them)."""
        enc, maps = self.encode_with_weights(src, src_lengths, src_mask, self_weights)
        state = self.init_state(enc)
        out = self.decoder(tgt_in, state, sampling_ratio, rows, targets, smoothing)
        return ModelOutput(*out, self_attention=maps)

    @property
    def attends(self) -> bool:
        """Whether the decoder reads the source through an attention (not ``none``)."""
        return not isinstance(self.decoder.attention, NoAttention)

    def compile_steps(
        self, mode: str = "default", bucket: int = 0, scope: str = "all"
    ) -> list[str]:
        """Have torch.compile compile the steps this model takes by hand at their
        first call (once for all batch shapes). ``scope="all"``: the body of the
        decoder's teacher-forcing step loop and each ``DeepGRU``'s time step;
        ``"recurrence"``: only the steps of the ``DeepGRU`` recurrences without layer
        norm (``model/deep_gru_loop.py``). Returns what compiles, empty when nothing
        is stepped by hand (``nn.GRU`` runs whole sequences in one call). ``mode``:
        torch.compile's ``"default"`` or ``"reduce-overhead"`` (CUDA graphs), under
        which the decoder loop's batch and source length are padded to multiples of
        ``bucket`` (0: none) so that few graphs are recorded."""
        if mode not in ("default", "reduce-overhead"):
            raise ValueError(f"compile mode {mode!r}: use default or reduce-overhead")
        if scope not in ("all", "recurrence"):
            raise ValueError(f"compile scope {scope!r}: use all or recurrence")
        parts = []
        if scope == "all" and self.decoder.has_step_loop:
            self.decoder.compile_loop = True
            self.decoder.compile_mode = mode
            self.decoder.loop_bucket = bucket
            parts.append("the decoder's step loop")
        deep = [
            n
            for n, m in self.named_modules()
            if isinstance(m, DeepGRU) and (scope == "all" or not m.layer_norm)
        ]
        for name in deep:
            self.get_submodule(name).compile_mode = mode
        if deep:
            parts.append(f"the deep GRU time steps ({', '.join(deep)})")
        return parts

    def eager_steps(self) -> None:
        """Undo ``compile_steps``: every step runs eagerly again (benchmarks time
        one model both ways)."""
        self.decoder.compile_loop = False
        for module in self.modules():
            if isinstance(module, DeepGRU):
                module.compile_mode = None


def validate_model_config(cfg: ModelConfig) -> DecoderStyle:
    """Raise ``ConfigValueError`` on a bad size, rate or pairing (the checks of
    ``seq2seq-train``, for Python callers); return the decoder style."""
    check_model(cfg)
    return DecoderStyle(cfg.decoder.style or cfg.attention.style)


def init_weights(model: nn.Module) -> None:
    """Uniform ±0.1 for every parameter, orthogonal recurrent matrices (per gate), zero
    biases and padding embeddings, layer-norm gains at 1. Deterministic under
    ``torch.manual_seed``."""
    for name, param in model.named_parameters():
        if "bias" in name:
            nn.init.zeros_(param)
        elif ".norm_" in name:  # DeepGRU's layer-norm gains
            nn.init.ones_(param)
        elif "weight_hh" in name:
            for gate in param.data.chunk(3, dim=0):  # GRU gates r, z, n
                nn.init.orthogonal_(gate)
        else:
            nn.init.uniform_(param, -0.1, 0.1)
    for module in model.modules():
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()


def build_self_attention(
    cfg: ModelConfig, encoder: BiGRUEncoder
) -> SelfAttentionStack | None:
    """``model.encoder.self_attention``'s blocks, or None for 0 layers. The
    feed-forward size defaults to 4 × the state size, the Transformer's ratio
    (Vaswani et al.: 512 → 2048), which RNMT+'s cascaded encoder kept."""
    sa = cfg.encoder.self_attention
    if sa.layers == 0:
        return None
    size = encoder.output_size
    # nn.Linear draws its default weights as it is made; init_weights redraws them
    # all, so the construction's draws are kept off the global generator: at one
    # seed every other parameter is drawn as in the model without blocks
    with torch.random.fork_rng(devices=[]):
        return SelfAttentionStack(
            size,
            sa.layers,
            sa.heads,
            sa.ffn or 4 * size,
            dropout=sa.dropout,
            attention_dropout=sa.attention_dropout,
            qk_norm=sa.qk_norm,
        )


def build_model(
    model_cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int
) -> Seq2Seq:
    """Build and initialise a ``Seq2Seq`` from ``ModelConfig``; the decoder style is
    ``decoder.style or attention.style``. Raises ``ConfigValueError`` (a
    ``ValueError``) on bad values."""
    cfg = model_cfg
    style = validate_model_config(cfg)
    encoder = BiGRUEncoder(
        src_vocab_size,
        cfg.emb_dim,
        cfg.encoder.hidden_size,
        layers=cfg.encoder.layers,
        dropout=cfg.encoder.dropout,
        emb_dropout=cfg.emb_dropout,
        layer_norm=cfg.layer_norm,
        transition_depth=cfg.encoder.transition_depth,
        residual=cfg.residual,
    )
    hd = cfg.decoder.hidden_size
    bridge = BRIDGES[Bridge(cfg.bridge)](encoder.output_size, hd, cfg.decoder.layers)
    attention = build_attention(
        AttentionType(cfg.attention.type),
        hd,
        encoder.output_size,
        cfg.attention.dim,
        cfg.attention.heads,
        Normalizer(cfg.attention.normalizer),
    )
    decoder = decoder_class(style, cfg.decoder.context_to_layers)(
        tgt_vocab_size,
        cfg.emb_dim,
        hd,
        attention,
        layers=cfg.decoder.layers,
        dropout=cfg.decoder.dropout,
        emb_dropout=cfg.emb_dropout,
        word_dropout=cfg.word_dropout,
        tie_embeddings=cfg.tie_embeddings,
        input_feeding=cfg.decoder.input_feeding,
        layer_norm=cfg.layer_norm,
        transition_depth=cfg.decoder.transition_depth,
        residual=cfg.residual,
        context_to_layers=cfg.decoder.context_to_layers,
    )
    model = Seq2Seq(encoder, bridge, decoder, build_self_attention(cfg, encoder))
    init_weights(model)
    if model.self_attention is not None and cfg.encoder.self_attention.zero_init_out:
        model.self_attention.start_as_identity()
    return model
