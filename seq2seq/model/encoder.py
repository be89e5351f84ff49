"""Source side: embeddings + bidirectional GRU over packed sequences, and the bridge.

Shapes: ``B`` batch, ``S`` source length, ``E`` embedding size, ``He`` encoder hidden
size per direction, ``L`` decoder layers, ``Hd`` decoder hidden size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.data.tokenizer import PAD_ID
from seq2seq.model.deep_gru import DeepGRU, build_rnn
from seq2seq.model.dropout import Dropout
from seq2seq.model.shape_buckets import linear_rows


class EncoderOutput(NamedTuple):
    """memory ``(B, S, 2He)`` (zeros at padding); mask ``(B, S)`` bool, True for real
    tokens; final ``(B, L, Hd)``, the decoder's initial hidden state from the bridge."""

    memory: Tensor
    mask: Tensor
    final: Tensor

    def select(self, index: Tensor) -> EncoderOutput:
        """Rows ``index`` of the batch."""
        return EncoderOutput(*(t.index_select(0, index) for t in self))


class BiGRUEncoder(nn.Module):
    """Embeddings (+ dropout) and a bidirectional GRU run over packed sequences (or,
    for a ``DeepGRU``, masked), so padding never enters the recurrence and a sentence
    encodes the same alone or in a padded batch."""

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_size: int,
        layers: int = 1,
        dropout: float = 0.0,
        emb_dropout: float = 0.0,
        layer_norm: bool = False,
        transition_depth: int = 1,
        residual: bool = False,
    ) -> None:
        """``layer_norm``, ``transition_depth`` and ``residual``: see ``DeepGRU``."""
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.emb_dropout = Dropout(emb_dropout)
        self.rnn = build_rnn(
            emb_dim,
            hidden_size,
            layers,
            dropout,
            True,
            layer_norm,
            transition_depth,
            residual,
        )
        self.layers = layers
        self.hidden_size = hidden_size
        self.output_size = 2 * hidden_size

    def forward(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src ``(B, S)`` long, src_lengths ``(B,)`` long (CPU) → memory ``(B, S, 2He)``
        and final states ``(layers, B, 2He)`` (last forward state ‖ last backward
        state, per layer)."""
        emb = self.emb_dropout(self.embedding(src))  # (B, S, E)
        if isinstance(self.rnn, DeepGRU):
            mask = torch.arange(src.size(1)) < src_lengths.cpu()[:, None]
            memory, h_n = self.rnn(emb, None, mask.to(src.device, non_blocking=True))
            return memory, self._finals(h_n)
        # Sorted by length here, as pack_padded_sequence(enforce_sorted=False) would,
        # but with the permutations made on the host and sent without waiting: its
        # own copies (sorted indices up, unsorted indices down) make the host wait.
        lengths, order = torch.sort(src_lengths.cpu(), descending=True)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        order, inverse = (i.to(src.device, non_blocking=True) for i in (order, inverse))
        packed = pack_padded_sequence(emb.index_select(0, order), lengths, True)
        out, h_n = self.rnn(packed)  # h_n (layers * 2, B, He), sorted order
        memory, _ = pad_packed_sequence(
            out, batch_first=True, total_length=src.size(1)
        )  # (B, S, 2He), sorted order
        memory, h_n = memory.index_select(0, inverse), h_n.index_select(1, inverse)
        return memory, self._finals(h_n)

    def _finals(self, h_n: Tensor) -> Tensor:
        """h_n ``(layers * 2, B, He)`` → ``(layers, B, 2He)``: per layer, the last
        forward state beside the last backward state."""
        h_n = h_n.view(self.layers, 2, h_n.size(1), self.hidden_size)
        return torch.cat([h_n[:, 0], h_n[:, 1]], dim=-1)


class LinearBridge(nn.Module):
    """``s₀ = tanh(W [h→_S; h←_1] + b)``: the top encoder layer's final forward and
    backward states → one initial hidden state per decoder layer."""

    def __init__(self, encoder_size: int, hidden_size: int, layers: int) -> None:
        super().__init__()
        self.layers = layers
        self.hidden_size = hidden_size
        self.proj = nn.Linear(encoder_size, layers * hidden_size)

    def forward(self, final: Tensor) -> Tensor:
        """final ``(B, 2He)`` → ``(B, L, Hd)``."""
        # rows in shape buckets under CPU bf16 (one per batch size otherwise)
        out = linear_rows(final, self.proj.weight, self.proj.bias)
        return torch.tanh(out).view(-1, self.layers, self.hidden_size)


class ZeroBridge(nn.Module):
    """``s₀ = 0``: the decoder learns about the source only through attention."""

    def __init__(self, encoder_size: int, hidden_size: int, layers: int) -> None:
        super().__init__()
        self.layers = layers
        self.hidden_size = hidden_size

    def forward(self, final: Tensor) -> Tensor:
        """final ``(B, 2He)`` → zeros ``(B, L, Hd)``."""
        return final.new_zeros(final.size(0), self.layers, self.hidden_size)


BRIDGES: dict[str, type[nn.Module]] = {"bridge": LinearBridge, "zero": ZeroBridge}
