"""Exponential backoff with jitter (kube/ reconnects, raven/ per-object retries)."""

from __future__ import annotations

import random
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
