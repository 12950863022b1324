"""Port pools' arithmetic (network/rules/, pure): which pool a pod takes from, what to make, what to give back.

    a pod's (node, namespace, groups) + the free ports  ──► choose()       ──► its pool, another pool of its
                                                                              node and namespace (its groups
                                                                              set before use), or none
    free, in-flight and returning ports, recent demand,
    wanted pools                                         ──► refill_plan() ──► (pool, how many) to make
    that plan, the pools whose requests are in flight    ──► startable()   ──► the requests to send now
    free ports, when each pool was last taken from      ──► shrink_plan() ──► (pool, how many) to delete
    a port, its namespace's network ──► port_state() (its "Port" row; a pod's record of it: pod_network.py's
                                                                    PodNetwork.pooled_port())

A pool is the free ports of one (node, namespace, security-group set), as
Kuryr's pools were per (host, project, security groups): a port is made
bound to its node, on its namespace's network, with its groups, so a pod
that takes one needs no Neutron call. network/pools.py does the I/O; unit
tests drive these with plain numbers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..backend import NetworkOptions
from ..drivers.ports import Port

# Seconds of takes (less ports given back) a pool's target looks back on: a pool taken from at r pods a second keeps
# about r × this, enough to cover the seconds a bulk request takes on a small Neutron.
DEMAND_WINDOW = 10.0
# Bulk requests in flight at once, all pools together: what Neutron serves in parallel. The local ML2/OVN (two API
# workers, two cores) made 4.3 ports a second with one request at a time, 6.5 with two, 5.6 with four; two
# requests on one subnet never failed (27 pairs, on an empty /22 and on a /24 holding 180 to 250 ports).
IN_FLIGHT = 2
# Ports in one bulk request for waiting pods at most: a request's ports all come when it ends (at 4 a second, 20
# take 5 s), so more waiting pods go out as several requests, the next sent as soon as one ends.
BULK_MAX = 20


@dataclass(frozen=True, order=True)
class PoolKey:
    """A pool: bare, ports bound to ``node``; nested (``trunk`` set), subports of the trunk of the node's VM."""

    node: str
    namespace: str
    security_groups: tuple[str, ...]  # sorted
    trunk: str = ""  # a nested node's trunk ("": a bare node)

    @classmethod
    def of(cls, node: str, namespace: str, groups: Iterable[str], trunk: str | None = None) -> PoolKey:
        return cls(node, namespace, tuple(sorted(groups)), trunk or "")

    @property
    def place(self) -> tuple[str, str, str]:
        """Where a pool's ports serve: its node, namespace (network) and trunk; its groups can be changed."""
        return self.node, self.namespace, self.trunk


def choose(key: PoolKey, free: Mapping[PoolKey, int]) -> tuple[PoolKey | None, bool]:
    """The pool a pod of ``key`` takes from, and whether the port's groups must be set first.

    Its own pool if it has a free port; else the fullest pool of the same node, namespace and trunk (the port's
    groups are then replaced by the pod's before anything is plugged); else none (a port is made)."""
    if free.get(key, 0) > 0:
        return key, False
    others = [k for k, n in free.items() if n > 0 and k.place == key.place]
    if not others:
        return None, False
    return max(others, key=lambda k: (free[k], k)), True


def recent_demand(
    takes: Mapping[PoolKey, Collection[float]], gives: Mapping[PoolKey, Collection[float]], now: float
) -> dict[PoolKey, int]:
    """Each pool's demand: the ports it gave out in the last DEMAND_WINDOW s (``takes``: when), less those given
    back in it (``gives``): a rollout gives back what it takes, and needs no larger pool."""
    since = now - DEMAND_WINDOW
    counts = {
        key: sum(1 for t in moments if t >= since) - sum(1 for t in gives.get(key, ()) if t >= since)
        for key, moments in takes.items()
    }
    return {key: count for key, count in counts.items() if count > 0}


def target(demand: int, options: NetworkOptions) -> int:
    """The free ports a pool should hold: its minimum, or its demand (the ports it gave out in the last
    DEMAND_WINDOW, less those given back), at most its maximum."""
    return min(options.pool_max, max(options.pool_min, demand))


def refill_plan(
    free: Mapping[PoolKey, int],
    making: Mapping[PoolKey, int],
    demand: Mapping[PoolKey, int],
    waiting: Mapping[PoolKey, int],
    wanted: Iterable[PoolKey],
    options: NetworkOptions,
    returning: Mapping[PoolKey, int] | None = None,
) -> list[tuple[PoolKey, int]]:
    """Bulk requests to make, the pools with pods waiting first, then the emptiest; of each pool, first the ports
    of its waiting pods that no request in flight brings (requests()), then the rest of its target.

    A pool in use (in ``demand`` lately, holding ports, or with pods ``waiting`` for a port) is filled to its
    target plus its waiting pods, in whole ``pool_batch``es; a ``wanted`` pool nobody used yet (prewarming) only to
    its minimum, and only while every pool's free and in-flight ports stay within ``pool_prewarm_limit``.

    Ports ``returning`` (held by terminating pods: back in the pool once they are gone) count toward the target,
    so a rolling update, whose old pods give back what the new ones take, makes no port; never toward the pods
    waiting, which need a port now."""
    returning = returning or {}
    used = set(demand) | set(waiting) | {k for k, n in free.items() if n} | {k for k, n in making.items() if n}
    held = sum(free.values()) + sum(making.values())
    shortfall: list[tuple[PoolKey, list[int]]] = []
    for key in sorted(used | set(wanted)):
        have, needed = free.get(key, 0) + making.get(key, 0), waiting.get(key, 0)
        short = max(target(demand.get(key, 0), options) + needed - have - returning.get(key, 0), needed - have)
        if key not in used:  # prewarming: just the minimum, within the limit
            short = min(short, options.pool_prewarm_limit - held)
        if short > 0:
            held += short
            shortfall.append((key, requests(short, max(0, needed - have), options.pool_batch, key in used)))
    shortfall.sort(key=lambda item: (-waiting.get(item[0], 0), free.get(item[0], 0), item[0]))
    return [(key, count) for key, sizes in shortfall for count in sizes]


def requests(short: int, uncovered: int, batch: int, whole: bool = True) -> list[int]:
    """A pool's ``short`` ports as bulk requests: first its ``uncovered`` waiting pods' ports, split over IN_FLIGHT
    requests of at most BULK_MAX (Neutron serves them in parallel, so each pod waits for the smaller one); then
    the rest in requests of ``batch``, the rest rounded up to whole batches when ``whole``.

    As Kuryr's refill made max(ports_pool_batch, ports_pool_min - size) ports for the pods it was asked for, a
    request for waiting pods is as large as they need. The rest stays in batches: Neutron's time grows with a
    request's ports (its rate is the same at 5 as at 40), and a smaller request brings its ports sooner to a pod
    that comes meanwhile."""
    first = min(uncovered, short)
    sizes = _spread(first, IN_FLIGHT) if first else []
    rest = short - first
    if rest > 0 and whole:
        rest = -(-rest // batch) * batch
    return sizes + (_batches(rest, batch) if rest > 0 else [])


def _spread(count: int, parts: int) -> list[int]:
    """``count`` in at least ``parts`` near-equal requests (more when that would exceed BULK_MAX), largest first."""
    parts = max(parts, -(-count // BULK_MAX))
    parts = min(parts, count)
    return [count // parts + (1 if i < count % parts else 0) for i in range(parts)]


def _batches(count: int, batch: int) -> list[int]:
    return [batch] * (count // batch) + ([count % batch] if count % batch else [])


def startable(plan: list[tuple[PoolKey, int]], in_flight: Collection[PoolKey]) -> list[tuple[PoolKey, int]]:
    """Of ``plan`` (refill_plan()'s order), the requests to send now beside those ``in_flight`` (their pools): at
    most IN_FLIGHT in all, and one at a time per trunk (a nested pool's subports take VLAN ids that no subport of
    the trunk has, as Neutron lists them: two requests at once would pick the same)."""
    trunks = {key.trunk for key in in_flight if key.trunk}
    chosen: list[tuple[PoolKey, int]] = []
    for key, count in plan:
        if len(in_flight) + len(chosen) >= IN_FLIGHT:
            break
        if key.trunk and key.trunk in trunks:
            continue
        trunks.add(key.trunk)
        chosen.append((key, count))
    return chosen


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


def port_state(
    port: Port,
    namespace: str,
    node: str,
    network: dict[str, Any],
    groups: list[str],
    subport: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """A pooled port's row state (free: ``pod`` None); ``subport``: its trunk and VLAN id (a nested node's)."""
    nested = {"trunk": subport[0], "vlan_id": subport[1]} if subport is not None else {}
    return {
        **nested,
        "port": port.id,
        "address": port.address,
        "mac": port.mac,
        "mtu": port.mtu,
        "namespace": namespace,
        "node": node,
        "network": network["network"],
        "subnet": network["subnet"],
        "cidr": network["cidr"],
        "gateway": network.get("gateway"),
        "security_groups": sorted(groups),
        "pod": None,
    }


def key_of(state: dict[str, Any]) -> PoolKey:
    return PoolKey.of(state["node"], state["namespace"], state["security_groups"], state.get("trunk"))
