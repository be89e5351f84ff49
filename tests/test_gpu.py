"""The trainer and the search on CUDA (``pytest -m gpu``; skipped without a device).

Each test is a CPU property checked again where CUDA changes the kernels: bf16
autocast against fp32, the compiled step loop (with CUDA graphs under
``trainer.compile_mode=reduce-overhead``) against eager, DDP over NCCL, the search's
outputs against the CPU's, and an exact resume after ``kill -9`` that must restore
the CUDA generator (dropout draws from it). The CUDA cases of the cuDNN GRU and of
the compiled loop in isolation are the ``cuda`` parameters of ``test_decoder.py`` and
``test_compile.py``. The conftest turns TF32 off for these tests, so fp32 on CUDA
compares with the CPU; the kill -9 runs go through ``seq2seq-train``'s entry point.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.testing import assert_close

from seq2seq.data.batching import Batch, collate
from seq2seq.data.prepare import prepare_data
from seq2seq.decoding.translator import Translator
from seq2seq.model.checkpoint import load_checkpoint
from seq2seq.training.distributed import DistInfo
from seq2seq.training.runtime import seed_everything
from seq2seq.training.trainer import Trainer
from tests.helpers import TINY, tiny_train_config
from tests.test_distributed import NO_DROPOUT, _free_port
from tests.test_train import _losses

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda", 0)
# Eager and compiled, DDP and plain compare in fp32 (trainer.precision=auto is bf16 on
# CUDA, whose rounding would hide what they compare).
EXACT = [*NO_DROPOUT, "trainer.precision=fp32"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """The tiny phrasebook prepared once for the module."""
    path = tmp_path_factory.mktemp("cache")
    cfg = tiny_train_config(path)
    prepare_data(cfg.data, cfg.tokenizer, path)
    return path


def _trainer(cache: Path, run: Path, *overrides: str, info=None) -> Trainer:
    cfg = tiny_train_config(cache, *overrides)
    seed_everything(cfg.trainer.seed)
    data = prepare_data(cfg.data, cfg.tokenizer, cache)
    return Trainer(cfg, run, data, CUDA, info)


def _batches(trainer: Trainer, count: int, size: int = 24) -> list[Batch]:
    """``count`` fixed batches of ``size`` training pairs, in order."""
    split = trainer.data.splits["train"]
    pairs = [(i, split.src_ids[i], split.tgt_ids[i]) for i in range(len(split))]
    return [collate(pairs[k * size : (k + 1) * size]) for k in range(count)]


def _step_losses(trainer: Trainer, batches: list[Batch]) -> list[float]:
    """Train one step per batch; the per-token losses."""
    out = []
    for batch in batches:
        result = trainer.train_step([batch])
        out.append(float(result["loss_sum"]) / float(result["tokens"]))
    return out


def test_bf16_training_step_matches_fp32(cache, tmp_path):
    results = {}
    for precision in ("fp32", "bf16"):
        trainer = _trainer(
            cache, tmp_path / precision, *NO_DROPOUT, f"trainer.precision={precision}"
        )
        result = trainer.train_step(_batches(trainer, 1, size=64))
        results[precision] = result
        # autocast computes in bf16; the weights and their Adam state stay fp32
        assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    fp32, bf16 = results["fp32"], results["bf16"]
    assert_close(bf16["loss_sum"], fp32["loss_sum"], rtol=1e-2, atol=0)
    assert_close(bf16["grad_norm"], fp32["grad_norm"], rtol=5e-2, atol=0)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_training_steps_equal_eager(cache, tmp_path, mode):
    """``trainer.compile`` in the training loop on CUDA (with ``reduce-overhead``: CUDA
    graphs, the loop padded to ``compile_bucket`` multiples) trains as eager does:
    batches of other sizes, forward, backward and optimizer steps."""
    torch._dynamo.reset()
    eager = _trainer(cache, tmp_path / "eager", *EXACT)
    # two batch sizes (24 and 13 pairs) and their source lengths: other loop shapes
    batches = _batches(eager, 2, size=24) + _batches(eager, 3, size=13)[1:]
    want = _step_losses(eager, batches)
    compiled = _trainer(
        cache,
        tmp_path / mode,
        *EXACT,
        "trainer.compile=true",
        f"trainer.compile_mode={mode}",
    )
    assert compiled.model.decoder.compile_loop
    got = _step_losses(compiled, batches)
    # (weights are not compared: Adam turns a gradient's rounding near 0 into a
    # step of the learning rate's size)
    assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=0)


def test_ddp_over_nccl_at_world_size_one_trains_as_one_process(
    cache, tmp_path, monkeypatch
):
    """The trainer's DDP path (wrapper, all-reduce of the token count, no_sync
    over accumulated micro-batches) on NCCL; at world size 1 it is plain training."""
    plain = _trainer(cache, tmp_path / "plain", *EXACT, "trainer.accumulate=2")
    batches = _batches(plain, 6)
    want = [plain.train_step(batches[i : i + 2]) for i in range(0, 6, 2)]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    # DistInfo.enabled is world_size > 1: wrap in DDP at world size 1 all the same.
    monkeypatch.setattr(DistInfo, "enabled", property(lambda self: True))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=CUDA)
    try:
        ddp = _trainer(
            cache, tmp_path / "ddp", *EXACT, "trainer.accumulate=2", info=DistInfo()
        )
        assert isinstance(ddp.train_model, torch.nn.parallel.DistributedDataParallel)
        got = [ddp.train_step(batches[i : i + 2]) for i in range(0, 6, 2)]
    finally:
        dist.destroy_process_group()
    for g, w in zip(got, want, strict=True):
        assert_close(g["loss_sum"], w["loss_sum"], rtol=1e-4, atol=0)
        assert_close(g["grad_norm"], w["grad_norm"], rtol=1e-4, atol=0)


@pytest.fixture(scope="module")
def trained(cache, tmp_path_factory) -> tuple[Path, Trainer]:
    """A tiny phrasebook model trained 500 steps on CUDA, saved as last.pt."""
    run = tmp_path_factory.mktemp("trained")
    trainer = _trainer(cache, run, "trainer.precision=fp32")
    batches = _batches(trainer, 12, size=32)
    for step in range(500):
        trainer.train_step([batches[step % len(batches)]])
    trainer.progress.step = 500
    return trainer.save("last.pt"), trainer


@pytest.mark.parametrize("beam_size", [1, 5])
def test_search_on_cuda_gives_the_cpus_outputs(trained, beam_size):
    path, trainer = trained
    split = trainer.data.splits["validation"]
    outputs = {}
    for device in ("cpu", "cuda"):
        translator = Translator.from_checkpoint(
            path, device=device, precision="fp32", beam_size=beam_size
        )
        outputs[device] = [h.tokens for h in translator.hypotheses(split)]
    assert sum(map(len, outputs["cpu"])) > 2 * len(split), "a model that says little"
    differ = [
        (i, c, g)
        for i, (c, g) in enumerate(zip(outputs["cpu"], outputs["cuda"], strict=True))
        if c != g
    ]
    assert not differ, f"{len(differ)} of {len(split)} differ, e.g. {differ[:3]}"


def _train_command(run: Path, cache: Path, *overrides: str) -> list[str]:
    # seq2seq-train's entry point, wherever pip put the script (the GPU image's python
    # may not hold its scripts beside itself)
    return [
        sys.executable,
        "-c",
        "from seq2seq.cli.train import main; main()",
        *TINY,
        f"data.cache_dir={cache}",
        "trainer.device=cuda",
        "trainer.precision=fp32",
        "trainer.log_every=1",
        "trainer.valid_every=4",
        "trainer.valid_max_sentences=8",
        "trainer.alignment_samples=0",
        "trainer.max_epochs=1000",
        "evaluate_test=false",
        f"hydra.run.dir={run}",
        *overrides,
    ]


def _killed_at_a_checkpoint(run: Path, cache: Path, at_least: int) -> Path:
    """``seq2seq-train`` killed with SIGKILL once its last.pt is at ``at_least``
    steps or more; that last.pt."""
    last = run / "checkpoints" / "last.pt"
    run.mkdir(parents=True)
    with open(run.parent / f"{run.name}.log", "w+b") as log:
        proc = subprocess.Popen(
            _train_command(run, cache, "trainer.max_steps=100000"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and proc.poll() is None:
                if last.is_file() and load_checkpoint(last)["step"] >= at_least:
                    break
                time.sleep(0.05)
            alive = proc.poll() is None
        finally:
            proc.send_signal(signal.SIGKILL)  # kill -9
            proc.wait()
        log.seek(0)
        assert alive, log.read().decode(errors="replace")[-2000:]
    assert last.is_file(), f"no checkpoint of {at_least} steps within 90 s"
    return last


def test_kill_9_resume_on_cuda_restores_the_cuda_generator(cache, tmp_path):
    """Dropout draws from the CUDA generator: a run killed with SIGKILL and resumed
    from its last.pt continues an uninterrupted run (to CUDA's atomics' rounding)."""
    last = _killed_at_a_checkpoint(tmp_path / "killed", cache, at_least=8)
    state = load_checkpoint(last)
    step = state["step"]
    assert "cuda" in state["rng"], "the checkpoint lacks the CUDA generator's state"
    end = f"trainer.max_steps={step + 6}"
    for run, extra in [("full", []), ("resumed", [f"trainer.resume_from={last}"])]:
        proc = subprocess.run(
            _train_command(tmp_path / run, cache, end, *extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    full, resumed = _losses(tmp_path / "full"), _losses(tmp_path / "resumed")
    steps = list(range(step + 1, step + 7))
    assert sorted(resumed) == steps
    assert_close(
        torch.tensor([resumed[s] for s in steps]),
        torch.tensor([full[s] for s in steps]),
        rtol=1e-4,
        atol=0,
    )
