"""The port pools' ports in the backend (network/): a refill's bulk request, and pooled ports deleted.

    pools.py's refill ──► PortSupply.create(): a bare node's pool ──► the backend's pools driver: one bulk request
                          of ports bound to the node; a nested node's ──► its trunks driver: subports of the
                          node's trunk, each with a VLAN id no subport of it has
    pools.py (shrink, a namespace or node forgotten), pool_recovery.py ──► PortSupply.delete(): a trunk's
                          subports detached first (one call per trunk), other ports one by one

Blocking. A port that a failed delete leaves in the backend is adopted or
deleted by the next start's recovery (pool_recovery.py). Only a backend with
a pools driver has port pools (drivers/__init__.py's pools_ports()); a nested
node's pool needs its trunks driver too, which every trunk a node is found on
implies (trunks.py asks that driver).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from .. import metrics
from .backend import BackendError
from .drivers import PoolingBackend
from .drivers.port_pools import TrunkDriver
from .drivers.ports import Port
from .rules.pools import PoolKey
from .rules.trunks import allocate_vlans

log = logging.getLogger(__name__)


class PortSupply:
    """Makes and deletes one cluster's pooled ports in the backend."""

    def __init__(self, backend: PoolingBackend, cluster: str) -> None:
        self.backend = backend
        self.cluster = cluster
        self.made = 0  # ports made since start (tests and benchmarks read it)

    def create(self, key: PoolKey, network: dict[str, Any], count: int) -> list[tuple[Port, tuple[str, int] | None]]:
        """A bulk request's ports, each with its (trunk, VLAN id) when it is a subport: bound to the node, or (a
        nested node's pool) subports of its trunk with VLAN ids no subport of the trunk has, as Neutron lists
        them (one refill per trunk at a time: rules/pools.py's startable())."""
        groups = list(key.security_groups)
        if not key.trunk:
            made = self.backend.pools.create_pool_ports(
                network["network"], network["subnet"], key.node, groups, count, self.cluster
            )
            ports: list[tuple[Port, tuple[str, int] | None]] = [(port, None) for port in made]
        else:
            trunks = self._trunks()
            used = trunks.trunk_vlans(key.trunk)  # the backend's: every subport, ours or not, attached now
            vlans = allocate_vlans(used, count, key.trunk)
            made = trunks.create_subports(key.trunk, network["network"], network["subnet"], groups, vlans, self.cluster)
            ports = [(port, (key.trunk, vlan)) for port, vlan in zip(made, vlans, strict=True)]
            metrics.POOL_SUBPORTS_MADE.labels(self.cluster).inc(len(ports))
        metrics.POOL_PORTS_MADE.labels(self.cluster).inc(len(ports))
        self.made += len(ports)
        return ports

    def delete(self, states: list[dict[str, Any]]) -> None:
        """Delete pooled ports (their rows are gone): a trunk's subports detached first, one call per trunk."""
        subports: dict[str, list[str]] = defaultdict(list)
        for state in states:
            if state.get("trunk"):
                subports[state["trunk"]].append(state["port"])
            else:
                self._delete_port(state["port"])
        for trunk, ports in sorted(subports.items()):
            try:
                self._trunks().delete_subports(trunk, ports)
            except BackendError as error:
                log.warning("deleting %d subports of trunk %s: %s", len(ports), trunk, error)

    def _trunks(self) -> TrunkDriver:
        """The backend's trunks driver: a subport's pool exists only on a backend that found the node's trunk."""
        trunks = self.backend.trunks
        if trunks is None:
            raise BackendError(f"the {self.backend.name} backend has no trunks: a nested node's pool cannot be kept")
        return trunks

    def _delete_port(self, port: str) -> None:
        try:
            self.backend.delete("port", port)
        except BackendError as error:
            log.warning("deleting pool port %s: %s", port, error)
