"""torchrun / DDP set-up and rank helpers (no home-made launcher).

``torchrun --nproc_per_node=N --no-python seq2seq-train ...`` sets ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``; ``init_distributed`` turns them into a process
group (NCCL on CUDA, gloo on CPU). Every rank maps the same prepared cache, plans the
batches of its own share of each epoch and trains on them; rank 0 alone logs and
saves.

One log per run: every rank runs the same code, so without a filter each validation
and progress line would be logged once per rank, on the console and in the run's
``train.log`` alike. ``quiet_other_ranks`` puts a ``RankFilter`` on the root
logger's handlers (Hydra's console and file handlers) of every rank but 0: their
INFO lines are dropped, their warnings and errors still show, marked ``[rank N]``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device_type: str) -> DistInfo:
    """Join the group torchrun describes; a single process gets ``DistInfo()``."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo()
    info = DistInfo(
        rank=int(os.environ["RANK"]),
        world_size=world_size,
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            torch.cuda.set_device(info.local_rank)
        dist.init_process_group(backend=backend)
    quiet_other_ranks(info)
    log.info("rank %d of %d joined the process group", info.rank, info.world_size)
    return info


class RankFilter(logging.Filter):
    """A handler filter of a rank other than 0: warnings and errors only, each
    marked with the rank (once, though the record passes several handlers)."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        if not getattr(record, "rank_marked", False):
            record.msg = f"[rank {self.rank}] {record.msg}"
            record.rank_marked = True
        return True


def quiet_other_ranks(info: DistInfo) -> None:
    """On ranks other than 0, filter the root logger's handlers (``RankFilter``);
    rank 0 and a single process log as they are."""
    if info.is_main:
        return
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RankFilter) for f in handler.filters):
            handler.addFilter(RankFilter(info.rank))


def all_reduce_sum(value: float | int, device: torch.device) -> float:
    """The sum of ``value`` over ranks (the value itself in a single process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return float(value)
    tensor = torch.tensor(float(value), device=device, dtype=torch.float64)
    dist.all_reduce(tensor)
    return float(tensor)


def max_over_ranks(value: int) -> int:
    """The largest ``value`` of any rank: the batch count every rank runs, when each
    plans its own share of an epoch."""
    if not (dist.is_available() and dist.is_initialized()):
        return int(value)
    tensor = torch.tensor(int(value), dtype=torch.int64)
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor)


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank (``obj`` itself in a single process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
