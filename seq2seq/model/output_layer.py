"""The decoder's output layer: dropout, an optional projection to the embedding size
(when tying needs it) and the vocabulary projection, with the loss fused to it in
chunks when the logits would be large. Every decoder style shares it; the search's
lowered projections (``decoding/vocab.py``) read its weights.

Shapes: ``N`` rows, ``F`` feature size, ``V`` vocabulary.
"""

from __future__ import annotations

from torch import Tensor, nn

from seq2seq.model.dropout import Dropout
from seq2seq.model.loss import (
    DEFAULT_LOSS_CHUNK_MB,
    fused_chunk_rows,
    linear_token_loss,
    token_loss,
)
from seq2seq.model.shape_buckets import pad_loss_rows, rows_in_buckets


class OutputLayer(nn.Module):
    """Dropout, an optional projection to the embedding size (when tying needs it) and
    the vocabulary projection, applied once to all collected features."""

    def __init__(
        self,
        feature_size: int,
        vocab_size: int,
        dropout: float,
        tied: nn.Embedding | None = None,
    ) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.pre = nn.Identity()
        in_size = feature_size
        if tied is not None and tied.embedding_dim != feature_size:
            self.pre = nn.Linear(feature_size, tied.embedding_dim, bias=False)
            in_size = tied.embedding_dim
        self.proj = nn.Linear(in_size, vocab_size)
        if tied is not None:
            self.proj.weight = tied.weight
        # float32 bytes of logits above which ``loss`` runs fused in chunks (0: never);
        # set from trainer.loss_chunk_mb, not saved with the weights
        self.chunk_bytes = DEFAULT_LOSS_CHUNK_MB * 2**20

    def forward(self, features: Tensor) -> Tensor:
        """features ``(..., F)`` → logits ``(..., V)``; under CPU bf16 autocast with
        the rows padded to ``bucket_size`` (R-Drop's and scheduled sampling's logits,
        a bf16 search's steps): oneDNN builds a kernel per new row count, about 25 ms
        for the vocabulary projection against 7 ms to run it."""
        return rows_in_buckets(
            lambda rows: self.proj(self.pre(rows)), self.dropout(features)
        )

    def loss(self, features: Tensor, targets: Tensor, smoothing: float) -> Tensor:
        """``token_loss(self(features), targets, smoothing)`` for features ``(N, F)``:
        in one piece while the logits fit in ``chunk_bytes`` (float32), else fused
        with the projection in chunks of rows that do (``linear_token_loss``; on CPU
        chunks of at most 32 MB), so a large vocabulary's logits never exist whole."""
        features, targets = pad_loss_rows(features, targets)
        x = self.pre(self.dropout(features))
        vocab = self.proj.out_features
        if not self.chunk_bytes or x.size(0) * vocab * 4 <= self.chunk_bytes:
            return token_loss(self.proj(x), targets, smoothing)
        chunk = fused_chunk_rows(vocab, self.chunk_bytes, x.device)
        return linear_token_loss(
            x, self.proj.weight, self.proj.bias, targets, smoothing, chunk
        )
