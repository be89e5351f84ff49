"""DDP on two CPU processes (gloo): sharded steps equal one combined step; resume."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from seq2seq.data.batching import collate
from seq2seq.data.prepare import prepare_data
from seq2seq.training.distributed import DistInfo, quiet_other_ranks
from seq2seq.training.runtime import seed_everything
from seq2seq.training.trainer import Trainer
from tests.helpers import (
    TINY,
    assert_gradients_close,
    record_step_gradients,
    tiny_train_config,
)

pytestmark = pytest.mark.slow

NO_DROPOUT = [
    "model.emb_dropout=0",
    "model.encoder.dropout=0",
    "model.decoder.dropout=0",
    "trainer.threads=1",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _trainer(tmp: Path, run: str, info: DistInfo, *overrides: str) -> Trainer:
    cfg = tiny_train_config(tmp / "cache", *NO_DROPOUT, *overrides)
    seed_everything(cfg.trainer.seed)
    torch.set_num_threads(1)
    data = prepare_data(cfg.data, cfg.tokenizer, Path(cfg.data.cache_dir))
    return Trainer(cfg, tmp / run, data, torch.device("cpu"), info)


def _examples(trainer: Trainer, ids: list[int]) -> list:
    split = trainer.data.splits["train"]
    return [(i, split.src_ids[i], split.tgt_ids[i]) for i in ids]


def _join(rank: int, port: int) -> DistInfo:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    return DistInfo(rank=rank, world_size=2, local_rank=rank)


def _leave() -> None:
    """Both ranks finish together, then exit without gloo's teardown: destroying
    the group, or the interpreter's exit joining gloo's threads, aborted a rank now
    and then (SIGABRT, "terminate called without an active exception"), even after
    a barrier. Every file a worker writes is closed before it calls this; exit code
    0 is what ``mp.spawn`` checks."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _sharded_step(rank: int, port: int, tmp: Path, extra: tuple = ()) -> None:
    info = _join(rank, port)
    trainer = _trainer(tmp, "ddp", info, *extra)
    grads = record_step_gradients(trainer)
    # Uneven shards: 3 and 5 sentences, so token normalisation matters.
    shard = list(range(3)) if rank == 0 else list(range(3, 8))
    stats = trainer.train_step([collate(_examples(trainer, shard))])
    loss = stats["loss_sum"].clone()
    dist.all_reduce(loss)
    if rank == 0:
        torch.save(
            {"grads": grads, "loss": loss, "grad_norm": stats["grad_norm"]},
            tmp / "ddp.pt",
        )
    _leave()


SELF_ATTENTION = (
    "model.encoder.self_attention.layers=1",
    "model.encoder.self_attention.dropout=0",
)


@pytest.mark.parametrize("extra", [(), SELF_ATTENTION], ids=["plain", "blocks"])
def test_one_step_on_two_shards_equals_one_step_on_the_combined_batch(tmp_path, extra):
    """What the paths compute: the all-reduced gradients, the loss and the gradient
    norm, to summation order. Not the weights after the step: Adam's first update
    is about lr · sign(g), so a near-0 gradient whose sign depends on the order of a
    sum (it did on an AVX2-only EPYC) moves a weight by up to 2 · lr."""
    single = _trainer(tmp_path, "single", DistInfo(), *extra)
    grads = record_step_gradients(single)
    stats = single.train_step([collate(_examples(single, list(range(8))))])
    mp.spawn(_sharded_step, args=(_free_port(), tmp_path, extra), nprocs=2, join=True)
    sharded = torch.load(tmp_path / "ddp.pt", weights_only=True)
    assert_gradients_close(sharded["grads"], grads)
    torch.testing.assert_close(sharded["loss"], stats["loss_sum"], rtol=1e-5, atol=0)
    torch.testing.assert_close(
        sharded["grad_norm"], stats["grad_norm"], rtol=1e-3, atol=0
    )


def _train_and_resume(rank: int, port: int, tmp: Path) -> None:
    info = _join(rank, port)
    first = _trainer(tmp, "run", info, "trainer.max_steps=4")
    first.fit()
    dist.barrier()
    resumed = _trainer(tmp, "run", info, "trainer.max_steps=7")
    resumed.resume(tmp / "run" / "checkpoints" / "last.pt")
    assert resumed.progress.step == 4
    result = resumed.fit()
    assert result.progress.step == 7
    dist.barrier()
    _leave()


def test_two_ranks_train_save_once_and_resume(tmp_path):
    prepare = _trainer(tmp_path, "prep", DistInfo())  # build the cache once
    n_batches = len(prepare.sampler)
    mp.spawn(_train_and_resume, args=(_free_port(), tmp_path), nprocs=2, join=True)
    state = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 7
    # Each rank saw its own shard: an epoch is half as many steps as one process takes.
    assert state["sampler"]["position"] <= (n_batches + 1) // 2
    events = list((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))
    assert len(events) == 2  # one writer (rank 0), once per run: first and resumed


def _budget_run(rank: int, port: int, tmp: Path) -> None:
    info = _join(rank, port)
    trainer = _trainer(
        tmp,
        f"budget{rank}",
        info,
        "scheduler=budget",
        "scheduler.warmup_steps=0",
        "trainer.max_minutes=0.05",  # 3 s: the clock, not the epochs, sets the rate
        "trainer.valid_every=null",
    )
    lrs, update = [], trainer.budget.update

    def recording_update(step: int, fraction: float) -> None:
        update(step, fraction)
        lrs.append(trainer.optimizer.param_groups[0]["lr"])

    trainer.budget.update = recording_update
    if rank == 1:
        time.sleep(0.5)  # this rank's clock runs 0.5 s behind rank 0's
    trainer.fit()
    state = {"lrs": lrs, "model": trainer.model.state_dict()}
    torch.save(state, tmp / f"rank{rank}.pt")
    _leave()


def test_budget_schedule_sets_one_learning_rate_on_every_rank(tmp_path):
    _trainer(tmp_path, "prep", DistInfo())  # build the cache once
    mp.spawn(_budget_run, args=(_free_port(), tmp_path), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert len(ranks[0]["lrs"]) > 3
    assert ranks[0]["lrs"] == ranks[1]["lrs"]
    for name, weight in ranks[0]["model"].items():
        torch.testing.assert_close(ranks[1]["model"][name], weight, rtol=0, atol=0)


def _sampled_epochs(rank: int, port: int, tmp: Path) -> None:
    info = _join(rank, port)
    trainer = _trainer(tmp, "sampled", info, "tokenizer.sampling_alpha=0.2")
    seen = {}
    for epoch in (0, 1):
        trainer.sampler.set_epoch(epoch)
        batches = [b.tolist() for b in trainer.sampler.epoch_batches()]
        current = trainer.loader.dataset.current
        mine = sorted(i for b in batches for i in b)
        seen[epoch] = {
            "batches": batches,
            "src": {i: current.src_ids[i] for i in mine},
        }
    (tmp / f"rank{rank}.json").write_text(json.dumps(seen))
    _leave()


def test_two_ranks_sample_their_own_shares_and_run_as_many_steps(tmp_path):
    """Each rank samples the pieces of its own share only and plans its batches on
    them; the ranks agree on the number of steps (or they would wait for each
    other forever), and together they cover every pair once."""
    n = len(_trainer(tmp_path, "prep", DistInfo()).data.splits["train"])
    mp.spawn(_sampled_epochs, args=(_free_port(), tmp_path), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for epoch in ("0", "1"):
        shards = [[i for b in rank[epoch]["batches"] for i in b] for rank in ranks]
        assert len(ranks[0][epoch]["batches"]) == len(ranks[1][epoch]["batches"])
        assert not set(shards[0]) & set(shards[1])
        assert sorted(shards[0] + shards[1]) == list(range(n))
    assert ranks[0]["0"]["src"] != ranks[0]["1"]["src"]  # a fresh cut each epoch


def test_other_ranks_log_only_warnings_and_errors_marked_with_their_rank():
    streams = [io.StringIO(), io.StringIO()]  # a console and a file handler
    handlers = [logging.StreamHandler(stream) for stream in streams]
    root = logging.getLogger()
    # only these handlers: the filter must not stay on pytest's capture handlers
    saved, root.handlers = root.handlers, handlers
    log = logging.getLogger("seq2seq.training.trainer")
    # setLevel, not ``log.level =``: it clears the loggers' cache of enabled levels,
    # which an earlier test may have filled while this logger was at WARNING
    level = log.level
    log.setLevel(logging.INFO)
    try:
        quiet_other_ranks(DistInfo(rank=0, world_size=2))  # rank 0: unchanged
        log.info("step 2 | valid loss 1.0")
        quiet_other_ranks(DistInfo(rank=1, world_size=2))
        quiet_other_ranks(DistInfo(rank=1, world_size=2))  # once only
        log.info("step 4 | valid loss 0.9")
        log.warning("non-finite loss at step %d", 5)
        log.error("failed")
    finally:
        root.handlers = saved
        log.setLevel(level)
    want = (
        "step 2 | valid loss 1.0\n[rank 1] non-finite loss at step 5\n[rank 1] failed\n"
    )
    assert [stream.getvalue() for stream in streams] == [want, want]


def test_under_torchrun_each_validation_is_logged_once(tmp_path):
    """Two CPU ranks (gloo) through the real command: each validation once on the
    console and once in the run's log, which ``log_lines`` counts."""
    run = tmp_path / "run"
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "torchrun"),
            "--nproc_per_node=2",
            "--no-python",
            str(Path(sys.executable).parent / "seq2seq-train"),
            *TINY,
            f"data.cache_dir={tmp_path / 'cache'}",
            "trainer.max_steps=4",
            "trainer.valid_every=2",
            "evaluate_test=false",
            f"hydra.run.dir={run}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    console = [x for x in proc.stderr.splitlines() if "| valid loss" in x]
    logged = [
        x for x in (run / "train.log").read_text().splitlines() if "| valid loss" in x
    ]
    assert len(console) == 2, proc.stderr  # steps 2 and 4, once each
    assert len(logged) == 2
    assert [x.split(" - ", 1)[1] for x in console] == [
        x.split(" - ", 1)[1] for x in logged
    ]
    assert "[rank 1]" not in "".join(logged + console)  # nothing to warn about
