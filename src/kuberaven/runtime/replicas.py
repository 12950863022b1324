"""The replicas alive (runtime/, for runtime/clusters.py): each holds its identity Lease in the default cluster.

    ReplicaCensus.count() ──► renew our Lease kuberaven-replica-<identity>
                          ──► LIST the Leases labelled as replica Leases ──► alive_replicas() (ownership.py)

No table and no heartbeat of our own: the Leases are the census. A replica that
stops cleanly releases its Lease (holder ""), one that dies stops renewing it;
either way it no longer counts once its duration has passed on our clock.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..kube.client import KubeClient
from .leader import LEASE_ERRORS, LeaderElector
from .ownership import REPLICA_LABEL, Observation, alive_replicas

log = logging.getLogger(__name__)
PAGE = 500


class ReplicaCensus:
    def __init__(self, client: KubeClient, elector: LeaderElector) -> None:
        """``elector`` holds our Lease, labelled REPLICA_LABEL=<our group>: the census counts that group."""
        self.client = client
        self.elector = elector
        self.selector = f"{REPLICA_LABEL}={elector.labels[REPLICA_LABEL]}"
        self.collection = self.elector.collection
        self.default_duration = self.elector.lease_duration
        self._seen: dict[str, tuple[dict[str, Any], float]] = {}  # lease name -> (spec, when it last changed)
        self.alive = 1
        self.counted = False  # count() has run once: our Lease exists, the replicas starting with us can see it

    async def count(self) -> int:
        """Renew our own Lease and count the replicas alive (at least 1: this one); on an API error, the last count."""
        await self.elector.try_acquire()
        self.counted = True
        try:
            leases = [
                lease
                async for lease in self.client.list_objects(
                    self.collection, {"labelSelector": self.selector}, page_size=PAGE
                )
            ]
        except LEASE_ERRORS as error:
            log.warning("cannot count the replicas: %s", error)
            return self.alive
        now = time.monotonic()
        observations = [self._observe(lease, now) for lease in leases]
        names = {lease["metadata"]["name"] for lease in leases}
        self._seen = {name: seen for name, seen in self._seen.items() if name in names}
        self.alive = max(1, alive_replicas(observations, now))
        return self.alive

    def _observe(self, lease: dict[str, Any], now: float) -> Observation:
        name = lease["metadata"]["name"]
        spec = lease.get("spec") or {}
        if name == self.elector.name and self.elector.is_leader:
            changed_at = now  # ours, just renewed
        else:
            previous = self._seen.get(name)
            changed_at = previous[1] if previous is not None and previous[0] == spec else now
        self._seen[name] = (spec, changed_at)
        duration = float(spec.get("leaseDurationSeconds") or self.default_duration)
        return Observation(spec.get("holderIdentity") or "", duration, changed_at)

    async def leave(self) -> None:
        """A clean stop: release our Lease so that the others count one replica fewer at once."""
        await self.elector.release()
