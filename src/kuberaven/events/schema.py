"""The pod event (events/): what consumers read from Kafka and from ``kuberaven events``.

Compatible with the original consumers (they read ``status == "created"``,
``name``, ``labels["xos_service"]`` and ``netinterfaces``) and adds what
they lacked: namespace, uid, restarted, a stable ``event_id`` for dedupe, the
cluster. Key: ``namespace/name``, so one pod's events keep their order
(or the pod name alone, as the original keyed them: setting ``event_key``).
"""

from __future__ import annotations

import datetime as dt
import enum
import os
import uuid
from typing import Any

PRODUCER = "k8s-sync"
STATUSES = ("created", "updated", "restarted", "deleted")


def pod_event(
    status: str,
    *,
    cluster: str,
    namespace: str,
    name: str,
    observed: dict[str, Any],
    instance_id: int | None = None,
    event_id: str | None = None,
    time: str | None = None,
) -> dict[str, Any]:
    """One event; ``observed`` holds the pod's fields as the inventory stores them. ``event_id`` and ``time``:
    given by a batch (event_ids(), event_time()), else made for this event."""
    if status not in STATUSES:
        raise ValueError(f"unknown pod event status {status!r}")
    return {
        "event_id": event_id or str(uuid.uuid4()),
        "status": status,
        "name": name,
        "namespace": namespace,
        "uid": observed.get("uid"),
        "cluster": cluster,
        "producer": PRODUCER,
        "kubernetesserviceinstance_id": instance_id,
        "labels": observed.get("labels") or {},
        "netinterfaces": [{"name": "primary", "addresses": list(observed.get("pod_ips") or [])}],
        "phase": observed.get("phase"),
        "node": observed.get("node"),
        "ready": bool(observed.get("ready")),
        "restart_count": observed.get("restart_count") or 0,
        "containers": observed.get("containers") or [],
        "resource_version": observed.get("resource_version"),
        "time": time or event_time(),
    }


def event_time() -> str:
    """Now, as an event's ``time`` (RFC 3339, UTC)."""
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


def event_ids(count: int) -> list[str]:
    """``count`` new random event ids (UUID version 4), from one read of the system's random source.

    uuid4() reads it once per id, a system call that lets go of the GIL: in a
    batch of hundreds of events on a busy process each one waited to get it
    back (a sixth of a cold start's batches went there, docs/benchmarks.md).
    """
    raw = os.urandom(16 * count)
    return [str(uuid.UUID(bytes=raw[i : i + 16], version=4)) for i in range(0, 16 * count, 16)]


class EventKey(enum.StrEnum):
    """What the Kafka message key of a pod event is."""

    NAMESPACED = "namespace/name"  # same-named pods of two namespaces never share a key
    NAME = "name"  # the original's key


def event_key(namespace: str, name: str) -> str:
    """The key an event is stored under in the outbox."""
    return f"{namespace}/{name}"


def message_key(stored_key: str, choice: EventKey) -> str:
    """The Kafka key of an outbox event stored under ``stored_key`` (``namespace/name``)."""
    return stored_key.rpartition("/")[2] if choice is EventKey.NAME else stored_key
