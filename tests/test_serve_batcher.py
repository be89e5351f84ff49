"""The batcher alone, with a runner that records its calls: jobs of one key share a
run within the budget, other keys wait their turn, a job that finds the thread idle
starts alone and those that come while it runs share the next run, a timed-out or
cancelled job is dropped, and a failing batch is rerun job by job."""

from __future__ import annotations

import asyncio
import threading

import pytest

from seq2seq.serve import batcher as batcher_module
from seq2seq.serve.batcher import Batcher, Busy, TimedOut


class Recorder:
    """A runner: each payload's answer is its double; ``fail`` payloads raise."""

    def __init__(self, fail=(), delay=0.0, gate=None):
        self.calls: list[tuple] = []
        self.threads: set[str] = set()
        self.fail, self.delay = set(fail), delay
        self.gate = gate  # a threading.Event each run waits for

    def __call__(self, key, payloads):
        self.calls.append((key, list(payloads)))
        self.threads.add(threading.current_thread().name)
        threading.Event().wait(self.delay)
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail & set(payloads):
            raise RuntimeError("a bug")
        return [2 * p for p in payloads]


async def _many(batcher, jobs, timeout=5.0):
    batcher.start()
    try:
        answers = await asyncio.gather(
            *(batcher.submit(k, p, c, timeout) for k, p, c in jobs),
            return_exceptions=True,
        )
        return [a[0] if isinstance(a, tuple) else a for a in answers]
    finally:
        await batcher.stop()


async def _until(condition, seconds=10.0):
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never came")


def test_an_idle_thread_starts_a_job_at_once_and_gathers_those_that_come_meanwhile():
    """No wait for company: the first job runs alone while the next five queue,
    and those five share the next run (a gate holds the first run open)."""
    gate = threading.Event()
    runner = Recorder(gate=gate)
    batcher = Batcher(runner, max_cost=100)

    async def scenario():
        batcher.start()
        try:
            first = asyncio.ensure_future(batcher.submit("a", 0, 1, 10))
            await _until(lambda: runner.calls)  # running alone, nobody waited
            assert batcher.running and not batcher.stalled(60)
            rest = [
                asyncio.ensure_future(batcher.submit("a", k, 1, 10))
                for k in range(1, 6)
            ]
            await _until(lambda: batcher.pending() == 5)
            await asyncio.sleep(0.05)
            assert batcher.stalled(0.01)  # work waits, nothing finished lately
            gate.set()
            answers = await asyncio.gather(first, *rest)
            assert not batcher.stalled(0.0)  # idle again
            return answers
        finally:
            await batcher.stop()

    answers = asyncio.run(scenario())
    assert [a for a, _ in answers] == [0, 2, 4, 6, 8, 10]
    assert [ps for _, ps in runner.calls] == [[0], [1, 2, 3, 4, 5]]
    job = answers[1][1]  # when it was queued, started and finished
    assert job.queued <= job.started <= job.finished


@pytest.mark.parametrize("last_jobs", [1, 3])
def test_after_a_batch_its_clients_are_awaited_and_a_lone_client_is_not(
    last_jobs, monkeypatch
):
    """After a search of three jobs the next waits (here up to 0.5 s) until three
    have come; after a lone job's search a job starts at once and the two that
    come 0.05 s later share the next run."""
    monkeypatch.setattr(batcher_module, "RETURN_WAIT_S", 0.5)
    runner = Recorder()
    batcher = Batcher(runner, max_cost=100)
    batcher.last_jobs, batcher.last_run_s = last_jobs, 10.0

    async def scenario():
        batcher.start()
        try:
            first = asyncio.ensure_future(batcher.submit("a", 0, 1, 10))
            await asyncio.sleep(0.05)
            rest = [batcher.submit("a", k, 1, 10) for k in (1, 2)]
            return await asyncio.gather(first, *rest)
        finally:
            await batcher.stop()

    answers = asyncio.run(scenario())
    assert [a for a, _ in answers] == [0, 2, 4]
    runs = [ps for _, ps in runner.calls]
    assert runs == ([[0, 1, 2]] if last_jobs == 3 else [[0], [1, 2]])


def test_a_cancelled_job_is_dropped_before_its_search():
    """A client that leaves (its submit cancelled) while its job waits: the job
    never reaches the runner, and the others are answered."""
    gate = threading.Event()
    runner = Recorder(gate=gate)
    batcher = Batcher(runner)

    async def scenario():
        batcher.start()
        try:
            busy = asyncio.ensure_future(batcher.submit("a", 1, 1, 10))
            await _until(lambda: runner.calls)
            gone = asyncio.ensure_future(batcher.submit("a", 2, 1, 10))
            stays = asyncio.ensure_future(batcher.submit("a", 3, 1, 10))
            await _until(lambda: batcher.pending() == 2)
            gone.cancel()
            await asyncio.gather(gone, return_exceptions=True)  # it has left
            gate.set()
            return (await busy)[0], (await stays)[0], gone.cancelled()
        finally:
            await batcher.stop()

    assert asyncio.run(scenario()) == (2, 6, True)
    assert [ps for _, ps in runner.calls] == [[1], [3]]


def test_jobs_of_one_key_share_a_run_within_the_budget():
    runner = Recorder()
    batcher = Batcher(runner, max_wait_s=0.05, max_cost=10)
    jobs = [("a", k, 3) for k in range(5)] + [("b", 10 + k, 1) for k in range(3)]
    answers = asyncio.run(_many(batcher, jobs))
    assert answers == [2 * p for _, p, _ in jobs]
    key_of = {p: k for k, p, _ in jobs}
    cost_of = {p: c for _, p, c in jobs}
    for key, payloads in runner.calls:
        assert {key_of[p] for p in payloads} == {key}
        assert sum(cost_of[p] for p in payloads) <= 10
    assert sorted(p for _, ps in runner.calls for p in ps) == sorted(
        p for _, p, _ in jobs
    )
    assert len(runner.calls) < len(jobs)  # gathered
    assert len(runner.threads) == 1  # one model thread


def test_without_batching_each_job_runs_alone():
    runner = Recorder()
    batcher = Batcher(runner, max_wait_s=0.05, batching=False)
    answers = asyncio.run(_many(batcher, [("a", k, 1) for k in range(4)]))
    assert answers == [0, 2, 4, 6] and all(len(ps) == 1 for _, ps in runner.calls)


def test_a_failing_batch_is_rerun_job_by_job():
    runner = Recorder(fail={3})
    batcher = Batcher(runner, max_wait_s=0.05)
    answers = asyncio.run(_many(batcher, [("a", k, 1) for k in range(5)]))
    assert isinstance(answers[3], RuntimeError)
    assert [a for k, a in enumerate(answers) if k != 3] == [0, 2, 4, 8]


def test_a_job_past_its_timeout_is_dropped_and_a_full_queue_refused():
    runner = Recorder(delay=0.3)
    batcher = Batcher(runner, max_wait_s=0.0, max_queue=2)
    jobs = [("a", 1, 1), ("b", 2, 1), ("c", 3, 1), ("d", 4, 1)]
    answers = asyncio.run(_many(batcher, jobs, timeout=0.1))
    assert all(isinstance(a, (TimedOut, Busy)) for a in answers), answers
    assert any(isinstance(a, Busy) for a in answers)
    ran = [p for _, ps in runner.calls for p in ps]
    assert len(ran) < 4  # those that timed out while waiting never ran


@pytest.mark.parametrize("wait", [0.0, 0.02])
def test_answers_come_back_to_their_own_request(wait):
    runner = Recorder()
    batcher = Batcher(runner, max_wait_s=wait, max_cost=1000)
    jobs = [(k % 3, k, 1) for k in range(30)]
    answers = asyncio.run(_many(batcher, jobs))
    assert answers == [2 * k for k in range(30)]


def test_runs_go_to_the_thread_the_model_was_loaded_on():
    """The server loads the model on ``model_thread()`` and hands that thread to
    the batcher: every run happens there (one OpenMP team), and ``stop`` shuts it."""
    thread = batcher_module.model_thread()
    loaded_on = thread.submit(lambda: threading.current_thread().name).result()
    runner = Recorder()
    batcher = Batcher(runner, thread=thread)
    answers = asyncio.run(_many(batcher, [("k", p, 1) for p in range(6)]))
    assert answers == [0, 2, 4, 6, 8, 10]
    assert runner.threads == {loaded_on}
    with pytest.raises(RuntimeError, match="shutdown"):
        thread.submit(print)
