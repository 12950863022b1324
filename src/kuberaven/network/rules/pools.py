"""Port pools' arithmetic (network/rules/, pure): which pool a pod takes from, what to make, what to give back.

    a pod's (node, namespace, groups) + the free ports  ──► choose()       ──► its pool, another pool of its
                                                                              node and namespace (its groups
                                                                              set before use), or none
    free and in-flight ports, recent takes, wanted pools ──► refill_plan() ──► (pool, how many) to make
    free ports, when each pool was last taken from      ──► shrink_plan() ──► (pool, how many) to delete

A pool is the free ports of one (node, namespace, security-group set), as
Kuryr's pools were per (host, project, security groups): a port is made
bound to its node, on its namespace's network, with its groups, so a pod
that takes one needs no Neutron call. network/pools.py does the I/O; unit
tests drive these with plain numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..backend import NetworkOptions

# Seconds of takes a pool's target looks back on: a pool taken from at r pods a second keeps about r × this.
DEMAND_WINDOW = 5.0


@dataclass(frozen=True, order=True)
class PoolKey:
    node: str
    namespace: str
    security_groups: tuple[str, ...]  # sorted

    @classmethod
    def of(cls, node: str, namespace: str, groups: Iterable[str]) -> PoolKey:
        return cls(node, namespace, tuple(sorted(groups)))


def choose(key: PoolKey, free: Mapping[PoolKey, int]) -> tuple[PoolKey | None, bool]:
    """The pool a pod of ``key`` takes from, and whether the port's groups must be set first.

    Its own pool if it has a free port; else the fullest pool of the same node and namespace (the port's
    groups are then replaced by the pod's before anything is plugged); else none (a port is made)."""
    if free.get(key, 0) > 0:
        return key, False
    others = [k for k, n in free.items() if n > 0 and k.node == key.node and k.namespace == key.namespace]
    if not others:
        return None, False
    return max(others, key=lambda k: (free[k], k)), True


def target(recent_takes: int, options: NetworkOptions) -> int:
    """The free ports a pool should hold: its minimum, or what it gave out in the last DEMAND_WINDOW."""
    return min(options.pool_max, max(options.pool_min, recent_takes))


def refill_plan(
    free: Mapping[PoolKey, int],
    making: Mapping[PoolKey, int],
    recent_takes: Mapping[PoolKey, int],
    wanted: Iterable[PoolKey],
    options: NetworkOptions,
) -> list[tuple[PoolKey, int]]:
    """Ports to make, per pool, the emptiest first. Pools taken from (``recent_takes``, or holding ports) are
    filled to their target; ``wanted`` pools nobody took from yet (prewarming) only while every pool's free
    and in-flight ports stay within ``pool_prewarm_limit``, and to their minimum. A request for a pool in use
    is at least ``pool_batch`` ports, never past ``pool_max``."""
    used = set(recent_takes) | {k for k, n in free.items() if n} | {k for k, n in making.items() if n}
    held = sum(free.values()) + sum(making.values())
    plan: list[tuple[PoolKey, int]] = []
    for key in sorted(used | set(wanted)):
        have = free.get(key, 0) + making.get(key, 0)
        short = target(recent_takes.get(key, 0), options) - have
        if short <= 0:
            continue
        if key in used:
            count = min(max(short, options.pool_batch), options.pool_max - have)
        else:  # prewarming: just the minimum
            count = min(short, options.pool_prewarm_limit - held)
            if count <= 0:
                continue
        held += count
        plan.append((key, count))
    return sorted(plan, key=lambda item: (free.get(item[0], 0), item[0]))


def shrink_plan(
    free: Mapping[PoolKey, int], last_take: Mapping[PoolKey, float], now: float, options: NetworkOptions
) -> list[tuple[PoolKey, int]]:
    """Free ports to delete, per pool: those above max, and those above min in a pool idle for ``pool_idle`` s."""
    plan = []
    for key, count in sorted(free.items()):
        idle = now - last_take.get(key, now) >= options.pool_idle
        keep = options.pool_min if idle else options.pool_max
        if count > keep:
            plan.append((key, count - keep))
    return plan
