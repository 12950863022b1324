"""A pod's network as one record (network/pod_network.py): both ways a port comes give the same shape, the row and
the VIF read it back, the groups its port should carry, and the pods reconciler's VIF writes."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from kuberaven.kube.event_recorder import EventRecorder, InvolvedObject
from kuberaven.model import Database
from kuberaven.network.backend import NetworkOptions
from kuberaven.network.drivers.ports import DEFAULT_MTU, Port
from kuberaven.network.pod_network import PodNetwork, pod_groups
from kuberaven.network.reconcilers.context import TranslationContext
from kuberaven.network.reconcilers.pod_vif import PodVifs
from kuberaven.network.reconcilers.pods import PodsReconciler, Ported
from kuberaven.network.rules.pools import port_state
from kuberaven.network.rules.translate import PodPort, pod_vif
from kuberaven.network.state import TranslationStore
from kuberaven.network.vif import VIF_ANNOTATION, Binding
from tests.unit.test_annotation_conflicts import VIF, Server, a_pod
from tests.unit.test_pool_refill_failures import NAMESPACE
from tests.unit.test_ported_threads import Ports

# The "Pod" row's keys, in order, as users read them (GET /api/v1/network/translations?kind=Pod, `net get`).
KEYS = ["port", "address", "pod_ip", "mac", "mtu", "node", "network", "subnet", "cidr", "gateway", "security_groups"]
NESTED = ["trunk", "vlan_id", "parent_mac"]


def made_for_its_pod(tmp_path: Path) -> PodNetwork:
    """A port made for one pod, as the pods reconciler's batch records it."""
    database = Database(f"sqlite:///{tmp_path}/k.db")
    database.prepare()
    try:
        store = TranslationStore(database, "c", Ports())  # type: ignore[arg-type]  # the stand-in
        store.save_many([("Namespace", "ns-uid", None, "shop", NAMESPACE)])
        context = TranslationContext(None, store, Ports(), NetworkOptions(), "c", None, None, None, None)  # type: ignore[arg-type]  # no I/O
        [ported] = PodsReconciler(context)._ensure_ports(
            [PodPort("shop/web", "10.64.3.9", "u-web", "shop", "web", "n1")]
        )
        assert isinstance(ported, Ported) and ported.namespace_group == "sg"
        assert store.state("Pod", "u-web") == ported.network.to_state()
        return ported.network
    finally:
        database.dispose()


def test_a_port_made_for_its_pod_and_a_pooled_one_give_one_shape(tmp_path: Path) -> None:
    made = made_for_its_pod(tmp_path)
    port = port_state(Port("p1", "10.64.3.5", "fa:16:3e:00:00:01"), "shop", "n1", NAMESPACE, ["sg"])
    pooled = PodNetwork.pooled_port({**port, "pod": "u-web"}, None)
    subport = PodNetwork.pooled_port(
        {**port_state(Port("p2", "10.64.3.6"), "shop", "n1", NAMESPACE, ["sg"], ("t", 7))}, None, "m"
    )
    assert list(made.to_state()) == KEYS
    assert list(pooled.to_state()) == [*KEYS, "pooled"]
    assert list(subport.to_state()) == [*NESTED, *KEYS, "pooled"]
    assert list(dataclasses.replace(made, status="ACTIVE").to_state()) == [*KEYS, "status"]
    for record in (made, pooled, subport, dataclasses.replace(pooled, status="DOWN")):
        state = json.loads(json.dumps(record.to_state()))  # as the row keeps it
        assert PodNetwork.from_state(state) == record
        assert record.vif(Binding.OVS) == pod_vif(state, Binding.OVS)


@pytest.mark.parametrize(
    ("policy", "ranged", "groups"),
    [
        ((), None, ("sg-ns",)),  # no policy selects it, no Service with ranges exposes it
        (("g-policy", "g-allow-egress"), None, ("g-policy", "g-allow-egress")),
        ((), ("g-cluster", "g-ranges"), ("g-cluster", "g-ranges")),  # in place of its namespace's
        (("g-policy",), ("g-cluster", "g-ranges"), ("g-policy",)),  # a policy's groups are left to the policy
    ],
)
def test_the_groups_a_pods_port_carries(
    policy: tuple[str, ...], ranged: tuple[str, ...] | None, groups: tuple[str, ...]
) -> None:
    assert pod_groups("sg-ns", policy, ranged) == groups


async def test_the_pods_reconcilers_status_write_is_computed_again_from_the_pod_as_it_stands() -> None:
    """The status alone follows the record: a conflict with a newer VIF of the same port keeps that VIF's other
    fields (here its groups), and a newer VIF of another port is left as it is."""
    recorded = PodNetwork("p1", VIF.ip, VIF.mac, VIF.mtu, VIF.network, VIF.subnet, VIF.cidr, VIF.gateway, ("sg",))
    recorded = dataclasses.replace(recorded, node="node-1", status="ACTIVE")
    involved = InvolvedObject("v1", "Pod", "shop", "web", "u-web")
    regrouped = dataclasses.replace(VIF, status="DOWN", security_groups=["sg", "policy"])
    read = a_pod(dataclasses.replace(VIF, status="DOWN", security_groups=["sg"]))
    server = Server(copy.deepcopy(read), lambda meta: meta["annotations"].update({VIF_ANNOTATION: regrouped.to_json()}))
    vifs = PodVifs(server, EventRecorder(server), "openstack")  # type: ignore[arg-type]  # the stand-in
    assert await vifs.write(read, recorded, False, involved) is not None
    assert server.vif() == dataclasses.replace(regrouped, status="ACTIVE")

    other = dataclasses.replace(VIF, port="p2", status="DOWN")
    server = Server(copy.deepcopy(read), lambda meta: meta["annotations"].update({VIF_ANNOTATION: other.to_json()}))
    vifs = PodVifs(server, EventRecorder(server), "openstack")  # type: ignore[arg-type]  # the stand-in
    assert await vifs.write(read, recorded, False, involved) is None
    assert server.vif() == other, "another port's VIF is not the record's to change"


BARE_ROW = port_state(Port("p1", "10.64.3.5", "fa:16:3e:00:00:01"), "shop", "n1", NAMESPACE, ["sg-b", "sg-a"])
NESTED_ROW = port_state(Port("p2", "10.64.3.6", "fa:16:3e:00:00:02"), "shop", "vm1", NAMESPACE, ["sg"], ("t", 7))
BARE = PodNetwork(
    "p1", "10.64.3.5", "fa:16:3e:00:00:01", DEFAULT_MTU, NAMESPACE["network"], NAMESPACE["subnet"],
    NAMESPACE["cidr"], NAMESPACE.get("gateway"), ("sg-a", "sg-b"), pod_ip="192.0.2.9", node="n1", pooled=True,
)  # fmt: skip


@pytest.mark.parametrize(
    ("row", "pod_ip", "parent_mac", "expected"),
    [
        ({**BARE_ROW, "pod": "u"}, "192.0.2.9", None, BARE),
        ({**BARE_ROW, "pod": "u"}, "192.0.2.9", "m", BARE),  # a bare port has no parent MAC, whatever is given
        ({**BARE_ROW, "trunk": None, "vlan_id": 3}, "192.0.2.9", None, BARE),  # no trunk: not nested
        (
            NESTED_ROW,
            None,
            "m",
            dataclasses.replace(
                BARE,
                port="p2",
                address="10.64.3.6",
                mac="fa:16:3e:00:00:02",
                node="vm1",
                security_groups=("sg",),
                pod_ip=None,
                trunk="t",
                vlan_id=7,
                parent_mac="m",
            ),
        ),
        ({**NESTED_ROW, "parent_mac": "row"}, None, None, None),  # the row's parent MAC when none is given
    ],
)
def test_a_pooled_port_is_read_as_its_pods_record(
    row: dict[str, object], pod_ip: str | None, parent_mac: str | None, expected: PodNetwork | None
) -> None:
    """What a pod holding a pooled port is recorded as: the "Port" row read as the pod's (its pool's groups,
    sorted), pooled, with the pod's IP and a subport's trunk, VLAN id and parent MAC."""
    record = PodNetwork.pooled_port(row, pod_ip, parent_mac)
    if expected is None:
        assert (record.trunk, record.parent_mac) == ("t", "row")
    else:
        assert record == expected
    assert record.status is None, "a port's status comes from the backend's reports, not from its pool"
    assert PodNetwork.from_state(json.loads(json.dumps(record.to_state()))) == record


def test_a_pooled_row_without_groups_is_refused() -> None:
    """A pool's row always names its groups (port_state()): one without is a broken row, not a pod without
    groups."""
    with pytest.raises(KeyError):
        PodNetwork.pooled_port({k: v for k, v in BARE_ROW.items() if k != "security_groups"}, None)
