"""What a cluster's pools are asked for (network/): the bookkeeping that network/pools.py's refills read.

    a pod takes a port ──► took()      a port given back ──► gave()
        ──► demand(now): each pool's takes in the last DEMAND_WINDOW s less its gives (rules/pools.py)
    a pod terminating on a pooled port ──► returning()     its port released ──► returned()
        ──► coming(now): the ports on their way back, per pool, each counted for at most RETURNING_FOR s

Plain data, no lock of its own: PortPools calls it under its lock.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque

from .rules.pools import DEMAND_WINDOW, PoolKey, recent_demand

# Seconds a terminating pod's port counts as coming back to its pool (Kubernetes' default grace period): a rolling
# update's new pods take ports its old pods give back, and a pod terminating longer is not counted on.
RETURNING_FOR = 30.0


class PoolDemand:
    """Takes and gives per pool (when), and the ports of terminating pods."""

    def __init__(self) -> None:
        self._takes: dict[PoolKey, deque[float]] = defaultdict(deque)
        self._gives: dict[PoolKey, deque[float]] = defaultdict(deque)
        self.last_take: dict[PoolKey, float] = {}  # what shrink_plan() reads: when each pool was last taken from
        self._returning: dict[str, tuple[PoolKey, float]] = {}  # a terminating pod's uid → its port's pool, since

    def took(self, key: PoolKey, now: float) -> None:
        self._takes[key].append(now)
        self.last_take[key] = now

    def gave(self, key: PoolKey, now: float) -> None:
        self._gives[key].append(now)

    def returning(self, uid: str, key: PoolKey, now: float) -> None:
        """The pod ``uid`` is terminating on a port of ``key``: counted from its first sight."""
        self._returning.setdefault(uid, (key, now))

    def returned(self, uid: str) -> None:
        self._returning.pop(uid, None)

    def demand(self, now: float) -> dict[PoolKey, int]:
        """Each pool's recent demand (rules/pools.py), the takes and gives older than its window forgotten."""
        for moments in (*self._takes.values(), *self._gives.values()):
            while moments and moments[0] < now - DEMAND_WINDOW:
                moments.popleft()
        return recent_demand(self._takes, self._gives, now)

    def coming(self, now: float) -> dict[PoolKey, int]:
        """The ports of pods terminating for less than RETURNING_FOR s, per pool (older ones forgotten)."""
        self._returning = {uid: held for uid, held in self._returning.items() if now - held[1] < RETURNING_FOR}
        return dict(Counter(key for key, _ in self._returning.values()))
