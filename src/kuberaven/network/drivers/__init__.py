"""The backend's drivers (network/drivers/): one protocol per concept, and NetworkBackend, the set of them.

    translator, reconcilers/, state.py ──► NetworkBackend ──► backends/embedded.py | backends/openstack.py
        always:  networks.py (NetworkDriver), ports.py (PortDriver), security_groups.py (SecurityGroupDriver),
                 load_balancers.py (LoadBalancerDriver), floating_ips.py (FloatingIPDriver),
                 source_filters.py (SourceFilterDriver), reads.py (ReachReads, can-reach's), owned/delete/close
        when the backend has them (``pools``, ``trunks``, ``port_status``; None: it has not):
                 port_pools.py (PortPoolDriver, TrunkDriver: pools on bare and nested nodes),
                 port_status.py (PortStatusDriver: activation.py's)

Calls are blocking (openstacksdk and SQLAlchemy are); the translator runs
them in worker threads. Every ``ensure_*`` is idempotent: it finds what a
previous attempt made (by name and the object's uid tag) before creating, so
a retry after a crash or a timeout never makes a second copy.

Which optional drivers a backend has is decided once, when make_backend()
builds it from the settings (backends/__init__.py), and read as attributes:
pools_ports(), trunks_subports() and reports_port_status() narrow a backend
to one that has them. What every driver shares (tags, errors, the
translation's options) is network/backend.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeGuard

from ..backend import Owned
from .floating_ips import FloatingIPDriver
from .load_balancers import LoadBalancerDriver
from .networks import NetworkDriver
from .port_pools import PortPoolDriver, TrunkDriver
from .port_status import PortStatusDriver
from .ports import PortDriver
from .reads import ReachReads
from .security_groups import SecurityGroupDriver
from .source_filters import SourceFilterDriver


class NetworkBackend(
    NetworkDriver,
    PortDriver,
    SecurityGroupDriver,
    LoadBalancerDriver,
    FloatingIPDriver,
    SourceFilterDriver,
    ReachReads,
    Protocol,
):
    """A backend: every driver the translation always needs, and those it may have."""

    name: str  # what translation rows record as the backend that made them (reach_backends.py opens it by it)

    @property
    def pools(self) -> PortPoolDriver | None:
        """Ports made in bulk for port pools (network/pools.py); None: ports are made one per pod."""

    @property
    def trunks(self) -> TrunkDriver | None:
        """Nested nodes' trunks and their subports (network/trunks.py); None: every node is bare."""

    @property
    def port_status(self) -> PortStatusDriver | None:
        """The ports' status as the cloud reports it (network/activation.py); None: nothing to report."""

    def owned(self, cluster: str) -> Iterator[Owned]:
        """Every resource tagged with the cluster, in the order they can be deleted, read as iterated (where the
        backend's paging survives deletions meanwhile, a page of about OWNED_PAGE at a time: a cluster has a port
        per pod). Iterate in one thread."""

    def delete(self, kind: str, resource: str) -> None:
        """Delete one resource with what hangs off it (a network's ports and subnets, a load
        balancer's listeners, pools and members); gone already is fine."""

    def close(self) -> None: ...


class PoolingBackend(NetworkBackend, Protocol):
    """A backend that makes ports in bulk: what network/pools.py drives."""

    @property
    def pools(self) -> PortPoolDriver: ...


class TrunkingBackend(NetworkBackend, Protocol):
    """A backend that knows trunks: what network/trunks.py asks which node is nested."""

    @property
    def trunks(self) -> TrunkDriver: ...


class ReportsPortStatus(NetworkBackend, Protocol):
    """A backend that reports its ports' status: what network/activation.py polls."""

    @property
    def port_status(self) -> PortStatusDriver: ...


def pools_ports(backend: NetworkBackend) -> TypeGuard[PoolingBackend]:
    return backend.pools is not None


def trunks_subports(backend: NetworkBackend) -> TypeGuard[TrunkingBackend]:
    return backend.trunks is not None


def reports_port_status(backend: NetworkBackend) -> TypeGuard[ReportsPortStatus]:
    return backend.port_status is not None
