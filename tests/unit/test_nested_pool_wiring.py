"""Nested pools' wiring (network/pools.py, pool_recovery.py, and the pods reconciler's batch that takes and gives
back their ports) on a real database and a stand-in for Neutron's trunks.

The stand-in keeps what Neutron's trunk plugin enforces (a segmentation id once per trunk, an add_subports call
all or none, no deletion of an attached subport), so a refill that reused an id fails here as it would there.
The real Neutron is tests/integration/datapath/ports/test_nested_ports.py's.
"""

from __future__ import annotations

import itertools

from kuberaven.model import Database
from kuberaven.network.backend import CNI_KUBERAVEN, BackendError, NetworkOptions
from kuberaven.network.drivers.port_pools import PooledPort, Trunk
from kuberaven.network.drivers.ports import Port
from kuberaven.network.pools import KIND, PortPools
from kuberaven.network.reconcilers.context import TranslationContext
from kuberaven.network.reconcilers.pods import PodsReconciler, Ported
from kuberaven.network.rules.pools import PoolKey
from kuberaven.network.rules.translate import PodPort
from kuberaven.network.state import TranslationStore
from tests.unit.test_pool_refill_failures import NAMESPACE

OPTIONS = NetworkOptions(cni=CNI_KUBERAVEN, pool_min=2, pool_max=10, pool_batch=3, pool_prewarm_limit=30)
TRUNK = Trunk("trunk-a", "nic-a", "fa:16:3e:00:00:0a", "ACTIVE")


class Trunks:
    """Neutron's trunks as the pools see them: subports by trunk, each port's VLAN id, ports that exist."""

    name = "openstack"

    def __init__(self) -> None:
        self.sub_ports: dict[str, dict[str, int]] = {TRUNK.id: {}, "trunk-b": {"foreign": 1}}
        self.ports: dict[str, tuple[str, tuple[str, ...]]] = {}  # port → its network and groups
        self.ids = (f"p{i}" for i in itertools.count())
        self.pools, self.trunks = self, self  # its pools and trunks drivers are itself

    def trunk_vlans(self, trunk: str) -> set[int]:
        return set(self.sub_ports[trunk].values())

    def create_subports(
        self, trunk: str, network: str, subnet: str, groups: list[str], vlans: list[int], cluster: str
    ) -> list[Port]:
        made = [next(self.ids) for _ in vlans]
        if set(vlans) & self.trunk_vlans(trunk) or len(set(vlans)) < len(vlans):
            raise BackendError(f"segmentation ids {vlans} in use on trunk {trunk}")  # none of them kept
        self.ports |= dict.fromkeys(made, (network, tuple(sorted(groups))))
        self.sub_ports[trunk] |= dict(zip(made, vlans, strict=True))
        return [Port(port, f"10.64.3.{10 + int(port[1:])}", f"fa:16:3e:00:01:{int(port[1:]):02x}") for port in made]

    def delete_subports(self, trunk: str, ports: list[str]) -> None:
        for port in ports:
            self.sub_ports[trunk].pop(port, None)
            self.ports.pop(port, None)

    def delete(self, kind: str, port: str) -> None:
        assert not any(port in subs for subs in self.sub_ports.values()), f"{port} is attached: Neutron refuses"
        self.ports.pop(port, None)

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        attached = {port: (trunk, vlan) for trunk, subs in self.sub_ports.items() for port, vlan in subs.items()}
        return [
            PooledPort(port, net, "", groups, "", "", trunk=trunk, vlan_id=vlan, subport=True)
            for port, (net, groups) in self.ports.items()
            for trunk, vlan in [attached.get(port, (None, None))]
        ]


def pools_on(database: Database, neutron: Trunks) -> PortPools:
    store = TranslationStore(database, "c", neutron)  # type: ignore[arg-type]  # the stand-in
    store.save_many([("Namespace", "ns-uid", None, "shop", NAMESPACE)])

    async def nodes() -> dict[str, str | None]:
        return {"vm-1": TRUNK.id}

    return PortPools(store, neutron, OPTIONS, "c", nodes)  # type: ignore[arg-type]  # the stand-in


def pods_of(pools: PortPools) -> PodsReconciler:
    """The pods reconciler's batch over ``pools`` (no Kubernetes, no event loop: its blocking half)."""
    context = TranslationContext(None, pools.store, pools.backend, OPTIONS, "c", None, None, None, None)  # type: ignore[arg-type]  # no I/O
    return PodsReconciler(context, pools=pools)


def take(pods: PodsReconciler, uid: str) -> Ported:
    """A scheduled pod of the nested node takes a port (its namespace's groups: its pool's)."""
    [ported] = pods._ensure_ports([PodPort(f"shop/{uid}", None, uid, "shop", uid, "vm-1", (), TRUNK)])
    assert isinstance(ported, Ported), ported
    return ported


KEY = PoolKey.of("vm-1", "shop", ["sg"], TRUNK.id)


def test_refills_of_a_trunk_never_reuse_a_vlan_id_that_neutron_lists_on_it_ours_or_not(database: Database) -> None:
    neutron = Trunks()
    neutron.sub_ports[TRUNK.id] = {"theirs": 2}  # a subport someone else attached
    pools = pools_on(database, neutron)
    pools._refill(KEY, 3)
    pools._refill(KEY, 3)
    assert sorted(neutron.sub_ports[TRUNK.id].values()) == [1, 2, 3, 4, 5, 6, 7], "no refill was refused"
    taken = take(pods_of(pools), "pod-1").network
    assert (taken.trunk, taken.parent_mac) == (TRUNK.id, TRUNK.parent_mac)
    assert neutron.sub_ports[TRUNK.id][taken.port] == taken.vlan_id


def test_a_gone_pods_subport_stays_attached_in_its_pool_and_a_restart_recovers_every_id(database: Database) -> None:
    neutron = Trunks()
    pools = pools_on(database, neutron)
    pools._refill(KEY, 3)
    pods = pods_of(pools)
    taken = take(pods, "pod-1").network
    assert pods._forget("pod-1", None) and taken.port in neutron.sub_ports[TRUNK.id]
    assert pools.free_counts() == {KEY: 3}

    restarted = pools_on(database, neutron)
    assert restarted.load() == 3
    restarted._refill(KEY, 3)
    vlans = [state["vlan_id"] for state in map(lambda r: r.state, restarted.store.rows_of(KIND))]
    assert sorted(vlans) == [1, 2, 3, 4, 5, 6] == sorted(neutron.sub_ports[TRUNK.id].values())


def test_a_subport_made_before_a_crash_is_adopted_on_its_trunks_node_and_one_on_no_trunk_deleted(
    database: Database,
) -> None:
    neutron = Trunks()
    pools = pools_on(database, neutron)
    pools._refill(KEY, 3)
    neutron.create_subports(TRUNK.id, "net-1", "sub-1", ["sg"], [9], "c")  # attached, then SIGKILL: no row
    neutron.ports["loose"] = ("net-1", ("sg",))  # made, never attached
    restarted = pools_on(database, neutron)
    assert restarted.load() == 4
    assert "loose" not in neutron.ports
    assert restarted.free_counts() == {KEY: 4}


def test_a_node_whose_trunk_changed_deletes_its_free_subports_detached(database: Database) -> None:
    neutron = Trunks()
    pools = pools_on(database, neutron)
    pools._refill(KEY, 3)
    pools.node_seen("vm-1", None)  # no longer nested
    assert neutron.sub_ports[TRUNK.id] == {} and not neutron.ports and pools.free_counts() == {}
