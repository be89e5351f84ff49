"""Liveness and readiness: ``/health`` answers while the process serves;
``/ready`` says whether a request sent now would be answered in time: not before
the model's thread starts, not while the server drains on a stop signal, and not
while work waits and the thread has finished nothing within ``timeout_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from seq2seq.serve.batcher import Batcher


@dataclass
class Health:
    """The server's state as the probes see it."""

    timeout_s: float
    batcher: Batcher | None = None  # set when the model's thread starts
    draining: bool = False  # a stop signal came: finishing, taking no more

    def drain(self) -> None:
        self.draining = True

    def not_ready(self) -> str | None:
        """Why a request would not be answered in time now (None: it would)."""
        if self.batcher is None:
            return "the model is not loaded yet"
        if self.draining:
            return "the server is stopping"
        if self.batcher.stalled(self.timeout_s):
            return (
                f"{self.batcher.pending()} requests wait and the model has finished "
                f"nothing for {self.timeout_s:g} s (timeout_s)"
            )
        return None
