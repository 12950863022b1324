"""Election with a coordination.k8s.io/v1 Lease (runtime/): one elector per cluster Lease and one
for this replica's identity Lease (runtime/clusters.py holds them).

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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx2 as httpx
from annotated_types import Gt

from ..kube.client import KubeClient
from ..kube.errors import ApiError, Conflict, NotFound
from .ownership import LeaseView

log = logging.getLogger(__name__)
# What a Lease request may fail with: an error answer, or no answer (the cluster unreachable).
LEASE_ERRORS = (ApiError, OSError, httpx.HTTPError)


class LeadershipLost(RuntimeError):
    """The lease could not be renewed within the renew deadline."""


@dataclass(frozen=True)
class LeaseTimings:
    """Seconds, as client-go's: the one place these defaults live (settings: lease_duration …)."""

    lease_duration: Annotated[float, Gt(0)] = 15.0
    renew_deadline: Annotated[float, Gt(0)] = 10.0
    retry_period: Annotated[float, Gt(0)] = 2.0

    def __post_init__(self) -> None:
        # client-go's rule: a holder gives up before its Lease expires, and retries within that time.
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("lease timing needs retry_period < renew_deadline < lease_duration")


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
        timings: LeaseTimings | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        timings = timings or LeaseTimings()
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = timings.lease_duration
        self.renew_deadline = timings.renew_deadline
        self.retry_period = timings.retry_period
        self.labels = labels or {}
        self.is_leader = False
        self._last_renewal = 0.0
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0

    async def acquire(self) -> None:
        """Wait until this process holds the lease."""
        while not await self.try_acquire():  # noqa: ASYNC110 - polling the API server is the algorithm
            await asyncio.sleep(self.retry_period)

    async def hold(self) -> None:
        """Renew the lease until cancelled; raise LeadershipLost if renewal fails for too long."""
        while True:
            await asyncio.sleep(self.retry_period)
            if not await self.renew():
                raise LeadershipLost(f"could not renew lease {self.namespace}/{self.name} in time")

    async def try_acquire(self) -> bool:
        """One attempt to take (or renew) the lease; whether this process holds it now."""
        if await self._try_acquire_or_renew():
            self._last_renewal = time.monotonic()
            self._became(True)
        return self.is_leader

    async def renew(self) -> bool:
        """One renewal of a held lease; False once renewals have failed for longer than the renew deadline."""
        if not await self.try_acquire() and time.monotonic() - self._last_renewal > self.renew_deadline:
            self._became(False)
        return self.is_leader

    async def observe(self) -> LeaseView:
        """The lease as it is now, without taking it: its holder, and whether that holder let it expire."""
        try:
            lease = await self.client.request("GET", self.path)
        except NotFound:
            return LeaseView("", expired=False)
        spec = self._observed(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds") or self.lease_duration
        return LeaseView(holder, expired=bool(holder) and time.monotonic() - self._observed_at >= duration)

    async def release(self) -> None:
        if not self.is_leader:
            return
        try:
            lease = await self.client.request("GET", self.path)
            if lease["spec"].get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.client.request("PUT", self.path, body=lease)
        except LEASE_ERRORS as error:
            log.warning("could not release lease %s: %s", self.name, error)
        self._became(False)

    def _became(self, leader: bool) -> None:
        if leader != self.is_leader:
            log.info(
                "%s %s leadership of %s/%s", self.identity, "took" if leader else "lost", self.namespace, self.name
            )
        self.is_leader = leader

    def _observed(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Remember when the spec last changed, on our clock (how expiry is judged)."""
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = time.monotonic()
        return spec

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_time()
        try:
            lease = await self.client.request("GET", self.path)
        except NotFound:
            return await self._create(now)
        except LEASE_ERRORS as error:
            log.warning("lease %s: %s", self.name, error)
            return False
        spec = dict(self._observed(lease.get("spec") or {}))
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
        except LEASE_ERRORS as error:
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
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": self.labels},
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
        except LEASE_ERRORS:
            return False
        self._observed_spec = created.get("spec")
        self._observed_at = time.monotonic()
        return True
