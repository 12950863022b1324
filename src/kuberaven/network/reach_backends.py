"""The backends can-reach reads (network/, an edge): by the name a translation row carries, opened once.

    reach_store.ask() ──► ReachBackends.get("embedded" | "openstack")
        ──► EmbeddedBackend over the database, or OpenStackBackend on the cloud (clouds.yaml entry, else OS_*)

can-reach reads what the backend holds by id (ports, groups, load
balancers), so no project is needed; the CLI opens these for one question,
the web server for its lifetime (one OpenStack session, shared by requests).
"""

from __future__ import annotations

import threading

from ..model.database import Database
from .backend import BackendError
from .backends import make_backend
from .drivers import NetworkBackend


class ReachBackends:
    def __init__(self, database: Database, cloud: str | None = None) -> None:
        """``cloud``: the clouds.yaml entry of the openstack backend (network_cloud); None: the OS_* variables."""
        self.database = database
        self.cloud = cloud
        self._opened: dict[str, NetworkBackend] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> NetworkBackend:
        """The backend ``name`` (what made the rows asked about); BackendError when it cannot be reached."""
        with self._lock:
            if name not in self._opened:
                try:
                    self._opened[name] = make_backend(name, self.database, self.cloud)
                except BackendError:
                    raise
                except Exception as error:  # openstacksdk raises its own and config errors alike on connect
                    raise BackendError(f"{name} backend: {error}") from error
            return self._opened[name]

    def close(self) -> None:
        with self._lock:
            for backend in self._opened.values():
                backend.close()
            self._opened.clear()
