"""Recent answers, answered again without a search: what the page asks again when
a word is typed and erased, or a client retries.

Keyed on a job's key and payload (``engine.CheckedRequest``): all that ``run``
reads, so one key is one answer while the model is fixed. Least recently used
first out; ``size`` 0 keeps nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

MISSING = object()


class AnswerCache:
    """At most ``size`` answers, the least recently used dropped first."""

    def __init__(self, size: int):
        self.size = size
        self.answers: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        """The answer kept under ``key``, or ``MISSING``."""
        if key not in self.answers:
            return MISSING
        self.answers.move_to_end(key)
        return self.answers[key]

    def put(self, key: Hashable, answer: Any) -> None:
        if self.size <= 0:
            return
        self.answers[key] = answer
        self.answers.move_to_end(key)
        while len(self.answers) > self.size:
            self.answers.popitem(last=False)


def cache_key(key: Hashable, payload: Any) -> Hashable:
    """A job's key and payload as one hashable key (payloads hold lists)."""
    return key, repr(payload)
