"""A refill in flight when a namespace or a node is forgotten (network/pools.py), on a real database and a Neutron
stand-in: only what was forgotten loses its ports, even when a namespace and a node share a name."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from kuberaven.model import Database
from kuberaven.network.drivers.port_pools import PooledPort
from kuberaven.network.drivers.ports import Port
from kuberaven.network.pools import PortPools
from kuberaven.network.rules.pools import PoolKey
from kuberaven.network.state import TranslationStore
from tests.unit.test_pool_refill_failures import NAMESPACE, OPTIONS


class Neutron:
    """Makes pool ports; ``during`` runs while a bulk request is in flight (what happens meanwhile)."""

    name = "openstack"

    def __init__(self) -> None:
        self.during: Callable[[], None] = lambda: None
        self.ports: set[str] = set()
        self.ids = (f"p{i}" for i in itertools.count())
        self.pools, self.trunks = self, None  # its pools driver is itself; no node is nested

    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]:
        self.during()
        made = [next(self.ids) for _ in range(count)]
        self.ports.update(made)
        return [Port(port, f"10.64.3.{10 + int(port[1:])}", f"fa:16:3e:00:01:{int(port[1:]):02x}") for port in made]

    def delete(self, kind: str, port: str) -> None:
        self.ports.discard(port)

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        return []


def pools_on(database: Database, neutron: Neutron) -> PortPools:
    store = TranslationStore(database, "c", neutron)  # type: ignore[arg-type]  # the stand-in
    store.save_many([("Namespace", "ns-web", None, "web", NAMESPACE)])

    async def nodes() -> dict[str, str | None]:
        return {"shop": None}

    return PortPools(store, neutron, OPTIONS, "c", nodes)  # type: ignore[arg-type]  # the stand-in


def test_a_namespace_named_like_a_node_keeps_the_nodes_refills(database: Database) -> None:
    """Namespace "shop" goes while a refill of namespace "web"'s pool on node "shop" is in flight: its ports are
    the node's, and stay free in their pool."""
    neutron = Neutron()
    pools = pools_on(database, neutron)
    key = PoolKey.of("shop", "web", ["sg"])
    neutron.during = lambda: pools.forget_namespace("shop", "net-shop")
    pools._refill(key, 3)
    assert pools.free_counts() == {key: 3}, "the node's refill was kept"
    assert len(neutron.ports) == 3


def test_a_node_forgotten_meanwhile_loses_the_refills_ports(database: Database) -> None:
    neutron = Neutron()
    pools = pools_on(database, neutron)
    key = PoolKey.of("shop", "web", ["sg"])
    neutron.during = lambda: pools.forget_node("shop")
    pools._refill(key, 3)
    assert pools.free_counts() == {} and not neutron.ports, "made for a node that went: deleted"
