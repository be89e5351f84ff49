"""One training-step change, before against after, in one process.

Fresh processes one after another cannot show a 2-5 % change on this shared machine:
its speed drifts by more than that. Here both variants train the reference model of
``bench_compare.py`` (the same model and optimizer, on the harness's pieces) on the
same batches, in random order within each pair, so the drift hits both alike, each
step the trainer's (``batch_objective``: the output layer and the loss together, its
rows in shape buckets under CPU bf16). It
prints each variant's tokens/s (median over rounds) and the median over rounds of
the ratio of their total times (before / after: > 1 means the change is faster).
The total time, not a per-batch median, because a change may pay on a few batches
only (padding sits in a few batches). Each round draws new batches, whose new shapes
make oneDNN build bf16 kernels (and torch.compile check its guards) inside the timed
steps, as a run's first few hundred steps do; ``--warm`` runs each round's batches
once, untimed, first, for the steady state that the rest of a run trains in.

Each variant's page faults a step are printed too (memory the step faulted in). Each
step finds the heap and the caches as the step before left it, whichever variant that
was; ``--in-a-row`` times each variant's batches of a round in a row instead, as a
training run steps after its own steps.

Changes (``before`` → ``after``, as in the code now):
- ``rows``: the output layer and the loss at every (B, T) position → at the non-pad
  targets only (``Batch.tgt_rows``); on source-sorted batches, where it was made: the
  target-sorted batches of training now leave almost no padding to skip;
- ``keys``: the additive attention's keys ``U h_j`` projected at every decoder step →
  once per batch (DESIGN rule 1);
- ``sort``: batches bucketed by source length → by target length (the samplers give
  different batches, paired by position, so this one is noisier);
- ``slices``: the hand-stepped GRUs take their parts by indexing (``gi[:, t]`` per
  step in ``DeepGRU``, ``gi[..., :2H]`` per gate in ``gru_update``) → by ``unbind``
  and ``split``, whose backward joins the parts' gradients once instead of writing a
  zero tensor the size of the whole for each. It pays where a ``DeepGRU`` runs: give
  its options as model overrides.
- ``dropout``: ``F.dropout`` (a ``bernoulli_`` draw per element) → the CPU dropout
  of ``model/dropout.py`` (four 16-bit draws per 64-bit one);
- ``recurrence``: ``DeepGRU``'s time loop under autograd, a step at a time → one
  autograd function with a hand-written backward (``model/deep_gru_loop.py``). It
  pays where a ``DeepGRU`` runs without layer norm: give its options as overrides.
- ``compile``: every step eager → the steps ``--compile`` compiles (``auto``: the
  deep GRU's recurrent steps on a CPU, what ``trainer.compile=auto`` compiles; the
  compile time is printed), in ``--precision``. Give a ``DeepGRU``'s options as
  overrides, or ``--compile true`` for the decoder's step loop too.
- ``baseline``: ``DeepGRU`` (its methods, ``model/deep_gru.py``) and its recurrence
  (``model/deep_gru_loop.py``) as git revision ``--baseline REF`` had them, loaded
  beside today's → today's. Give a ``DeepGRU``'s options.
- ``stage``: the step changes of the speed stage together, as users meet them: the
  code before (``recurrence`` and ``dropout`` undone, every step eager) in fp32 →
  the code now in ``--precision`` (bf16 where the CPU computes it: what
  ``precision=auto`` picks) with the steps ``--compile`` compiles (``auto``, as
  ``trainer.compile=auto``).
  The shape buckets alone have no pair here: the unpadded variant's new shapes would
  evict the padded one's kernels from oneDNN's cache, a cost the code now never
  pays; fp32 builds no kernels, so the fp32 variant is the code before.

    python scripts/bench_ab.py rows --precision fp32 --batch-tokens 2048 --rounds 4
    python scripts/bench_ab.py compile --precision bf16 --batch-tokens 2048 \
        encoder.transition_depth=2 decoder.transition_depth=2
    python scripts/bench_ab.py slices --batch-tokens 2048 encoder.transition_depth=2 \
        decoder.transition_depth=2
    # the en→de recipe's model (its dropout too):
    python scripts/bench_ab.py stage --precision bf16 --batch-tokens 2048 \
        encoder.layers=2 attention.type=luong_general attention.style=luong \
        decoder.input_feeding=false tie_embeddings=true encoder.transition_depth=2 \
        decoder.transition_depth=2 emb_dropout=0.3 word_dropout=0.1 \
        encoder.dropout=0.3 decoder.dropout=0.3
"""

from __future__ import annotations

import argparse
import contextlib
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_compare import MODEL, load_split
from omegaconf import OmegaConf
from revision import module_at

from seq2seq.config import ModelConfig
from seq2seq.data.batching import Batch, make_loader
from seq2seq.model import attention, deep_gru, rnmt, stepped_gru
from seq2seq.model import dropout as model_dropout
from seq2seq.model.device import autocast, resolve_precision
from seq2seq.model.loss import token_loss
from seq2seq.model.seq2seq import build_model
from seq2seq.training.objective import batch_objective
from seq2seq.training.optim import build_optimizer
from seq2seq.training.runtime import compile_scope

CHANGES = (
    "rows",
    "keys",
    "sort",
    "slices",
    "dropout",
    "recurrence",
    "compile",
    "baseline",
    "stage",
)


@contextlib.contextmanager
def keys_per_step() -> Iterator[None]:
    """The additive attention as it would be without ``prepare``: keys projected in
    ``score``, at every step (same values)."""
    cls = attention.AdditiveAttention
    prepare, score = cls.prepare, cls.score

    def raw_prepare(self, memory, mask):
        return attention.Keys(memory, memory, mask)

    def step_score(self, query, keys):
        k = self.key_proj(keys.keys)  # U h_j + b, again at every step
        q = self.query_proj(query)
        return self.v(torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))).squeeze(-1)

    cls.prepare, cls.score = raw_prepare, step_score
    try:
        yield
    finally:
        cls.prepare, cls.score = prepare, score


def sliced_update(gi: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``stepped_gru.gru_update`` with the gates taken by slicing (same values)."""
    size = h.size(-1)
    rz = torch.sigmoid(gi[..., : 2 * size] + gh[..., : 2 * size])
    r, z = rz[..., :size], rz[..., size:]
    n = torch.tanh(torch.addcmul(gi[..., 2 * size :], r, gh[..., 2 * size :]))
    return torch.addcmul(n, z, h - n)


@contextlib.contextmanager
def sliced_steps() -> Iterator[None]:
    """The GRUs' step loops as they would be with indexing: ``gru_update`` slices
    its gates, and ``unbind(1)``, which only ``DeepGRU``'s time loop calls, gives
    ``x[:, t]`` views one by one (same values)."""
    update, unbind = stepped_gru.gru_update, torch.Tensor.unbind

    def indexed(self: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, ...]:
        if dim != 1:
            return unbind(self, dim)
        return tuple(self[:, t] for t in range(self.size(1)))

    stepped_gru.gru_update = deep_gru.gru_update = sliced_update
    torch.Tensor.unbind = indexed
    try:
        yield
    finally:
        stepped_gru.gru_update = deep_gru.gru_update = update
        torch.Tensor.unbind = unbind


@contextlib.contextmanager
def torch_dropout() -> Iterator[None]:
    """Every dropout of the model through ``F.dropout`` (other masks, same law)."""
    modules = (model_dropout, deep_gru, stepped_gru, rnmt)
    saved = [m.dropout for m in modules]

    def plain(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
        return torch.nn.functional.dropout(x, p, training)

    for m in modules:
        m.dropout = plain
    try:
        yield
    finally:
        for m, fn in zip(modules, saved, strict=True):
            m.dropout = fn


@contextlib.contextmanager
def stepped_recurrence(model: torch.nn.Module) -> Iterator[None]:
    """Every ``DeepGRU`` of ``model`` stepped under autograd (same values)."""
    grus = [m for m in model.modules() if isinstance(m, deep_gru.DeepGRU)]
    for m in grus:
        m.fused = False
    try:
        yield
    finally:
        for m in grus:
            m.fused = True


@contextlib.contextmanager
def eager_steps(model: torch.nn.Module) -> Iterator[None]:
    """Every step of ``model`` eager (no compiled step), as it was before."""
    grus = [m for m in model.modules() if isinstance(m, deep_gru.DeepGRU)]
    modes = [m.compile_mode for m in grus]
    loop = model.decoder.compile_loop
    model.eager_steps()
    try:
        yield
    finally:
        model.decoder.compile_loop = loop
        for m, mode in zip(grus, modes, strict=True):
            m.compile_mode = mode


def deep_gru_at(ref: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Every ``DeepGRU`` runs the methods revision ``ref``'s had, with that revision's
    recurrence (``gru_layer``) and helpers; its parameters are today's (the names
    have not changed)."""
    old = module_at(ref, "seq2seq/model/deep_gru.py")
    old.gru_layer = module_at(ref, "seq2seq/model/deep_gru_loop.py").gru_layer
    methods = {
        name: fn
        for name, fn in vars(old.DeepGRU).items()
        if callable(fn) and name != "__init__"
    }
    today = {name: vars(deep_gru.DeepGRU).get(name) for name in methods}

    @contextlib.contextmanager
    def swapped() -> Iterator[None]:
        for name, fn in methods.items():
            setattr(deep_gru.DeepGRU, name, fn)
        try:
            yield
        finally:
            for name, fn in today.items():
                if fn is None:
                    delattr(deep_gru.DeepGRU, name)
                else:
                    setattr(deep_gru.DeepGRU, name, fn)

    return swapped


@contextlib.contextmanager
def code_before_stage(model: torch.nn.Module) -> Iterator[None]:
    """``recurrence`` and ``dropout`` undone together, every step eager (in fp32,
    where the shape buckets are off)."""
    with eager_steps(model), stepped_recurrence(model), torch_dropout():
        yield


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("change", choices=CHANGES)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--batch-tokens", type=int, default=1152)
    p.add_argument("--batches", type=int, default=8, help="batches (pairs) a round")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--compile",
        choices=["auto", "true", "false"],
        default="auto",
        help="compile and stage: the steps compiled after the change, as "
        "trainer.compile (the other changes run every step eager on both sides)",
    )
    p.add_argument(
        "--baseline",
        metavar="REF",
        help="baseline: the git revision whose DeepGRU and recurrence run before",
    )
    p.add_argument(
        "--in-a-row",
        action="store_true",
        help="time each variant's batches of a round in a row (after one untimed step "
        "of its own), the two in random order, instead of alternating batch by batch: "
        "in a training run each step follows its own variant's, and finds the heap "
        "and the caches as that left them",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="run each round's batches once through both variants, untimed, before "
        "timing them: the timed steps find their oneDNN kernels (bf16) and compiled "
        "graphs built, as a training run does after its first few hundred steps",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        help="ModelConfig values as KEY=VALUE (decoder.transition_depth=2 ...)",
    )
    return p.parse_intermixed_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.change == "baseline" and not args.baseline:
        sys.exit("baseline: give the revision to compare with, --baseline REF")
    old_deep_gru = None
    if args.change == "baseline":
        old_deep_gru = deep_gru_at(args.baseline)
    torch.manual_seed(42)
    amp = resolve_precision(args.precision, torch.device("cpu"))
    # ``stage`` times the code before in fp32, whatever the code now runs in
    amp_before = resolve_precision("fp32", torch.device("cpu"))
    if args.change != "stage":
        amp_before = amp
    train = load_split("train", None)
    cfg = OmegaConf.structured(ModelConfig())
    cfg.encoder.layers = 1  # the peers' reference model, as in bench_compare
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(args.overrides))
    model = build_model(cfg, MODEL["vocab"], MODEL["vocab"]).train()
    adam = {"name": "adam", "lr": 1e-3, "betas": [0.9, 0.999], "weight_decay": 0.0}
    opt = build_optimizer(OmegaConf.create(adam), model)
    scope, why = "none", ""
    if args.change in ("compile", "stage"):
        scope, why = compile_scope(args.compile, torch.device("cpu"))
    if scope != "none":
        parts = model.compile_steps("default", 0, scope)
        print(f"compiled: {' and '.join(parts) or 'nothing'} ({why})", flush=True)

    last_faults = [0]  # the page faults of the last step: memory faulted in

    def step(batch: Batch, after: bool) -> float:
        rows = batch.tgt_rows if after or args.change != "rows" else None
        old_code = None  # the context that puts the code as it was before
        if not after and args.change not in ("rows", "sort"):
            old_code = {
                "keys": keys_per_step,
                "slices": sliced_steps,
                "dropout": torch_dropout,
                "recurrence": lambda: stepped_recurrence(model),
                "compile": lambda: eager_steps(model),
                "baseline": lambda: old_deep_gru(),
                "stage": lambda: code_before_stage(model),
            }[args.change]()
        precision = amp if after else amp_before
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        # the old code for the whole step, its backward and optimizer step too
        with old_code or contextlib.nullcontext():
            with autocast(torch.device("cpu"), precision):
                if rows is None:  # ``rows`` before: logits at every (B, T) position
                    out = model(
                        batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in
                    )
                    loss = token_loss(out.logits, batch.tgt_out, 0.1)
                else:  # the trainer's objective: the output layer and loss together
                    loss = batch_objective(model, batch, 0.0, 0.1).objective
            (loss / batch.n_tokens).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        seconds = time.perf_counter() - start
        last_faults[0] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        return seconds

    def batches(sort_by: str, seed: int) -> list[Batch]:
        loader = make_loader(
            train, args.batch_tokens, shuffle=True, seed=seed, sort_by=sort_by
        )
        it = iter(loader)
        return [next(it) for _ in range(args.batches)]

    rng = random.Random(0)
    rates: dict[bool, list[float]] = {False: [], True: []}
    ratios = []
    faults = {False: 0, True: 0}  # page faults of the timed steps
    for r in range(args.rounds):
        after_batches = batches(
            "source" if args.change == "rows" else "target", 100 + r
        )
        before_batches = after_batches
        if args.change == "sort":
            before_batches = batches("source", 100 + r)
        if r == 0:  # warm-up: allocator, oneDNN kernels, compiling
            for after, batch in ((False, before_batches[0]), (True, after_batches[0])):
                seconds = step(batch, after)
                if after and scope != "none":
                    print(f"first step after, compiling included: {seconds:.1f} s")
            for before, after in zip(
                before_batches[1:2], after_batches[1:2], strict=True
            ):
                step(before, False)  # a second shape: dynamic shapes compile again
                step(after, True)
        if args.warm:
            for pair in zip(before_batches, after_batches, strict=True):
                for after in (False, True):
                    step(pair[after], after)
        time_s = {False: 0.0, True: 0.0}
        tokens = {False: 0, True: 0}
        if args.in_a_row:  # each variant's batches in a row, in random order
            for after in rng.sample([False, True], 2):
                run = after_batches if after else before_batches
                step(run[-1], after)  # untimed: the heap as this variant leaves it
                for batch in run:
                    time_s[after] += step(batch, after)
                    tokens[after] += batch.n_tokens
                    faults[after] += last_faults[0]
        else:
            for pair in zip(before_batches, after_batches, strict=True):
                for after in rng.sample([False, True], 2):
                    time_s[after] += step(pair[after], after)
                    tokens[after] += pair[after].n_tokens
                    faults[after] += last_faults[0]
        for after in (False, True):
            rates[after].append(tokens[after] / time_s[after])
        ratio = (time_s[False] / tokens[False]) / (time_s[True] / tokens[True])
        ratios.append(ratio)
        print(f"round {r}: before / after x{ratio:.3f}", flush=True)
    compiled_note = f"compile {args.compile}, " if scope != "none" else ""
    print(
        f"{args.change} ({' '.join(args.overrides) + ', ' if args.overrides else ''}"
        f"{'fp32 → ' if args.change == 'stage' else ''}{args.precision}, "
        f"{args.batch_tokens}-token batches, "
        f"{args.threads} threads, {compiled_note}{'warm, ' if args.warm else ''}"
        f"{'in a row, ' if args.in_a_row else ''}"
        f"{args.rounds} rounds of {args.batches} pairs): "
        f"before {statistics.median(rates[False]):,.0f} tok/s, after "
        f"{statistics.median(rates[True]):,.0f} tok/s; speed-up x"
        f"{statistics.median(ratios):.3f} (rounds "
        + " / ".join(f"{x:.3f}" for x in ratios)
        + ")"
    )
    timed = args.rounds * args.batches
    print(
        f"page faults a step: before {faults[False] / timed:,.0f}, "
        f"after {faults[True] / timed:,.0f}"
    )


if __name__ == "__main__":
    main()
