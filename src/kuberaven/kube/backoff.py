"""Exponential backoff, the one implementation (kube/ reconnects, watch/ per-key retries, runtime/ restarts,
provisioning/ rows).

exponential(initial, maximum, failures) ──► the delay after the n-th failure (pure, no jitter)
    ├── Backoff: one stream of failures, with jitter (a reconnecting watch, a component's start-up)
    ├── KeyedBackoff: per key (client-go's ItemExponentialFailureRateLimiter; watch/ work queues)
    └── RetrySchedule: per key and version (provisioning/ rows, tombstones)
"""

from __future__ import annotations

import random
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

MAX_EXPONENT = 512  # beyond it the delay is ``maximum`` anyway; a float power of 2 overflows past 1023


def exponential(initial: float, maximum: float, failures: int, factor: float = 2.0) -> float:
    """The delay after ``failures`` consecutive failures (1: ``initial``), ×``factor`` each, at most ``maximum``."""
    return min(maximum, initial * factor ** min(max(0, failures - 1), MAX_EXPONENT))


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
        return exponential(self.initial, self.maximum, self.failures + 1, self.factor)

    def next(self) -> float:
        delay = self.peek()
        self.failures += 1
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter)

    def reset(self) -> None:
        self.failures = 0


class KeyedBackoff:
    """Per-key failure counts and their delays, without jitter (client-go's ItemExponentialFailureRateLimiter).

    A key's delay doubles with each failure until :meth:`forget` (its success); memory is one count per
    key that is failing.
    """

    def __init__(self, initial: float, maximum: float, factor: float = 2.0) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(f"backoff needs 0 < initial <= maximum, not {initial} and {maximum}")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        """One more failure of ``key``: the delay before it is tried again."""
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        return exponential(self.initial, self.maximum, failures, self.factor)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        failures = self._failures
        if failures.pop(key, None) is not None and not failures:
            # The last failing key: a new table, not the one a burst of failures grew (a dict keeps its size).
            self._failures = {}

    def __len__(self) -> int:
        return len(self._failures)


@dataclass
class _Retry:
    token: Hashable
    backoff: Backoff
    due: float


class RetrySchedule:
    """Per-key retry times after failures (provisioning/ rows, tombstones, policies).

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
