"""Self-attention over the encoder's states: Transformer blocks on the bi-GRU.

RNMT+'s cascaded encoder (Chen et al., 2018, §5) stacks Transformer self-attention
layers on an RNN encoder; here ``model.encoder.self_attention.layers`` blocks sit on
the bidirectional GRU's states ``h`` ``(B, S, D)``, ``D = 2He``. Each block is
pre-norm:

    a = x + Drop(MHA(LN₁(x)))             MHA(z) = [head₁; …; head_H] Wᵒ
    y = a + Drop(W₂ relu(W₁ LN₂(a) + b₁) + b₂)
    headₕ = softmax(Qₕ Kₕᵀ / √dₕ + M) Vₕ,  Qₕ = z W_hᵠ, Kₕ = z W_hᵏ, Vₕ = z W_hᵛ

with ``M`` = −∞ at padded key positions (0 elsewhere), ``dₕ = D / H``; the stack
ends with a layer norm, ``memory = LN_out(y_L)``, and padded rows are set to 0.

Why pre-norm: the residual path carries the GRU states to the top untouched by any
normalization, so each block starts near the identity, and pre-norm Transformers
train without a learning-rate warm-up (Xiong et al., 2020) where post-norm
``LN(x + MHA(x))`` needs one; the quickstart and the recipes warm up 100–200 steps.
No positions are added: each GRU state already depends on its place in the sentence
(it summarizes the words before and after it), so the scores can tell positions
apart without a sinusoidal or learned position vector. Dropout is on each
sublayer's output before the residual sum (the Transformer's residual dropout), not
on the weights, so the weights drawn are the ones used.

Options against saturated heads (all off by default, where the model and its parameter
names are as before): ``attention_dropout`` drops attention weights in training (the
Transformer's attention dropout); ``qk_norm`` puts a layer norm over each head's
query and key vectors (Dehghani et al., 2023), so at its initial gains
``|q·k|/√dₕ ≤ √dₕ`` and no logit can grow without bound; ``zero_init_out``
(``SelfAttentionStack.start_as_identity``) starts the attention's output projection
and the feed-forward's output layer at zero, so every block begins as the identity
and the GRU's states pass through untouched until the blocks learn something
(Fixup/ReZero's idea, Zhang et al., 2019; Bachlechner et al., 2020).

Training and search run ``scaled_dot_product_attention`` (fused kernels); with
``need_weights`` the same softmax is computed explicitly and each head's weights
``(B, H, S, S)`` come back for the pictures (``tests/test_self_attention.py``
checks both paths equal). Nothing is stored on the modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.model.dropout import Dropout


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor,
    need_weights: bool = False,
    dropout: float = 0.0,
) -> tuple[Tensor, Tensor | None]:
    """q, k, v ``(B, H, S, dₕ)``, mask ``(B, S)`` bool (True: a real key) →
    context ``(B, H, S, dₕ)`` and, with ``need_weights``, the weights
    ``softmax(QKᵀ/√dₕ + M)`` ``(B, H, S, S)`` (rows: queries; float32 at least).
    ``dropout``: the probability of dropping a weight before it reads ``v`` (pass
    0 outside training); the weights returned are the ones before dropout."""
    keys = mask[:, None, None, :]  # (B, 1, 1, S)
    if not need_weights:
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=keys, dropout_p=dropout
        )
        return context, None
    wide = torch.promote_types(q.dtype, torch.float32)  # bf16 → fp32; fp64 stays
    scores = q.to(wide) @ k.to(wide).transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = scores.masked_fill(~keys, float("-inf")).softmax(dim=-1)  # (B,H,S,S)
    read = F.dropout(weights, dropout) if dropout else weights
    return (read.to(v.dtype) @ v), weights


class SelfAttentionBlock(nn.Module):
    """One pre-norm block: multi-head self-attention, then a position-wise
    feed-forward layer, each behind a layer norm and inside a residual (module
    docstring)."""

    def __init__(
        self,
        size: int,
        heads: int,
        ffn: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        qk_norm: bool = False,
    ):
        super().__init__()
        if size % heads:
            raise ValueError(f"{heads} heads do not divide the state size {size}")
        self.heads = heads
        self.attention_dropout = attention_dropout
        self.norm_attn = nn.LayerNorm(size)
        self.qkv = nn.Linear(size, 3 * size)
        # one norm over dₕ shared by the heads (named norm_*: init_weights sets the
        # gains to 1); absent unless asked for, so older checkpoints keep their names
        if qk_norm:
            self.norm_q = nn.LayerNorm(size // heads)
            self.norm_k = nn.LayerNorm(size // heads)
        self.out = nn.Linear(size, size)
        self.norm_ffn = nn.LayerNorm(size)
        self.ffn_in = nn.Linear(size, ffn)
        self.ffn_out = nn.Linear(ffn, size)
        self.dropout = Dropout(dropout)
        # (q, k, v, mask) → (context, weights) in place of ``attend``: attribution
        # (``alignment/attribution.py``) runs the block on weights it chooses
        self.weights_hook: Callable[..., tuple[Tensor, Tensor]] | None = None

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x ``(B, S, D)``, mask ``(B, S)`` bool → y ``(B, S, D)`` and the weights
        ``(B, H, S, S)`` (None unless ``need_weights``)."""
        b, s, d = x.shape
        qkv = self.qkv(self.norm_attn(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, H, S, dₕ)
        if hasattr(self, "norm_q"):
            q, k = self.norm_q(q), self.norm_k(k)
        if self.weights_hook is None:
            drop = self.attention_dropout if self.training else 0.0
            context, weights = attend(q, k, v, mask, need_weights, drop)
        else:
            context, weights = self.weights_hook(q, k, v, mask)
        context = context.transpose(1, 2).reshape(b, s, d)  # heads side by side
        a = x + self.dropout(self.out(context))
        hidden = torch.relu(self.ffn_in(self.norm_ffn(a)))  # (B, S, ffn)
        return a + self.dropout(self.ffn_out(hidden)), weights

    def start_as_identity(self) -> None:
        """Zero the output projection and the feed-forward's output layer: the
        block then returns its input (``zero_init_out``)."""
        for layer in (self.out, self.ffn_out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)


class SelfAttentionStack(nn.Module):
    """``layers`` blocks and the final layer norm over the encoder's states; padded
    positions come out as 0, as ``EncoderOutput.memory`` promises."""

    def __init__(
        self, size: int, layers: int, heads: int, ffn: int, **options: float | bool
    ):
        """``options``: each block's (``SelfAttentionBlock``'s ``dropout``,
        ``attention_dropout``, ``qk_norm``)."""
        super().__init__()
        self.blocks = nn.ModuleList(
            SelfAttentionBlock(size, heads, ffn, **options) for _ in range(layers)
        )
        self.norm_out = nn.LayerNorm(size)

    def start_as_identity(self) -> None:
        """Every block starts as the identity (``zero_init_out``)."""
        for block in self.blocks:
            block.start_as_identity()

    def forward(
        self, memory: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """memory ``(B, S, D)``, mask ``(B, S)`` bool → memory ``(B, S, D)`` (zeros
        at padding) and, with ``need_weights``, every block's weights ``(B, layers,
        H, S, S)`` (float32; padded rows and columns 0)."""
        x, maps = memory, []
        for block in self.blocks:
            x, weights = block(x, mask, need_weights)
            maps.append(weights)
        keep = mask[:, :, None]  # (B, S, 1)
        out = self.norm_out(x).masked_fill(~keep, 0.0)
        if not need_weights:
            return out, None
        stacked = torch.stack(maps, dim=1)  # (B, layers, H, S, S)
        rows = mask[:, None, None, :, None]  # padded queries: no picture to draw
        return out, stacked.masked_fill(~rows, 0.0)
