"""Attention in three words: one additive-attention read, small enough to check by hand.

Three source words ("I", "like", "cats") have two-dimensional states ``h_j`` fixed by
hand; the decoder state ``s`` is a single number. The project's own
``AdditiveAttention`` (``e_j = vᵀ tanh(W s + U h_j)``), ``masked_softmax`` and ``read``
(``c = Σ α_j h_j``) turn ``s`` into weights ``α`` and a context ``c``. The script

1. prints ``e``, ``α`` and ``c`` for ``s = -1`` and ``s = +1``;
2. shows that without ``tanh`` both states give the same weights (``vᵀ W s`` is one
   shift added to every score, and softmax ignores shifts);
3. plots the three weights as ``s`` sweeps an interval (PNG at ``--out``);
4. checks ``∂c/∂e_j = α_j (h_j − c)`` against autograd and finite differences, and the
   gradient of a small loss through the read (with respect to ``e`` and to ``s``).

It exits with status 1 when a check fails.

    python scripts/labs/attention_lab.py --out /tmp/attention_lab/weights.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from seq2seq.model.attention import AdditiveAttention, masked_softmax, read

WORDS = ["I", "like", "cats"]
H = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # (S, 2)
W = torch.tensor([[-2.0], [1.0]], dtype=torch.float64)  # (dim, 1): the query part
U = torch.tensor([[1.0, 2.0], [2.0, -2.0]], dtype=torch.float64)  # (dim, 2)
V = torch.tensor([[2.0, 2.0]], dtype=torch.float64)  # (1, dim)
MASK = torch.ones(1, 3, dtype=torch.bool)  # (B, S): all three words are real
TOLERANCE = 1e-6


def scorer() -> AdditiveAttention:
    """The project's additive attention with the hand-fixed W, U (no bias) and v."""
    att = AdditiveAttention(query_size=1, memory_size=2, dim=2).double()
    with torch.no_grad():
        att.query_proj.weight.copy_(W)
        att.key_proj.weight.copy_(U)
        att.key_proj.bias.zero_()
        att.v.weight.copy_(V)
    return att.requires_grad_(False)  # gradients flow to s and e, not to W, U, v


def scores(s: torch.Tensor, tanh: bool = True) -> torch.Tensor:
    """``e (S,)`` for a scalar state ``s``; ``tanh=False`` drops the nonlinearity."""
    if tanh:
        att = scorer()
        keys = att.prepare(H.unsqueeze(0), MASK)
        return att.score(s.reshape(1, 1, 1), keys)[0, 0]  # (S,)
    return ((W * s).T + H @ U.T) @ V[0]  # vᵀ(W s + U h_j) for every j


def attend(e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights ``α (S,)`` and context ``c (2,)`` from scores ``e (S,)``."""
    alpha = masked_softmax(e.reshape(1, 1, -1), MASK)  # (1, 1, S)
    return alpha[0, 0], read(alpha, H.unsqueeze(0))[0, 0]


def fmt(t: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(x):+.3f}" for x in t.detach().reshape(-1)) + "]"


def show_states() -> None:
    for name, h in zip(WORDS, H, strict=True):
        print(f"  h({name:<4}) = {fmt(h)}")
    print(f"  W = {fmt(W)}   U = {fmt(U)} (rows)   v = {fmt(V)}")
    for value in (-1.0, 1.0):
        e = scores(torch.tensor(value, dtype=torch.float64))
        alpha, c = attend(e)
        print(f"s = {value:+.0f}: e = {fmt(e)}  α = {fmt(alpha)}  c = {fmt(c)}")


def check_no_tanh() -> bool:
    """Without tanh, s only shifts all scores equally: the weights cannot move."""
    lo, hi = (attend(scores(torch.tensor(v).double(), tanh=False))[0] for v in (-1, 1))
    same = torch.allclose(lo, hi, atol=1e-12)
    with_tanh = [attend(scores(torch.tensor(v).double()))[0] for v in (-1, 1)]
    moved = float((with_tanh[0] - with_tanh[1]).abs().max())
    print(f"without tanh: α(s=-1) = {fmt(lo)}  α(s=+1) = {fmt(hi)}  same: {same}")
    print(f"with tanh the weights move by up to {moved:.3f}")
    return same and moved > 0.05


def check_read_gradient() -> bool:
    """``∂c/∂e_j = α_j (h_j − c)``, by autograd and by central differences."""
    e = scores(torch.tensor(0.5, dtype=torch.float64)).detach()
    alpha, c = attend(e)
    formula = (alpha[:, None] * (H - c)).T  # (2, S): column j is α_j (h_j − c)
    auto = torch.autograd.functional.jacobian(lambda x: attend(x)[1], e)  # (2, S)
    eps = 1e-6
    finite = torch.stack(
        [
            (attend(e + eps * d)[1] - attend(e - eps * d)[1]) / (2 * eps)
            for d in torch.eye(3, dtype=torch.float64)
        ],
        dim=1,
    )
    err_auto = float((auto - formula).abs().max())
    err_fd = float((finite - formula).abs().max())
    print(
        f"∂c/∂e_j = α_j (h_j − c): autograd error {err_auto:.1e}, "
        f"finite differences {err_fd:.1e}"
    )
    return err_auto < TOLERANCE and err_fd < TOLERANCE


def check_loss_gradient() -> bool:
    """A loss ``L = ½‖c − h_cats‖²`` through the read: ∂L/∂e and ∂L/∂s."""
    target = H[2]

    def loss_of_s(s: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((attend(scores(s))[1] - target) ** 2).sum()

    s = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    e = scores(s)
    e.retain_grad()
    alpha, c = attend(e)
    loss = 0.5 * ((c - target) ** 2).sum()
    loss.backward()
    by_hand = alpha * ((H - c) @ (c - target))  # ∂L/∂e_j = α_j (h_j − c)·(c − t)
    err_e = float((e.grad - by_hand).abs().max())
    eps = 1e-6
    with torch.no_grad():
        fd_s = (loss_of_s(s + eps) - loss_of_s(s - eps)) / (2 * eps)
    err_s = float((s.grad - fd_s).abs())
    print(
        f"L = ½‖c − h(cats)‖² at s = -1: L = {float(loss.detach()):.4f}; "
        f"∂L/∂e = {fmt(e.grad)} "
        f"(by hand: error {err_e:.1e}); ∂L/∂s = {float(s.grad):+.4f} "
        f"(finite differences: error {err_s:.1e})"
    )
    return err_e < TOLERANCE and err_s < TOLERANCE


def plot_sweep(out: Path, lo: float = -4.0, hi: float = 4.0) -> Path:
    """The three weights as ``s`` sweeps ``[lo, hi]``, saved as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    grid = torch.linspace(lo, hi, 161, dtype=torch.float64)
    with torch.no_grad():
        weights = torch.stack([attend(scores(s))[0] for s in grid])  # (N, S)
    fig = Figure(figsize=(6, 3.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for j, word in enumerate(WORDS):
        ax.plot(grid.numpy(), weights[:, j].numpy(), label=f"α({word})")
    ax.set(xlabel="decoder state s", ylabel="attention weight", ylim=(0, 1))
    ax.set_title("e_j = vᵀ tanh(W s + U h_j)")
    ax.legend()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("/tmp/attention_lab/weights.png"),
        help="PNG of the weights against s (a folder gets weights.png inside)",
    )
    args = parser.parse_args(argv)
    out = args.out / "weights.png" if args.out.is_dir() else args.out
    print("Three source words, two numbers each (the encoder's states):")
    show_states()
    checks = {
        "no tanh, no dependence on s": check_no_tanh(),
        "∂c/∂e_j = α_j (h_j − c)": check_read_gradient(),
        "loss gradient through the read": check_loss_gradient(),
    }
    print(f"wrote {plot_sweep(out)}")
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
