"""What ``GET /metrics`` tells Prometheus: requests by route and status, the time
requests waited and the searches took, the queue, the batches, the pieces
translated, the answer cache, and which model serves.

Each application has its own ``CollectorRegistry``, not the library's global one,
so several servers in one process (the tests) count apart. Names start with
``seq2seq_serve_``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

from seq2seq.serve.batcher import QueuedJob

# seconds: from a cached answer (under a millisecond) to a timeout (30 s)
TIMES = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = CONTENT_TYPE_LATEST


def _succeeded(job: QueuedJob) -> bool:
    future = job.future
    return future.done() and not future.cancelled() and future.exception() is None


class Metrics:
    """The server's counters, in a registry of their own."""

    def __init__(self, waiting: Callable[[], int], model: dict[str, str]):
        self.registry = CollectorRegistry()
        r, p = self.registry, "seq2seq_serve_"
        self.requests = Counter(
            p + "requests", "Requests answered", ["route", "status"], registry=r
        )
        self.queue_seconds = Histogram(
            p + "queue_seconds",
            "Time a request waited for the model thread",
            buckets=TIMES,
            registry=r,
        )
        self.compute_seconds = Histogram(
            p + "compute_seconds",
            "Time of the search that answered a request",
            buckets=TIMES,
            registry=r,
        )
        self.batch_size = Histogram(
            p + "batch_size", "Requests per search", buckets=SIZES, registry=r
        )
        self.pieces = Counter(
            p + "pieces", "Source pieces translated (answered requests)", registry=r
        )
        self.abandoned = Counter(
            p + "abandoned",
            "Requests dropped because their client left before the answer",
            registry=r,
        )
        self.cache = Counter(
            p + "cache", "Answer cache look-ups", ["result"], registry=r
        )
        depth = Gauge(p + "queue_depth", "Requests waiting", registry=r)
        depth.set_function(waiting)
        Info(p + "model", "The model served", registry=r).info(model)

    def observe(self, jobs: Sequence[QueuedJob]) -> None:
        """One search's jobs (``Batcher``'s ``observe``)."""
        self.batch_size.observe(len(jobs))
        for job in jobs:
            if job.started is not None and job.finished is not None:
                self.queue_seconds.observe(job.started - job.queued)
                self.compute_seconds.observe(job.finished - job.started)
            if _succeeded(job):
                self.pieces.inc(job.cost)

    def render(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)


def model_labels(info: dict[str, Any]) -> dict[str, str]:
    """``Engine.info``'s model, languages and version as the Info metric's labels."""
    model = info.get("model", {})
    languages = info.get("languages") or {}
    return {
        "checkpoints": ",".join(model.get("checkpoints", [])),
        "step": str(model.get("step")),
        "parameters": str(model.get("parameters")),
        "attention": str(model.get("attention", "")),
        "ensemble": str(model.get("ensemble", False)).lower(),
        "source": str(languages.get("source", "")),
        "target": str(languages.get("target", "")),
        "device": str(info.get("device", "")),
        "version": str(info.get("version", "")),
    }
