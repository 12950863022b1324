"""Which clusters this replica owns (runtime/, the rules behind runtime/clusters.py).

    replica Leases (default cluster) ──► alive_replicas() ──┐
    each cluster's Lease (that cluster) ──► LeaseView ───────┴──► plan_ownership() ──► take / release

Every replica holds an identity Lease ``kuberaven-replica-<identity>`` in the
default cluster, renewed like the cluster Leases; the replicas alive are those
whose Lease has a holder and changed within its duration *as this replica
observed it* (client-go's rule: our own clock, never the writer's, so clock
skew between replicas does not matter). A replica owns at most its fair share
ceil(clusters / replicas alive): it takes free or expired cluster Leases up to
that share and releases the surplus, so that replicas joining or leaving
rebalance the clusters without any coordination but the Leases themselves.

Replicas started together (a Deployment scaled from 0, a rollout) register
their identity Leases a fraction of a second apart: the first to count would
see itself alone, take every cluster, and hand half of them over a few
seconds later, mid-list (measured: the second replica idle for 5 s, and the
first listing and writing clusters it then dropped). So on its first round a
replica is *joining*: it takes at most the share of one replica more than it
counts. Its next round, one retry period later, counts the replicas that
started with it; a replica alone takes the rest then.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

REPLICA_LABEL = "kuberaven.io/replica-of"  # on every replica Lease, = replica_group(lease_name): the census lists by it
_LABEL_VALUE_LIMIT = 63
_NAME_LIMIT = 253


@dataclass(frozen=True)
class LeaseView:
    """A cluster Lease as this replica last saw it."""

    holder: str  # "" when released or never taken
    expired: bool  # its holder did not renew it within its duration (on our clock)


@dataclass(frozen=True)
class Plan:
    take: tuple[str, ...]
    release: tuple[str, ...]


def plan_ownership(
    identity: str, clusters: Sequence[str], leases: Mapping[str, LeaseView], alive: int, *, joining: bool = False
) -> Plan:
    """Which clusters to try to take and which to hand back, given the Leases seen and the replicas alive.

    ``joining``: this replica's first round; it counts one replica more than it sees (another may be starting
    with it). That never makes it release: it holds nothing yet.

    A cluster whose Lease was never seen counts as free (the Lease does not exist yet). Clusters are
    taken and released in name order, so that every replica prefers the same ones and conflicts are few
    (the Lease's resourceVersion settles a race anyway).
    """
    ordered = sorted(clusters)
    share = math.ceil(len(ordered) / (max(1, alive) + (1 if joining else 0)))
    free_view = LeaseView("", expired=False)
    mine = [c for c in ordered if leases.get(c, free_view).holder == identity]
    if len(mine) > share:
        return Plan(take=(), release=tuple(mine[share:]))
    free = [c for c in ordered if c not in mine and _free(leases.get(c, free_view))]
    return Plan(take=tuple(free[: share - len(mine)]), release=())


def _free(lease: LeaseView) -> bool:
    return not lease.holder or lease.expired


@dataclass(frozen=True)
class Observation:
    """A replica Lease: its holder, its duration, and when (our monotonic clock) we saw its spec change."""

    holder: str
    duration: float
    changed_at: float


def alive_replicas(observations: Iterable[Observation], now: float) -> int:
    """The replicas whose identity Lease is held and renewed within its duration."""
    return sum(1 for o in observations if o.holder and now - o.changed_at < o.duration)


def cluster_lease(base: str, cluster: str) -> str:
    """``kuberaven-cluster-<cluster row>`` (``base`` is the lease_name setting)."""
    return _lease_name(f"{base}-cluster-", cluster)


def replica_group(base: str) -> str:
    """The label value that the replicas of one ``lease_name`` share: replicas of another kuberaven
    (another lease_name) in the same namespace are not counted, as they share none of our clusters."""
    if len(base) <= _LABEL_VALUE_LIMIT and re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", base):
        return base
    return hashlib.sha256(base.encode()).hexdigest()[:_LABEL_VALUE_LIMIT]


def replica_lease(base: str, identity: str) -> str:
    """``kuberaven-replica-<identity>``."""
    return _lease_name(f"{base}-replica-", identity)


def _lease_name(prefix: str, name: str) -> str:
    """A Lease name (a DNS subdomain): lower case, any other character '-'."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.") or "x"
    return (prefix + cleaned)[:_NAME_LIMIT].rstrip("-.")
