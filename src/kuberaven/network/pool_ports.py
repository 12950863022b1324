"""Neutron's side of the port pools (network/): a refill's bulk request, and pooled ports deleted.

    pools.py's refill ──► PoolPorts.create(): a bare node's pool: one bulk POST of ports bound to the node;
                          a nested node's: subports of its trunk, each with a VLAN id no subport of it has
    pools.py (shrink, a namespace or node forgotten), pool_recovery.py ──► PoolPorts.delete(): a trunk's
                          subports detached first (one call per trunk), other ports one by one

Blocking. A port that a failed delete leaves in Neutron is adopted or deleted by
the next start's recovery (pool_recovery.py).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Protocol, TypeGuard

from .. import metrics
from .backend import BackendError, NetworkBackend, PooledPort, Port
from .rules.pools import PoolKey
from .rules.trunks import allocate_vlans
from .trunks import TrunkingBackend

log = logging.getLogger(__name__)


class PoolingBackend(TrunkingBackend, Protocol):
    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]: ...

    def pool_ports(self, cluster: str) -> list[PooledPort]: ...

    def set_port_security_groups(self, port: str, groups: list[str]) -> None: ...


def pools_ports(backend: NetworkBackend) -> TypeGuard[PoolingBackend]:
    return callable(getattr(backend, "create_pool_ports", None))


class PoolPorts:
    """Makes and deletes one cluster's pooled ports in Neutron."""

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
            made = self.backend.create_pool_ports(
                network["network"], network["subnet"], key.node, groups, count, self.cluster
            )
            ports: list[tuple[Port, tuple[str, int] | None]] = [(port, None) for port in made]
        else:
            used = self.backend.trunk_vlans(key.trunk)  # Neutron's: every subport, ours or not, attached now
            vlans = allocate_vlans(used, count, key.trunk)
            made = self.backend.create_subports(
                key.trunk, network["network"], network["subnet"], groups, vlans, self.cluster
            )
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
                self.backend.delete_subports(trunk, ports)
            except BackendError as error:
                log.warning("deleting %d subports of trunk %s: %s", len(ports), trunk, error)

    def _delete_port(self, port: str) -> None:
        try:
            self.backend.delete("port", port)
        except BackendError as error:
            log.warning("deleting pool port %s: %s", port, error)
