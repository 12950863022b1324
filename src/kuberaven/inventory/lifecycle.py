"""Pod lifecycle (inventory/, pure): what one observed change of a pod means for its event stream.

    the pod row's observed columns (as the inventory last wrote them) ─┐
    the newest PodRecord of the pod, or None when it is gone           ─┴─► pod_transition() ─► next columns + events

The original synchronizer's contract, which its consumers (ONOS, OLT, fabric
services) rely on, kept exactly:

| change                                    | events                                               |
|-------------------------------------------|------------------------------------------------------|
| first seen, Pending, no IP                | none                                                 |
| first has an IP                           | created                                              |
| IP, labels or phase changed               | updated (only after created)                         |
| a container restarted (restartCount up)   | restarted (only after created)                       |
| replaced under the same name (new uid)    | deleted(old) if it had created; created(new) at IP   |
| gone (watched, or found gone by a relist) | deleted, if it had created                           |
| gone before it ever had an IP             | none                                                 |

"created" is sent once per uid and "deleted" exactly once per uid that had
"created". Which event was last announced for the row's uid is the row's own
``last_event_sent`` column (the original's), so the rule holds across restarts.
Everything else of a pod (readiness, node, a new resourceVersion) updates the
row and sends nothing. Only the inventory writes these columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .records import PodRecord

Observed = dict[str, Any]  # the pod row's observed columns (OBSERVED_COLUMNS)


class PodEvent(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    RESTARTED = "restarted"
    DELETED = "deleted"


# The columns of a pod row that only the inventory writes.
OBSERVED_COLUMNS = (
    "uid",
    "resource_version",
    "pod_ip",
    "pod_ips",
    "phase",
    "node",
    "ready",
    "restart_count",
    "containers",
    "labels",
    "last_event_sent",
)


@dataclass
class Transition:
    next: Observed | None  # the columns to store; None: the pod is gone
    events: list[tuple[PodEvent, Observed]] = field(default_factory=list)  # each with the state it describes


def observed_columns(record: PodRecord, last_event_sent: str | None = None) -> Observed:
    return {
        "uid": record.uid,
        "resource_version": record.resource_version,
        "pod_ip": record.pod_ip,
        "pod_ips": record.pod_ips,
        "phase": record.phase,
        "node": record.node,
        "ready": record.ready,
        "restart_count": record.restart_count,
        "containers": record.containers,
        "labels": record.labels,
        "last_event_sent": last_event_sent,
    }


def announced(observed: Observed | None) -> bool:
    """Whether "created" went out for the uid these columns describe (and "deleted" did not yet)."""
    return bool(observed and observed.get("uid") and observed.get("last_event_sent") not in (None, PodEvent.DELETED))


def pod_transition(previous: Observed | None, record: PodRecord | None) -> Transition:
    """The next columns and the events for a pod that was ``previous`` and is now ``record`` (None: gone)."""
    if record is None:
        return Transition(None, [(PodEvent.DELETED, previous)] if previous and announced(previous) else [])
    transition = Transition(observed_columns(record))
    if previous is not None and previous.get("uid") not in (None, record.uid):
        # Replaced under the same name: the old pod's end first, then the new pod's start.
        transition.events += pod_transition(previous, None).events
        previous = None
    current = transition.next
    assert current is not None
    if not announced(previous):
        if record.pod_ips:
            transition.events.append((PodEvent.CREATED, current))
            current["last_event_sent"] = PodEvent.CREATED
        return transition
    assert previous is not None
    change = _change(previous, record)
    current["last_event_sent"] = change or previous["last_event_sent"]
    if change is not None:
        transition.events.append((change, current))
    return transition


def _change(previous: Observed, record: PodRecord) -> PodEvent | None:
    restarts = {c["name"]: c.get("restart_count", 0) for c in previous.get("containers") or ()}
    if any(c["restart_count"] > restarts.get(c["name"], 0) for c in record.containers):
        return PodEvent.RESTARTED
    if (
        (previous.get("pod_ips") or []) != record.pod_ips
        or previous.get("phase") != record.phase
        or (previous.get("labels") or {}) != record.labels
    ):
        return PodEvent.UPDATED
    return None
