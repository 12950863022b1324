"""Nested nodes' rules (network/rules/trunks.py, rules/pools.py, translate.py's pod_vif, pod_network.py): which
node is on a trunk, the VLAN ids of its subports, the pools per trunk, and the VIF a nested pod gets."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kuberaven.network.backend import CNI_KUBERAVEN, NetworkOptions
from kuberaven.network.drivers.port_pools import Trunk
from kuberaven.network.drivers.ports import Port
from kuberaven.network.pod_network import PodNetwork
from kuberaven.network.rules.pools import PoolKey, choose, key_of, port_state, refill_plan
from kuberaven.network.rules.translate import pod_vif
from kuberaven.network.rules.trunks import (
    NODE_TRUNK_ANNOTATION,
    NodeTrunkError,
    TrunkAsk,
    VlansExhausted,
    allocate_vlans,
    nested_trunk,
    trunk_ask,
)
from kuberaven.network.vif import VLAN_IDS, Binding, Vif

OPTIONS = NetworkOptions(cni=CNI_KUBERAVEN, pool_min=5, pool_max=20, pool_batch=10, pool_prewarm_limit=30)
TRUNK_A = Trunk("trunk-a", "nic-a", "fa:16:3e:00:00:0a", "ACTIVE")
TRUNK_B = Trunk("trunk-b", "nic-b", "fa:16:3e:00:00:0b", "DOWN")
NAMESPACE = {"network": "net-1", "subnet": "sub-1", "cidr": "10.64.3.0/24", "gateway": "10.64.3.1"}


def node(name: str, addresses: list[tuple[str, str]], trunk: str | None = None) -> dict[str, Any]:
    annotations = {NODE_TRUNK_ANNOTATION: trunk} if trunk is not None else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"addresses": [{"type": kind, "address": address} for kind, address in addresses]},
    }


# -- which nodes are nested ---------------------------------------------------------------------------


def test_a_node_asks_by_its_annotation_or_else_by_its_internal_ips() -> None:
    vm = node("vm-1", [("InternalIP", "192.168.0.5"), ("Hostname", "vm-1"), ("ExternalIP", "203.0.113.5")])
    assert trunk_ask(vm) == TrunkAsk("vm-1", None, ("192.168.0.5",))
    assert trunk_ask(node("vm-2", [], trunk=" trunk-b ")) == TrunkAsk("vm-2", "trunk-b", ())
    assert trunk_ask({"metadata": {"name": "bare"}}) == TrunkAsk("bare", None, ())


def test_a_node_whose_address_is_a_trunks_parent_is_nested_on_it_and_one_with_none_is_bare() -> None:
    by_address = TrunkAsk("vm-1", None, ("192.168.0.5",))
    assert nested_trunk(by_address, [TRUNK_A]) == TRUNK_A
    assert nested_trunk(by_address, []) is None, "no trunk on its addresses: a bare node (binding ovs)"


def test_the_annotation_names_the_trunk_and_one_neutron_lacks_is_an_error_not_a_bare_node() -> None:
    named = TrunkAsk("vm-2", "trunk-b", ())
    assert nested_trunk(named, [TRUNK_B]) == TRUNK_B
    with pytest.raises(NodeTrunkError, match=r"node vm-2: trunk trunk-b of its kuberaven\.io/trunk does not exist"):
        nested_trunk(named, [])


def test_addresses_that_are_the_parents_of_several_trunks_are_an_error_naming_them() -> None:
    with pytest.raises(NodeTrunkError, match=r"several trunks \(trunk-a, trunk-b\).*kuberaven\.io/trunk"):
        nested_trunk(TrunkAsk("vm-3", None, ("192.168.0.5", "10.0.0.5")), [TRUNK_B, TRUNK_A])


# -- VLAN ids ------------------------------------------------------------------------------------------


def test_vlan_ids_are_the_lowest_that_no_subport_of_the_trunk_uses() -> None:
    assert allocate_vlans(set(), 3, "t") == [1, 2, 3]
    assert allocate_vlans({1, 2, 4, 7}, 4, "t") == [3, 5, 6, 8]


def test_no_vlan_id_is_ever_given_twice_on_a_trunk_as_subports_come_and_go() -> None:
    rng = random.Random(36)
    attached: set[int] = set()
    for _ in range(300):
        if attached and rng.random() < 0.4:
            attached -= set(rng.sample(sorted(attached), rng.randint(1, min(5, len(attached)))))
        new = allocate_vlans(attached, rng.randint(1, 10), "t")
        assert len(set(new)) == len(new) and not set(new) & attached, "neither twice in one call nor one in use"
        assert set(new) <= set(VLAN_IDS)
        attached |= set(new)


def test_a_trunk_without_enough_free_ids_makes_no_subport() -> None:
    with pytest.raises(VlansExhausted, match="trunk t: 2 subports asked, 1 VLAN ids free"):
        allocate_vlans(set(VLAN_IDS) - {4094}, 2, "t")


# -- pools per trunk -----------------------------------------------------------------------------------


def test_a_nested_nodes_pools_are_per_trunk_and_never_lend_a_port_across_trunks_or_to_bare_pools() -> None:
    bare = PoolKey.of("vm-1", "shop", ["sg-ns"])
    nested = PoolKey.of("vm-1", "shop", ["sg-ns"], "trunk-a")
    policy = PoolKey.of("vm-1", "shop", ["sg-policy"], "trunk-a")
    assert nested != bare and nested.trunk == "trunk-a" and bare.trunk == ""
    assert choose(policy, {bare: 9, PoolKey.of("vm-1", "shop", ["sg-ns"], "trunk-b"): 9}) == (None, False)
    assert choose(policy, {bare: 9, nested: 2}) == (nested, True), "its trunk's port, its groups set first"
    assert choose(bare, {nested: 9}) == (None, False)


def test_prewarming_and_refills_plan_subport_pools_like_bare_ones() -> None:
    nested = PoolKey.of("vm-1", "shop", ["sg-ns"], "trunk-a")
    bare = PoolKey.of("node-1", "shop", ["sg-ns"])
    assert refill_plan({}, {}, {}, {}, [nested, bare], OPTIONS) == [(bare, 5), (nested, 5)]
    assert refill_plan({nested: 1}, {}, {nested: 3}, {}, [], OPTIONS) == [(nested, 10)]


def test_a_subports_row_keeps_its_trunk_and_vlan_and_its_pool_key_follows() -> None:
    state = port_state(Port("p1", "10.64.3.9", "fa:16:3e:00:00:01"), "shop", "vm-1", NAMESPACE, ["sg"], ("trunk-a", 7))
    assert (state["trunk"], state["vlan_id"]) == ("trunk-a", 7)
    assert key_of(state) == PoolKey.of("vm-1", "shop", ["sg"], "trunk-a")
    bare = port_state(Port("p2", "10.64.3.8", "fa:16:3e:00:00:02"), "shop", "node-1", NAMESPACE, ["sg"])
    assert "trunk" not in bare and key_of(bare) == PoolKey.of("node-1", "shop", ["sg"])


# -- the VIF ---------------------------------------------------------------------------------------------


def test_a_nested_pods_vif_is_binding_vlan_with_its_vlan_trunk_and_parent_mac_whatever_the_backend() -> None:
    port = port_state(Port("p1", "10.64.3.9", "fa:16:3e:00:00:01"), "shop", "vm-1", NAMESPACE, ["sg"], ("trunk-a", 7))
    state = PodNetwork.pooled_port({**port, "pod": "uid-1"}, None, TRUNK_A.parent_mac).to_state()
    vif = pod_vif(state, Binding.OVS)
    assert (vif.binding, vif.vlan_id, vif.trunk, vif.parent_mac) == (Binding.VLAN, 7, "trunk-a", TRUNK_A.parent_mac)
    assert vif.status == "DOWN", "a subport waits for its trunk's parent, as an OVS port waits for OVN"
    assert Vif.from_json(vif.to_json()) == vif, "a reader takes it back"
    assert pod_vif({**state, "status": "ACTIVE"}, Binding.OVS).active


def test_a_bare_nodes_pod_keeps_its_backends_binding_and_no_vlan_fields() -> None:
    port = port_state(Port("p2", "10.64.3.8", "fa:16:3e:00:00:02"), "shop", "node-1", NAMESPACE, ["sg"])
    vif = PodNetwork.pooled_port({**port, "pod": "uid-2"}, None, None).vif(Binding.OVS)
    assert (vif.binding, vif.vlan_id, vif.trunk, vif.parent_mac) == (Binding.OVS, None, None, None)
