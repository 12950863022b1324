"""Kubernetes Events, as controllers record them (kube/): what kuberaven did to an object, and why it failed.

    provisioning (provisioning/), network translation (network/)
        ──► EventRecorder.record(object, type, reason, message)      never blocks, never raises
            ──► Correlator (pure): a repeat of an event ─► the stored one's count + 1;
                                   too many for one object ─► dropped (a token bucket, client-go's)
            ──► POST /api/v1/namespaces/NS/events, or PATCH its count — in the background

So that ``kubectl describe`` shows, for example, ``Normal Provisioned
kuberaven KubernetesServiceInstance web-0 applied`` or ``Warning Failed …``.
The rules are client-go's EventCorrelator, kept small: events are keyed by
(object, type, reason, message); an identical event within the cache only
raises the count of the one already stored; each object may have a burst of
25 events, then one more every 5 minutes; the cache holds 4096 keys.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .client import KubeClient
from .errors import NotFound

log = logging.getLogger(__name__)

COMPONENT = "kuberaven"
NORMAL, WARNING = "Normal", "Warning"
# Reasons, as `kubectl describe` shows them.
REASON_PROVISIONED, REASON_UPDATED, REASON_DELETED, REASON_FAILED = "Provisioned", "Updated", "Deleted", "Failed"
REASON_LOAD_BALANCER_READY, REASON_FLOATING_IP = "LoadBalancerReady", "FloatingIPAssigned"
REASON_PORT_READY = "PortReady"
REASON_OPTION_REFUSED = "OptionRefused"  # a Service option that could not be read or that the provider lacks
REASON_PORT_ACTIVE, REASON_PORT_NOT_ACTIVE = "PortActive", "PortNotActive"  # what Neutron reports of a pod's port
MERGE_PATCH = "application/merge-patch+json"
CACHE_SIZE = 4096
BURST, REFILL_SECONDS = 25, 300.0
MAX_PENDING = 1000  # events waiting to be sent; more are dropped (the API server is slow or away)


@dataclass(frozen=True)
class InvolvedObject:
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str | None = None

    @classmethod
    def of(cls, obj: dict[str, Any]) -> InvolvedObject:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"], meta.get("uid"))


@dataclass
class _Seen:
    name: str  # the stored Event's name
    count: int
    first: str


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Decision:
    action: str  # "create", "update" (count of the stored event) or "drop"
    name: str
    count: int
    first: str


@dataclass
class Correlator:
    """What to do with an event: create it, raise a stored one's count, or drop it (pure but for the clock)."""

    cache: OrderedDict[tuple[Any, ...], _Seen] = field(default_factory=OrderedDict)
    buckets: OrderedDict[InvolvedObject, _Bucket] = field(default_factory=OrderedDict)

    def decide(self, involved: InvolvedObject, type_: str, reason: str, message: str, now: float) -> Decision:
        if not self._allowed(involved, now):
            return Decision("drop", "", 0, "")
        stamp = _timestamp(now)
        key = (involved, type_, reason, message)
        seen = self.cache.get(key)
        if seen is not None:
            self.cache.move_to_end(key)
            seen.count += 1
            return Decision("update", seen.name, seen.count, seen.first)
        name = f"{involved.name}.{uuid.uuid4().hex[:16]}"
        self.cache[key] = _Seen(name, 1, stamp)
        _bound(self.cache)
        return Decision("create", name, 1, stamp)

    def forget(self, involved: InvolvedObject, type_: str, reason: str, message: str) -> None:
        """The stored event is gone (expired by the API server): the next one is created anew."""
        self.cache.pop((involved, type_, reason, message), None)

    def _allowed(self, involved: InvolvedObject, now: float) -> bool:
        bucket = self.buckets.get(involved)
        if bucket is None:
            bucket = self.buckets[involved] = _Bucket(float(BURST), now)
            _bound(self.buckets)
        bucket.tokens = min(float(BURST), bucket.tokens + (now - bucket.at) / REFILL_SECONDS)
        bucket.at = now
        self.buckets.move_to_end(involved)
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


def _bound(cache: OrderedDict[Any, Any]) -> None:
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _timestamp(now: float) -> str:
    return dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records Events for objects kuberaven acts on; sending happens in the background, best effort."""

    def __init__(self, client: KubeClient, component: str = COMPONENT) -> None:
        self.client = client
        self.component = component
        self.instance = f"{socket.gethostname()}-{os.getpid()}"
        self.correlator = Correlator()
        self._sending: set[asyncio.Task[None]] = set()

    def record(self, obj: dict[str, Any] | InvolvedObject, type_: str, reason: str, message: str) -> None:
        """Record one event about ``obj`` (a Kubernetes object, or what identifies one). Call on the event loop."""
        involved = obj if isinstance(obj, InvolvedObject) else InvolvedObject.of(obj)
        if involved.namespace is None and involved.kind != "Namespace":
            return  # cluster-scoped objects' events live in "default"; kuberaven records none
        decision = self.correlator.decide(involved, type_, reason, message, time.time())
        if decision.action == "drop" or len(self._sending) >= MAX_PENDING:
            return
        task = asyncio.get_running_loop().create_task(self._send(involved, type_, reason, message, decision))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def flush(self) -> None:
        """Until the events recorded so far are sent (tests, shutdown)."""
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    async def _send(self, involved: InvolvedObject, type_: str, reason: str, message: str, decision: Decision) -> None:
        namespace = involved.namespace or "default"
        path = f"/api/v1/namespaces/{namespace}/events"
        now = _timestamp(time.time())
        try:
            if decision.action == "update":
                try:
                    await self.client.request(
                        "PATCH",
                        f"{path}/{decision.name}",
                        body={"count": decision.count, "lastTimestamp": now},
                        content_type=MERGE_PATCH,
                    )
                    return
                except NotFound:
                    self.correlator.forget(involved, type_, reason, message)
            await self.client.request("POST", path, body=self._event(involved, type_, reason, message, decision, now))
        except Exception as error:  # API refusals and transport errors alike: events are best effort
            log.debug("event %s for %s/%s not recorded: %s", reason, namespace, involved.name, error)

    def _event(
        self, involved: InvolvedObject, type_: str, reason: str, message: str, decision: Decision, now: str
    ) -> dict[str, Any]:
        reference = {"apiVersion": involved.api_version, "kind": involved.kind, "name": involved.name}
        if involved.namespace:
            reference["namespace"] = involved.namespace
        if involved.uid:
            reference["uid"] = involved.uid
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": decision.name, "namespace": involved.namespace or "default"},
            "involvedObject": reference,
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": decision.first,
            "lastTimestamp": now,
            "count": decision.count,
        }
