"""What the cloud reports of pods' ports (network/): an input of the pods reconciler, not a second writer.

    activation.py (polls the backend) ──► PortReports.report(pod key, status) ──► the pods reconciler's queue
    reconcilers/pods.py, reconciling that pod ──► reported(port) ──► its record's status: the "Pod" row, the
                                                                     VIF annotation, an Event
                                              ──► applied(port, status): the entry goes once the row says it

One cluster's activation and translator are built apart by the daemon, with
the cluster's backend in common: reports_of(backend) is the one map of that
backend. Reports come on the event loop (listeners are told there); the pods
reconciler's worker threads forget ports, so the map is under a lock. An
entry lives from a report until the pods reconciler recorded it, or the port
went (forgotten with its pod), or a full listing no longer shows the port.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable

from .drivers import NetworkBackend
from .drivers.port_status import PortStatus

Listener = Callable[[str], None]  # a pod's namespace/name: reconcile it


class PortReports:
    """The statuses reported and not yet recorded, by port id, and who is told of each."""

    def __init__(self) -> None:
        self._by_port: dict[str, PortStatus] = {}
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_port)

    def report(self, key: str, status: PortStatus) -> None:
        """The backend says ``status`` of the port of the pod ``key`` (namespace/name), unlike its row (on the
        event loop: the listeners queue the pod)."""
        with self._lock:
            self._by_port[status.id] = status
        for listener in list(self._listeners):
            listener(key)

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

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)


_OF_BACKEND: weakref.WeakKeyDictionary[NetworkBackend, PortReports] = weakref.WeakKeyDictionary()


def reports_of(backend: NetworkBackend) -> PortReports:
    """The one map of reports of ``backend``'s ports (its cluster's activation fills it, its translator reads it)."""
    found = _OF_BACKEND.get(backend)
    if found is None:
        found = _OF_BACKEND[backend] = PortReports()
    return found
