"""The search's vocabulary projection in another precision (``decode.vocab_precision``).

The projection is most of a search step's FLOPs, and bf16 or int8 runs it faster on
some CPUs (docs/performance.md). ``resolve_vocab_dtype`` turns the setting into a
dtype (``auto``: a one-off timing, ``fastest_projection``); ``LoweredProjection`` is
one search run's copy of the output weights in that dtype, converted once, which
computes each row's best ``candidates`` logits again in fp32. The search only ever
picks among a row's best few, so its choices are fp32's but for near-ties at the
rounding (which also moves the log-softmax's normaliser a little).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from seq2seq.config import VocabPrecision
from seq2seq.decoding.quantized import Int8Projection, int8_available, require_int8
from seq2seq.model.device import cpu_has_native_bf16
from seq2seq.model.output_layer import OutputLayer

log = logging.getLogger(__name__)


def resolve_vocab_dtype(
    choice: VocabPrecision | str,
    device: torch.device,
    shape: tuple[int, int] | None = None,
) -> torch.dtype | None:
    """The dtype of the search's vocabulary projection (``torch.qint8`` for int8),
    or None for the model's own (fp32, or autocast's). ``auto``, on CPU: the
    fastest of fp32, int8 (where torch has the kernels) and bf16 (where the CPU
    multiplies it natively), measured once for the projection's ``shape`` (V, in)
    (``fastest_projection``); elsewhere None: on CUDA autocast (precision=auto)
    already runs it in bf16. int8 is CPU-only and a ConfigValueError elsewhere."""
    choice = VocabPrecision(choice)
    if choice == VocabPrecision.auto:
        if device.type != "cpu" or shape is None:
            return None
        return fastest_projection(*shape, torch.get_num_threads())
    if choice == VocabPrecision.fp32:
        return None
    if choice == VocabPrecision.int8:
        require_int8(device)
        return torch.qint8
    if device.type == "cpu" and not cpu_has_native_bf16():
        _warn_emulated_vocab_bf16()
    return torch.bfloat16


LOWER_MARGIN = 1.1  # bf16 or int8 must be this much faster than fp32 to be chosen


@functools.cache
def fastest_projection(vocab: int, size: int, threads: int) -> torch.dtype | None:
    """The fastest way this CPU runs a search step's vocabulary projection (256 rows
    of ``size`` onto ``vocab``): fp32 (None), or int8 / bf16 with their best 10
    logits recomputed in fp32, as the search does, if ``LOWER_MARGIN`` times faster.
    Neither native bf16 nor int8 kernels settle it: in docs/performance.md bf16 was
    1.2–1.4× faster than fp32 on one AMD EPYC and 0.7–0.9× on an Intel Xeon with
    AVX512-BF16, and int8 1.2× in greedy search on an AVX2 AMD EPYC. 0.1–0.5 s,
    once per process, shape and thread count."""
    del threads  # a key of the cache only: the timings below use the current count
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, size, generator=gen)
    proj = torch.nn.Linear(size, vocab)
    with torch.no_grad():
        proj.weight.copy_(torch.randn(vocab, size, generator=gen))
    kinds: dict[torch.dtype | None, Callable[[Tensor], Tensor]] = {
        None: lambda x: F.linear(x, proj.weight, proj.bias)
    }
    if int8_available():
        kinds[torch.qint8] = Int8Projection(proj.weight, proj.bias)
    if cpu_has_native_bf16():
        wb, bb = proj.weight.bfloat16(), proj.bias.bfloat16()
        kinds[torch.bfloat16] = lambda x: F.linear(x.bfloat16(), wb, bb).float()

    def timed(project: Callable[[Tensor], Tensor], rescored: bool) -> float:
        def run() -> None:
            logits = project(x)
            if rescored:
                idx = logits.topk(10, dim=-1, sorted=False).indices
                exact = torch.bmm(proj.weight[idx], x.unsqueeze(-1)).squeeze(-1)
                logits.scatter_(-1, idx, exact)

        return _fastest(run)

    with torch.inference_mode():
        times = {kind: timed(fn, kind is not None) for kind, fn in kinds.items()}
    fp32 = times.pop(None)
    for kind, took in times.items():
        log.info(
            "vocab_precision=auto: %s projection ×%.2f against fp32",
            _NAMES[kind],
            fp32 / took,
        )
    best = min(times, key=times.get, default=None)
    return best if best is not None and fp32 / times[best] >= LOWER_MARGIN else None


_NAMES = {torch.qint8: "int8", torch.bfloat16: "bf16"}


def _fastest(fn: Callable[[], None], repeats: int = 5) -> float:
    """The fastest of ``repeats`` timed calls of ``fn``, after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@functools.cache
def _warn_emulated_vocab_bf16() -> None:
    """Once per process: the search resolves its precision for every batch."""
    log.warning(
        "vocab_precision=bf16 on a CPU without AVX512-BF16 or AMX: bf16 is "
        "emulated there and usually slower than fp32; consider vocab_precision=fp32"
    )


def projection_shape(model: nn.Module) -> tuple[int, int] | None:
    """(V, in) of the model's (first) vocabulary projection, None without one."""
    for module in model.modules():
        if isinstance(module, OutputLayer):
            return tuple(module.proj.weight.shape)
    return None


def rescored_candidates(beam_size: int) -> int:
    """How many of each row's best logits a search recomputes in fp32 after a
    lower-precision vocabulary projection: beam search's one ``topk`` takes 2K
    extensions per sentence, so a row's best 2K cover every one it can take; greedy
    keeps a few, so that a near-tie of the best two is settled in fp32."""
    return max(4, 2 * beam_size)


def _lowered(proj: nn.Linear, dtype: torch.dtype) -> Callable[[Tensor], Tensor]:
    """``proj`` with its weight in ``dtype``: bf16 (weight, bias and features cast),
    or int8 (``torch.qint8``: fbgemm's kernels, ``quantized.py``)."""
    if dtype == torch.qint8:
        return Int8Projection(proj.weight, proj.bias)
    weight, bias = proj.weight.to(dtype), proj.bias.to(dtype)
    return lambda x: F.linear(x.to(dtype), weight, bias).float()


class LoweredProjection:
    """``output(feat)`` at inference with the vocabulary projection in ``dtype`` and
    each row's ``candidates`` best logits recomputed in fp32 (eval: no dropout; a tied
    model's projection to the embedding size stays fp32). The weights are converted
    when it is made: a search makes one for its run, so they are the model's as they
    are then."""

    def __init__(self, output: OutputLayer, dtype: torch.dtype, candidates: int):
        self.output, self.candidates = output, candidates
        self.project = _lowered(output.proj, dtype)

    def __call__(self, feat: Tensor) -> Tensor:
        """features ``(B, F)`` → logits ``(B, V)`` float32."""
        proj = self.output.proj
        x = self.output.pre(feat)
        logits = self.project(x)  # (B, V) float32
        m = min(self.candidates, logits.size(-1))
        if m > 0:
            idx = logits.topk(m, dim=-1, sorted=False).indices  # (B, m)
            exact = torch.bmm(proj.weight[idx], x.unsqueeze(-1)).squeeze(-1)
            logits.scatter_(-1, idx, exact + proj.bias[idx])
        return logits
