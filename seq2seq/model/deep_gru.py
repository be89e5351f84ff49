"""A GRU stack with the parts that let RNNs catch up with Transformers, each optional.

``nn.GRU`` stays the model wherever none of these is on (it is the same computation,
faster). ``DeepGRU`` steps the recurrence by hand to add:

* **Per-gate layer normalization** (Ba et al., 2016, as RNMT+ applies it to each LSTM
  gate, Chen et al., 2018): the input and the recurrent pre-activation of each gate
  g ∈ {r, z, n} are normalized separately over that gate's H units, then the GRU's
  biases are added (they play the role of the normalization's shift)::

      LN(a; γ) = γ ⊙ (a − mean(a)) / sqrt(var(a) + ε)
      r = σ(LN(W_r x; γ^x_r) + b^x_r + LN(U_r h; γ^h_r) + b^h_r)      (z alike)
      n = tanh(LN(W_n x; γ^x_n) + b^x_n + r ⊙ (LN(U_n h; γ^h_n) + b^h_n))
      h' = (1 − z) ⊙ n + z ⊙ h

  The input side is normalized for all steps at once before the loop (it does not
  depend on the recurrence), the recurrent side at every step.
* **Deep transition** (Barone et al., 2017; Nematus' ``*_recurrence_transition_depth``):
  ``transition_depth`` D > 1 adds D − 1 GRU transitions per time step and layer whose
  input is the previous transition's state only (``W x`` is absent; their input-side
  biases remain)::

      h^(1) = GRU(x_t, h_{t-1});  h^(d) = GRU_d(∅, h^(d-1));  h_t = h^(D)

* **Residual connections** (RNMT+): from the third layer up, a layer's output is
  added to its input, with dropout before the addition::

      x^(k+1) = x^(k) + dropout(GRU_k(x^(k)))      k ≥ 3 (counting from 1)

  Below that, and without ``residual``, layers are joined as ``nn.GRU`` joins them
  (dropout between layers, none after the last).

Parameters keep ``nn.GRU``'s names (``weight_ih_l0``, ``bias_hh_l1_reverse``, …), so
a ``DeepGRU`` with every option off loads an ``nn.GRU``'s weights and computes the same
(``tests/test_deep_gru.py``); the extra ones are ``weight_hh_l{k}_t{d}``,
``bias_ih_l{k}_t{d}``, ``bias_hh_l{k}_t{d}`` (transition d ≥ 1) and the gains
``norm_ih_l{k}``, ``norm_hh_l{k}``, ``norm_hh_l{k}_t{d}`` (``_reverse`` for the
backward direction). The two directions of a bidirectional layer run in one loop,
batched.

Without layer norm a layer's time loop runs as one autograd function with a
hand-written backward (``model/deep_gru_loop.py``), whose forward and backward steps
``trainer.compile`` can compile; with it, step by step under autograd (``deep_step``,
compiled under ``trainer.compile=true``).

Shapes: ``B`` batch, ``T`` steps, ``I`` input size, ``H`` hidden size, ``L`` layers,
``D`` directions (1 or 2).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.model.compiled import compiled
from seq2seq.model.deep_gru_loop import gru_layer
from seq2seq.model.dropout import dropout
from seq2seq.model.precision import cast_like_autocast
from seq2seq.model.shape_buckets import (
    bucket_size,
    buckets_active,
    linear_rows,
    pad_dim,
)
from seq2seq.model.stepped_gru import gru_update

# The normalization's ε, as nn.LayerNorm's
NORM_EPS = 1e-5


def gate_norm(pre: Tensor, gain: Tensor) -> Tensor:
    """Per-gate layer normalization: pre ``(..., 3H)`` (the r, z, n pre-activations
    side by side), gain ``(..., 3H)`` → each gate's H units normalized to zero mean
    and unit variance, then scaled by the gain."""
    size = pre.size(-1) // 3
    gates = pre.unflatten(-1, (3, size))
    normed = F.layer_norm(gates, (size,), eps=NORM_EPS).flatten(-2)
    return normed * gain


class DeepGRU(nn.Module):
    """A (bi)directional GRU stack, ``batch_first``, with per-gate layer norm, deep
    transition and residual connections (see the module docstring). ``forward``
    takes and returns what ``nn.GRU``'s does, plus an optional mask for padding."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
        layer_norm: bool = False,
        transition_depth: int = 1,
        residual: bool = False,
    ) -> None:
        super().__init__()
        self._fills: dict[str, float | None] = {}  # parameter → constant init, or None
        if transition_depth < 1:
            raise ValueError(f"transition_depth {transition_depth}: use 1 or more")
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.dropout = num_layers, dropout
        self.bidirectional = bidirectional
        self.layer_norm, self.transition_depth = layer_norm, transition_depth
        self.residual = residual
        # torch.compile's mode for each time step (``Seq2Seq.compile_steps``); None:
        # eager. The hand-written recurrence's steps compile in the default mode
        # whatever this says: a CUDA graph's replay would overwrite the outputs of the
        # step before, which its backward reads
        self.compile_mode: str | None = None
        # Without layer norm: the whole loop as one autograd function with a
        # hand-written backward (model/deep_gru_loop.py); False: step by step under
        # autograd
        self.fused = True
        h3, dirs = 3 * hidden_size, 2 if bidirectional else 1
        for k in range(num_layers):
            width = input_size if k == 0 else dirs * hidden_size
            for sfx in self._suffixes(k):
                self._param(f"weight_ih{sfx}", h3, width)
                self._param(f"weight_hh{sfx}", h3, hidden_size)
                self._param(f"bias_ih{sfx}", h3)
                self._param(f"bias_hh{sfx}", h3)
                if layer_norm:
                    self._param(f"norm_ih{sfx}", h3, fill=1.0)
                    self._param(f"norm_hh{sfx}", h3, fill=1.0)
                for d in range(1, transition_depth):
                    self._param(f"weight_hh{sfx}_t{d}", h3, hidden_size)
                    self._param(f"bias_ih{sfx}_t{d}", h3)
                    self._param(f"bias_hh{sfx}_t{d}", h3)
                    if layer_norm:
                        self._param(f"norm_hh{sfx}_t{d}", h3, fill=1.0)
        self.reset_parameters()

    def _suffixes(self, layer: int) -> list[str]:
        """The parameter suffixes of a layer's directions, as ``nn.GRU`` names them."""
        sfx = f"_l{layer}"
        return [sfx, sfx + "_reverse"] if self.bidirectional else [sfx]

    def _param(self, name: str, *shape: int, fill: float | None = None) -> None:
        self.register_parameter(name, nn.Parameter(torch.empty(*shape)))
        self._fills[name] = fill

    def reset_parameters(self) -> None:
        """``nn.GRU``'s initialization (uniform ±1/√H); gains at 1."""
        bound = self.hidden_size**-0.5
        for name, param in self.named_parameters():
            fill = self._fills[name]
            with torch.no_grad():
                if fill is None:
                    param.uniform_(-bound, bound)
                else:
                    param.fill_(fill)

    def _stacked(self, layer: int, name: str) -> Tensor:
        """The directions' parameter ``name`` of ``layer`` stacked: ``(D, ...)`` (a
        view for one direction: no copy, and no gradient to split after)."""
        params = [getattr(self, name.format(sfx)) for sfx in self._suffixes(layer)]
        return params[0].unsqueeze(0) if len(params) == 1 else torch.stack(params)

    def forward(
        self, x: Tensor, h0: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """x ``(B, T, I)``, h0 ``(L·D, B, H)`` (None: zeros), mask ``(B, T)`` bool,
        True for real steps (None: all real; padding must be at the end) → output
        ``(B, T, D·H)`` (zeros at padding) and the final states ``(L·D, B, H)``
        (each direction's state after its last real step), as ``nn.GRU``."""
        dirs = 2 if self.bidirectional else 1
        b = x.size(0)
        if h0 is None:
            h0 = x.new_zeros(self.num_layers * dirs, b, self.hidden_size)
        if buckets_active(x.device):  # every layer's matmuls on a bucket's rows
            x, h0, mask = _batch_in_bucket(x, h0, mask)
        finals, layer_in = [], x
        for k in range(self.num_layers):
            out, h_n = self._layer(k, layer_in, h0[k * dirs : (k + 1) * dirs], mask)
            finals.append(h_n)
            last = k == self.num_layers - 1
            if self.residual and k >= 2:
                out = layer_in + dropout(out, self.dropout, self.training)
            elif not last:
                out = dropout(out, self.dropout, self.training)
            layer_in = out
        return layer_in[:b], torch.cat(finals)[:, :b]

    def _layer(
        self, k: int, x: Tensor, h0: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """Layer ``k`` over all steps, its directions batched: x ``(B, T, I)``, h0
        ``(D, B, H)`` → output ``(B, T, D·H)``, final states ``(D, B, H)``."""
        dirs = h0.size(0)
        # Input side for all steps and both directions: (B, T, D·3H), one matmul
        w_ih = cast_like_autocast(self._stacked(k, "weight_ih{}").flatten(0, 1))
        gi = linear_rows(x, w_ih)
        b_ih = self._stacked(k, "bias_ih{}").unsqueeze(1)  # (D, 1, 3H)
        w_hh = self._recurrent_weights(k)  # (D, H, 3H)
        b_hh = self._stacked(k, "bias_hh{}").unsqueeze(1)  # (D, 1, 3H)
        gain = self._stacked(k, "norm_hh{}").unsqueeze(1) if self.layer_norm else None
        transitions = [self._transition(k, d) for d in range(1, self.transition_depth)]
        if self.fused and gain is None:  # in the layer's layout: nothing flipped,
            # the input-side bias added in the recurrence's steps
            out, h = gru_layer(
                gi.unflatten(-1, (dirs, -1)),
                h0,
                mask.unsqueeze(-1) if mask is not None else None,
                [w_hh] + [w for w, _, _, _ in transitions],
                [b_ih] + [b_i for _, b_i, _, _ in transitions],
                [b_hh] + [b_h for _, _, b_h, _ in transitions],
                fused=self.compile_mode is not None,
            )
            return out.flatten(2), h
        # The loop under autograd: each direction in its own time order, (D, T, B, 3H)
        gi = gi.unflatten(-1, (dirs, -1)).permute(2, 1, 0, 3)
        if self.layer_norm:
            gi = gate_norm(gi, self._stacked(k, "norm_ih{}")[:, None, None])
        gi = gi + b_ih.unsqueeze(1)
        if dirs == 2:  # unbind, not gi[0] / gi[1]: each index's backward would
            # write a zero tensor the size of gi
            forward, backward = gi.unbind(0)
            gi = torch.stack([forward, backward.flip(0)])
        masks = None
        if mask is not None:
            m = mask.t().unsqueeze(-1)  # (T, B, 1)
            masks = torch.stack([m, m.flip(0)]) if dirs == 2 else m.unsqueeze(0)
        out, h = self._loop(gi, h0, masks, w_hh, b_hh, gain, transitions)
        # out (D, T, B, H), the backward direction in reverse time
        if dirs == 2:
            forward, backward = out.unbind(0)
            out = torch.cat([forward, backward.flip(0)], -1)
        else:
            out = out.squeeze(0)  # a view: its backward writes no zero tensor
        return out.transpose(0, 1), h

    def _loop(
        self,
        gi: Tensor,
        h0: Tensor,
        masks: Tensor | None,
        w_hh: Tensor,
        b_hh: Tensor,
        gain: Tensor | None,
        transitions: list[tuple[Tensor, ...]],
    ) -> tuple[Tensor, Tensor]:
        """The time loop under autograd, a step at a time (``deep_step``), for layer
        norm or a compiled step: ``gru_layer``'s arguments → its results."""
        steps = masks.unbind(1) if masks is not None else None  # T × (D, B, 1)
        # unbind, not gi[:, t]: its backward stacks the steps' gradients once, where
        # each slice's would write a zero tensor the size of gi (O(T²) per layer)
        h, outs = h0, []
        for t, gi_t in enumerate(gi.unbind(1)):
            new = self._step(gi_t, h, w_hh, b_hh, gain, transitions)
            if steps is not None:
                new = new * steps[t]  # zeros at padding: the output there
                h = torch.where(steps[t], new, h)
            else:
                h = new
            outs.append(new)
        return torch.stack(outs, dim=1), h

    def _recurrent_weights(self, k: int, sfx: str = "") -> Tensor:
        """The directions' ``weight_hh`` (of transition ``sfx``) of layer ``k``
        transposed for a right-hand matmul ``(D, H, 3H)``, cast once under
        autocast."""
        return cast_like_autocast(self._stacked(k, "weight_hh{}" + sfx).transpose(1, 2))

    def _transition(self, k: int, d: int) -> tuple[Tensor, ...]:
        """Transition ``d`` of layer ``k``: recurrent weights ``(D, H, 3H)``, input-
        and recurrent-side biases ``(D, 1, 3H)``, gain ``(D, 1, 3H)`` or None."""
        sfx = f"_t{d}"
        gain = None
        if self.layer_norm:
            gain = self._stacked(k, "norm_hh{}" + sfx).unsqueeze(1)
        return (
            self._recurrent_weights(k, sfx),
            self._stacked(k, "bias_ih{}" + sfx).unsqueeze(1),
            self._stacked(k, "bias_hh{}" + sfx).unsqueeze(1),
            gain,
        )

    def _step(self, *args) -> Tensor:
        """``deep_step``, through torch.compile when ``compile_mode`` is set."""
        if self.compile_mode is None:
            return deep_step(*args)
        return compiled(deep_step, self.compile_mode)(*args)


def _batch_in_bucket(
    x: Tensor, h0: Tensor, mask: Tensor | None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """x ``(B, T, I)``, h0 ``(L·D, B, H)`` and mask ``(B, T)`` with B padded to
    ``bucket_size``: zero inputs and states, all steps real. Each row of a GRU is
    independent of the others, so the real rows' values and gradients are unchanged;
    every layer then runs its matmuls on the bucket's rows (oneDNN builds a bf16
    kernel per shape) without padding again."""
    size = bucket_size(x.size(0))
    if mask is not None:
        mask = pad_dim(mask, 0, size, value=True)
    return pad_dim(x, 0, size), pad_dim(h0, 1, size), mask


def deep_step(
    gi: Tensor,
    h: Tensor,
    w_hh: Tensor,
    b_hh: Tensor,
    gain: Tensor | None,
    transitions: list[tuple[Tensor, ...]],
) -> Tensor:
    """One time step of one layer, both directions: gi ``(D, B, 3H)`` (the input
    side, normalized, biases in), h ``(D, B, H)`` → the new state ``(D, B, H)``. A
    plain function of tensors, so that torch.compile can fuse a step's element-wise
    work (the gates, the norms, the transitions') into few kernels."""
    h = gru_update(gi, _recurrent(h, w_hh, b_hh, gain), h)
    for w, b_i, b_h, g in transitions:
        h = gru_update(b_i.expand_as(gi), _recurrent(h, w, b_h, g), h)
    return h


def _recurrent(h: Tensor, w: Tensor, bias: Tensor, gain: Tensor | None) -> Tensor:
    """``LN(U h) + b`` (or ``U h + b`` without layer norm): ``(D, B, 3H)``."""
    if gain is None:
        return torch.baddbmm(bias, h, w)
    return gate_norm(torch.bmm(h, w), gain) + bias


def build_rnn(
    input_size: int,
    hidden_size: int,
    layers: int,
    dropout: float,
    bidirectional: bool = False,
    layer_norm: bool = False,
    transition_depth: int = 1,
    residual: bool = False,
) -> nn.GRU | DeepGRU:
    """``nn.GRU`` (``batch_first``) when no RNMT+ / deep-transition option is on, so
    today's models compute exactly what they did; else a ``DeepGRU`` with the same
    parameter names. ``dropout`` joins the layers (none with one layer)."""
    dropout = dropout if layers > 1 else 0.0
    deep = layer_norm or transition_depth > 1 or (residual and layers >= 3)
    if not deep:
        return nn.GRU(
            input_size,
            hidden_size,
            num_layers=layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout,
        )
    return DeepGRU(
        input_size,
        hidden_size,
        layers,
        dropout,
        bidirectional,
        layer_norm,
        transition_depth,
        residual,
    )
