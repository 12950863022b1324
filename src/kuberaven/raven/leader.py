"""Leader election with a coordination.k8s.io/v1 Lease (raven/, gates the engine).

client-go's algorithm: a candidate takes the Lease when its holder has not
renewed it for ``lease_duration`` (measured on our own clock, from when we
last saw the record change, so clock skew between replicas does not matter);
the leader renews every ``retry_period`` and gives up leadership if it could
not renew for ``renew_deadline``. On a clean stop the leader releases the
Lease so that a standby takes over at once instead of after 15 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from .. import metrics
from ..kube.client import KubeClient
from ..kube.errors import ApiError, Conflict, NotFound

log = logging.getLogger(__name__)


class LeadershipLost(RuntimeError):
    """The lease could not be renewed within the renew deadline."""


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.is_leader = False
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0

    async def acquire(self) -> None:
        """Wait until this process holds the lease."""
        while not await self._try_acquire_or_renew():  # noqa: ASYNC110 - polling the API server is the algorithm
            await asyncio.sleep(self.retry_period)
        self._became(True)

    async def hold(self) -> None:
        """Renew the lease until cancelled; raise LeadershipLost if renewal fails for too long."""
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(self.retry_period)
            if await self._try_acquire_or_renew():
                last_renewal = time.monotonic()
            elif time.monotonic() - last_renewal > self.renew_deadline:
                self._became(False)
                raise LeadershipLost(f"could not renew lease {self.namespace}/{self.name} in time")

    async def release(self) -> None:
        if not self.is_leader:
            return
        try:
            lease = await self.client.request("GET", self.path)
            if lease["spec"].get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.request("PUT", self.path, body=lease)
        except (ApiError, OSError) as error:
            log.warning("could not release lease %s: %s", self.name, error)
        self._became(False)

    def _became(self, leader: bool) -> None:
        if leader != self.is_leader:
            log.info(
                "%s %s leadership of %s/%s", self.identity, "took" if leader else "lost", self.namespace, self.name
            )
        self.is_leader = leader
        metrics.LEADER.set(1 if leader else 0)

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_time()
        try:
            lease = await self.client.request("GET", self.path)
        except NotFound:
            return await self._create(now)
        except (ApiError, OSError) as error:
            log.warning("lease %s: %s", self.name, error)
            return False
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = time.monotonic()
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        if holder and holder != self.identity and time.monotonic() - self._observed_at < duration:
            return False
        if holder != self.identity:
            spec["leaseTransitions"] = spec.get("leaseTransitions", 0) + 1
            spec["acquireTime"] = now
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.lease_duration), renewTime=now)
        lease["spec"] = spec
        try:
            updated = await self.client.request("PUT", self.path, body=lease)
        except (ApiError, OSError) as error:
            if not isinstance(error, Conflict):
                log.warning("lease %s: %s", self.name, error)
            return False
        self._observed_spec = updated.get("spec")
        self._observed_at = time.monotonic()
        return True

    async def _create(self, now: str) -> bool:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            created = await self.client.request("POST", self.collection, body=lease)
        except (ApiError, OSError):
            return False
        self._observed_spec = created.get("spec")
        self._observed_at = time.monotonic()
        return True
