"""Exponential backoff with jitter (kube/ reconnects, raven/ per-object retries, sync/ per-row retries)."""

from __future__ import annotations

import random
import time
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays that grow ×factor from ``initial`` up to ``maximum``, each with ±jitter."""

    initial: float
    maximum: float
    factor: float = 2.0
    jitter: float = 0.2
    failures: int = field(default=0, init=False)

    def peek(self) -> float:
        """The delay the next failure would get, without jitter."""
        return min(self.maximum, self.initial * self.factor**self.failures)

    def next(self) -> float:
        delay = self.peek()
        self.failures += 1
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter)

    def reset(self) -> None:
        self.failures = 0


@dataclass
class _Retry:
    token: Hashable
    backoff: Backoff
    due: float


class RetrySchedule:
    """Per-key retry times after failures (sync/ rows, tombstones, policies).

    ``token`` is the version of what failed (a row's ``updated``): while it
    stays the same each failure doubles the wait; a new version is tried at once.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = maximum
        self._retries: dict[Hashable, _Retry] = {}

    def backing_off(self, key: Hashable, token: Hashable, now: float | None = None) -> bool:
        """Whether ``key`` at version ``token`` must wait for its next try still."""
        retry = self._retries.get(key)
        now = time.monotonic() if now is None else now
        return retry is not None and retry.token == token and retry.due > now

    def failed(self, key: Hashable, token: Hashable) -> None:
        retry = self._retries.get(key)
        if retry is None or retry.token != token:
            retry = self._retries[key] = _Retry(token, Backoff(self.initial, self.maximum), 0.0)
        retry.due = time.monotonic() + retry.backoff.next()

    def succeeded(self, key: Hashable) -> None:
        self._retries.pop(key, None)

    def next_due(self) -> float | None:
        """The monotonic time of the earliest retry, if any."""
        return min((r.due for r in self._retries.values()), default=None)

    def __len__(self) -> int:
        return len(self._retries)
