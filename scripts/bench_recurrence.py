"""One ``DeepGRU`` layer's recurrence, eager against its steps compiled, in one process.

Times ``model/deep_gru_loop.py``'s ``gru_layer`` (the hand-written recurrence that
``trainer.compile=auto`` compiles on a CPU): forward and backward of one layer at
the en→de recipe's shapes, random inputs with padding, the two variants alternating
so that the machine's drift hits both alike. Prints the median milliseconds per
layer of each and their ratio, per shape.

    python scripts/bench_recurrence.py                     # bf16, the recipe's shapes
    python scripts/bench_recurrence.py --precision fp32 --batch 64 --steps 30
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seq2seq.model.deep_gru_loop import gru_layer

# (name, directions, hidden size): the recipe's encoder layer (2 × 256, both
# directions in one loop) and its decoder (one 512-unit layer)
LAYERS = (("encoder layer", 2, 256), ("decoder layer", 1, 512))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--batch", type=int, default=104, help="sentences (B)")
    p.add_argument("--steps", type=int, default=20, help="time steps (T)")
    p.add_argument("--depth", type=int, default=2, help="transitions a step")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=10, help="timed calls a round")
    p.add_argument("--threads", type=int, default=2)
    return p.parse_args()


def layer_inputs(dirs: int, size: int, args: argparse.Namespace) -> tuple:
    """Input gates (in the matmul's dtype, as ``DeepGRU`` hands them over), initial
    state, padding mask and per transition the recurrent weight (in the matmul's
    dtype) and biases."""
    gen = torch.Generator().manual_seed(0)
    low = torch.bfloat16 if args.precision == "bf16" else torch.float32
    b, t = args.batch, args.steps

    def leaf(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.1).to(dtype).requires_grad_()

    lengths = torch.randint(t // 2, t + 1, (b,), generator=gen)
    lengths[0] = t
    mask = (torch.arange(t)[None] < lengths[:, None]).unsqueeze(-1)  # (B, T, 1)
    weights = [leaf(dirs, size, 3 * size, dtype=low) for _ in range(args.depth)]
    input_biases = [leaf(dirs, 1, 3 * size) for _ in range(args.depth)]
    hidden_biases = [leaf(dirs, 1, 3 * size) for _ in range(args.depth)]
    gi, h0 = leaf(b, t, dirs, 3 * size, dtype=low), leaf(dirs, b, size)
    return gi, h0, mask, weights, input_biases, hidden_biases


def time_layer(inputs: tuple, fused: bool, args: argparse.Namespace) -> float:
    """Seconds of one forward and backward of the layer."""
    device = "cpu"
    start = time.perf_counter()
    with torch.autocast(device, torch.bfloat16, enabled=args.precision == "bf16"):
        out, h = gru_layer(*inputs, fused=fused)
    (out.float().square().sum() + h.float().sum()).backward()
    return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"gru_layer forward + backward, {args.precision}, B={args.batch}, "
        f"T={args.steps}, depth {args.depth}, {args.threads} threads"
    )
    for name, dirs, size in LAYERS:
        inputs = layer_inputs(dirs, size, args)
        start = time.perf_counter()
        time_layer(inputs, True, args)  # compiles
        compile_s = time.perf_counter() - start
        for fused in (False, True):  # warm-up: allocator, kernels
            time_layer(inputs, fused, args)
        ms: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for fused in (False, True):
                runs = [time_layer(inputs, fused, args) for _ in range(args.repeats)]
                ms[fused].append(1e3 * statistics.median(runs))
        eager, fused = statistics.median(ms[False]), statistics.median(ms[True])
        print(
            f"{name} (H={size}, {dirs} direction{'s' * (dirs > 1)}): eager "
            f"{eager:.1f} ms, compiled {fused:.1f} ms, x{eager / fused:.2f} "
            f"(first call, compiling included: {compile_s:.1f} s)"
        )


if __name__ == "__main__":
    main()
