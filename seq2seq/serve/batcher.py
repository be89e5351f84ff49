"""Concurrent requests gathered into one search, run on one worker thread.

Torch is not made faster by concurrent calls on a few cores, but a search over many
sentences at once costs little more than over one: so requests wait in a queue while
a search runs, and when it ends the worker takes the first one waiting with the
others that can share its search (the same ``key``: the same kind and decoding
settings) up to a budget of ``max_cost`` source pieces, and runs them in one call of
``run(key, payloads)`` on its one thread. A request that finds the thread idle starts
at once: a lone client pays no wait for company (``max_wait_s`` > 0 adds one). The
clients a batch answered come back together, each a moment after its answer: after a
search that held several jobs, the next waits for as many again, at most
``RETURN_WAIT_S`` and half of that search's time, so that many clients keep
filling whole searches instead of a lone early one followed by the rest. A job
that waited past its timeout, or whose client left (its future cancelled), is dropped
before it runs; a batch that fails is retried job by job, so one bad request fails
alone.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from seq2seq.config import ServeConfig

log = logging.getLogger(__name__)

POLL_S = 0.0005  # how often the gathering looks at the queue
RETURN_WAIT_S = 0.02  # the longest wait for a batch's clients to come back
Runner = Callable[[Hashable, Sequence[Any]], Sequence[Any]]


class Busy(RuntimeError):
    """The queue is full: the client may retry later."""


class TimedOut(RuntimeError):
    """A job waited and ran past its timeout."""


@dataclass
class QueuedJob:
    """One submitted payload in the queue: its key and cost, the future its answer
    goes to, and when it was queued (for its timeout)."""

    key: Hashable
    payload: Any
    cost: int
    future: asyncio.Future
    queued: float = field(default_factory=time.monotonic)
    started: float | None = None  # when its search began (monotonic)
    finished: float | None = None  # when its search ended


Observer = Callable[[Sequence[QueuedJob]], None]


def model_thread() -> ThreadPoolExecutor:
    """The one thread that touches the model: loading, warm-up and every search.

    Torch's OpenMP runtime gives each thread that enters a parallel region its own
    team of workers; a model loaded on one thread and run on another leaves two
    teams contending for the cores (a search of 32 sentences took 35 ms instead of
    20 on a 2-core AMD EPYC). So the server loads and warms the model on the thread
    that runs it, and the event loop does no tensor work."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")


class Batcher:
    """Gathers jobs of one key into batches for ``run`` on one worker thread.

    ``batching`` False: each job runs alone (the same queue, the same thread), which
    is what the benchmark compares against. ``observe(jobs)`` is called on the event
    loop after each run (metrics). The defaults are ``ServeConfig``'s
    (``max_wait_ms``, ``batch_pieces``, ``max_queue``); ``thread`` is the model's
    (``model_thread``; a new one when None), shut down by ``stop``.
    """

    def __init__(
        self,
        run: Runner,
        max_wait_s: float = ServeConfig.max_wait_ms / 1000,
        max_cost: int = ServeConfig.batch_pieces,
        max_queue: int = ServeConfig.max_queue,
        batching: bool = ServeConfig.batching,
        observe: Observer | None = None,
        thread: ThreadPoolExecutor | None = None,
    ):
        self.run = run
        self.observe = observe
        self.max_wait_s = max_wait_s if batching else 0.0
        self.max_cost = max_cost
        self.max_queue = max_queue
        self.batching = batching
        self.queue: asyncio.Queue[QueuedJob] = asyncio.Queue()
        self.held: collections.deque[QueuedJob] = collections.deque()
        self.executor = model_thread() if thread is None else thread
        self.task: asyncio.Task | None = None
        self.batches = 0  # how many runs, and how many jobs they held: /info
        self.jobs = 0
        self.running = False  # a search is on the thread
        self.progress = time.monotonic()  # the last run's end, or idle's end
        self.last_jobs = 0  # how many jobs the last search held, and its seconds
        self.last_run_s = 0.0

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop gathering (uvicorn has drained the requests) and free the thread."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.executor.shutdown(wait=True)

    def pending(self) -> int:
        return self.queue.qsize() + len(self.held)

    def stalled(self, limit_s: float) -> bool:
        """Work waits or runs and the thread has finished nothing for ``limit_s``
        (readiness: a stuck model thread)."""
        busy = self.running or self.pending() > 0
        return busy and time.monotonic() - self.progress > limit_s

    async def submit(
        self, key: Hashable, payload: Any, cost: int, timeout: float
    ) -> tuple[Any, QueuedJob]:
        """``run(key, [payload, ...])``'s answer for ``payload``, and its job (when
        it was queued, started and finished); ``Busy`` when the queue is full,
        ``TimedOut`` after ``timeout`` seconds. Cancelling the caller drops the job
        unless its search has begun."""
        if self.pending() >= self.max_queue:
            raise Busy(f"{self.pending()} requests are waiting")
        if not self.running and self.pending() == 0:
            self.progress = time.monotonic()  # idle until now: no stall
        future = asyncio.get_running_loop().create_future()
        job = QueuedJob(key, payload, cost, future)
        await self.queue.put(job)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout), job
        except asyncio.TimeoutError:
            future.cancel()  # dropped unless it is running already
            raise TimedOut(f"no answer within {timeout:g} s") from None
        except asyncio.CancelledError:
            future.cancel()  # the client left: dropped unless running
            raise

    async def _next(self) -> QueuedJob:
        return self.held.popleft() if self.held else await self.queue.get()

    async def _gather(self) -> list[QueuedJob]:
        """The first job and the others waiting that share its key, within the
        budget (those that came while the last search ran; ``max_wait_s``: and
        those that come that long after the first)."""
        first = await self._next()
        jobs, cost = [first], first.cost
        if not self.batching:
            return jobs
        kept = collections.deque()
        for job in self.held:  # those that waited for another key's batch first
            if job.key == first.key and cost + job.cost <= self.max_cost:
                jobs.append(job)
                cost += job.cost
            else:
                kept.append(job)
        self.held = kept
        wait_s, enough = self._company()
        deadline = time.monotonic() + wait_s
        while cost < self.max_cost:
            try:
                job = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                left = deadline - time.monotonic()
                if left <= 0 or len(jobs) >= enough:
                    break
                # a short sleep, not wait_for(queue.get()): a get cancelled as an
                # item arrives can lose it on Python 3.11
                await asyncio.sleep(min(left, POLL_S))
                continue
            if job.key == first.key and cost + job.cost <= self.max_cost:
                jobs.append(job)
                cost += job.cost
            else:
                self.held.append(job)
        return jobs

    def _company(self) -> tuple[float, float]:
        """How long a batch may wait for more jobs, and with how many it stops
        waiting (it takes all those waiting already in any case): ``max_wait_s``
        when set; else, after a search that held several jobs, their clients'
        return (as many again, within ``RETURN_WAIT_S`` and half of that search);
        else none: a lone client starts at once."""
        if self.max_wait_s > 0:
            return self.max_wait_s, float("inf")
        if self.last_jobs > 1:
            return min(RETURN_WAIT_S, self.last_run_s / 2), self.last_jobs
        return 0.0, float("inf")

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [j for j in await self._gather() if not j.future.done()]
            if not jobs:
                continue
            self.batches += 1
            self.jobs += len(jobs)
            self.running = True
            started = time.monotonic()
            try:
                outcomes = await loop.run_in_executor(
                    self.executor, self._run_all, jobs
                )
            finally:
                self.running = False
                self.progress = time.monotonic()
                self.last_jobs, self.last_run_s = len(jobs), self.progress - started
            for job, (ok, value) in zip(jobs, outcomes, strict=True):
                job.started, job.finished = started, self.progress
                if job.future.done():
                    continue
                if ok:
                    job.future.set_result(value)
                else:
                    job.future.set_exception(value)
            if self.observe is not None:
                self.observe(jobs)

    def _run_all(self, jobs: list[QueuedJob]) -> list[tuple[bool, Any]]:
        """On the worker thread: one run for all; if it fails, one run per job."""
        key = jobs[0].key
        try:
            results = self.run(key, [j.payload for j in jobs])
            return [(True, r) for r in results]
        except Exception as err:
            if len(jobs) == 1:
                return [(False, err)]
        log.warning(
            "a batch of %d requests failed: retrying them one by one", len(jobs)
        )
        out = []
        for job in jobs:
            try:
                out.append((True, self.run(key, [job.payload])[0]))
            except Exception as err:
                out.append((False, err))
        return out
