"""What a component of the daemon tells of itself: one entry of /readyz's "watches" (a base module, as metrics.py).

    component.status() ──► [ComponentStatus, ...] ──► runtime/health.py: readiness(), the initial-sync log
                                                  ──► web/probes.py: /readyz's JSON (as_json)

Every layer builds these (the watch machinery, the inventory, the relay, the network translation), and only
runtime/ reads them, so the type sits below all of them. One type for every component: a field that does not apply
to a component stays UNSET and is left out of the JSON; None is shown as null (known to be unknown, such as a
list's total when the API server does not count it). The web UI's health view reads the same names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["UNSET", "ComponentStatus", "UnsetType", "as_json"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ComponentStatus:
    # Whose entry: the component (when its target does not say), the cluster, what it watches or does.
    component: str | UnsetType = UNSET
    cluster: str | UnsetType = UNSET
    target: str | UnsetType = UNSET  # "kubernetes/pods", "v1/Pod", "reconciler load-balancers", "kafka … topic …"
    backend: str | UnsetType = UNSET  # the network translation's backend
    sync: str | UnsetType = UNSET  # the provisioning loop's cluster

    # A watch: /readyz is 200 only once every watch has synced (and its stream is not stale).
    synced: bool | UnsetType = UNSET
    connected: bool | UnsetType = UNSET
    idle_seconds: float | UnsetType | None = UNSET  # since the stream last said anything; None: no stream yet
    consumers: tuple[str, ...] | UnsetType = UNSET  # who reads a shared informer
    listed: int | UnsetType = UNSET  # objects of the current (or last) LIST so far
    expected: int | UnsetType | None = UNSET  # the LIST's total (remainingItemCount); None: the server did not say
    written: int | UnsetType = UNSET  # objects stored (the inventory)
    queued: int | UnsetType = UNSET  # events or keys not handled yet

    # A loop without a watch of its own (provisioning, model policies, port activation).
    passes: int | UnsetType = UNSET
    backing_off: int | UnsetType = UNSET  # rows or keys waiting for their retry
    listening: bool | UnsetType = UNSET  # the database notifies changes (PostgreSQL LISTEN)
    policies: tuple[str, ...] | UnsetType = UNSET  # the plugins' model policies run
    ports_not_active: int | UnsetType = UNSET
    recording: bool | UnsetType = UNSET  # the history keeper: the database keeps past versions
    pruned: int | UnsetType = UNSET  # the history keeper: versions removed past the retention

    # The Kafka relay.
    publishing: bool | UnsetType = UNSET  # False: a standby (another replica publishes)
    broker_reachable: bool | UnsetType = UNSET
    unreachable_seconds: float | UnsetType = UNSET
    pending: int | UnsetType = UNSET  # outbox rows not sent yet
    last_error: str | UnsetType | None = UNSET


def as_json(statuses: Iterable[ComponentStatus]) -> list[dict[str, Any]]:
    """The entries as /readyz and the logs show them: the fields that apply (tuples stay tuples: JSON arrays)."""
    encoded: list[dict[str, Any]] = msgspec.to_builtins(list(statuses))
    return encoded
