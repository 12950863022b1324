"""What the cloud reports of pods' ports (network/): an input of the pods reconciler, not a second writer.

    activation.py (polls the backend) ──► PortReports.report(pod key, status) ──► the pods reconciler's queue
    reconcilers/pods.py, reconciling that pod ──► reported(port) ──► its record's status: the "Pod" row, the
                                                                     VIF annotation, an Event
                                              ──► applied(port, status): the entry goes once the row says it

One map per cluster, its translation runtime's (translation_runtime.py),
which the cluster's activation and pods reconciler share. Reports come on
the event loop; the pods reconciler's worker threads forget ports, so the
map is under a lock. An entry lives from a report until the pods reconciler
recorded it, or the port went (forgotten with its pod), or a full listing no
longer shows the port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from .drivers.port_status import PortStatus


class PortReports:
    """The statuses reported and not yet recorded, by port id."""

    def __init__(self, pods: Callable[[str], None]) -> None:
        """``pods``: the pods reconciler's queue (a pod's namespace/name), where each report's pod goes."""
        self._by_port: dict[str, PortStatus] = {}
        self._pods = pods
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_port)

    def report(self, key: str, status: PortStatus) -> None:
        """The backend says ``status`` of the port of the pod ``key`` (namespace/name), unlike its row: the pod is
        queued to the pods reconciler, which records it."""
        with self._lock:
            self._by_port[status.id] = status
        self._pods(key)

    def reported(self, port: str) -> PortStatus | None:
        with self._lock:
            return self._by_port.get(port)

    def applied(self, port: str, status: str) -> None:
        """The pod's row now records ``status`` for ``port``: the report is done (unless a newer one came)."""
        with self._lock:
            found = self._by_port.get(port)
            if found is not None and found.status == status:
                del self._by_port[port]

    def forget(self, port: str) -> None:
        """The port went with its pod."""
        with self._lock:
            self._by_port.pop(port, None)

    def keep_only(self, ports: Iterable[str]) -> None:
        """After a listing of every port: the reports of ports it no longer has go."""
        listed = set(ports)
        with self._lock:
            self._by_port = {port: status for port, status in self._by_port.items() if port in listed}
