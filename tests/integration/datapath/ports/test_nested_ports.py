"""Nested pods' ports on the real Neutron: subports of their node's trunk, pooled per trunk, across a SIGKILL.

Against the package's data path (conftest.py here, tests/datapath.py), with Neutron's trunk plugin. The test
makes what a cloud would have: a network with two ports as two VMs' NICs, a trunk on each, and a Node per VM
(one found by its InternalIP, one named by the kuberaven.io/trunk annotation). No VM runs and no packet is sent
(the node agent's VLAN wiring is tested where it is built): what is proven is the translation, on Neutron.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.backend import BackendError, pool_port_name
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.pools import KIND as POOLED
from kuberaven.network.rules.trunks import NODE_TRUNK_ANNOTATION
from kuberaven.network.vif import Binding, Vif
from tests.datapath import PORTS_GROUP, DataPath
from tests.helpers import bound_pod, eventually, vif_of

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(300)]

MERGE_PATCH = "application/merge-patch+json"
NOT_A_PARENT = "198.51.100.7"  # the annotated node's InternalIP: no port holds it (TEST-NET-2)
PROBE_VLAN = 4000  # the backend's own subports' VLAN ids: far above the lowest ids the daemon takes


@dataclass(frozen=True)
class Vm:
    """A VM as the cloud has it: its NIC (a trunk's parent port) and its Node."""

    node: str
    port: str
    mac: str
    trunk: str


def _vm_network(conn: Any, tag: str) -> tuple[Any, Any]:
    network = conn.network.create_network(name=f"vms-{tag}")
    subnet = conn.network.create_subnet(network_id=network.id, ip_version=4, cidr="192.168.77.0/24", name=f"vms-{tag}")
    return network, subnet


def _vm(conn: Any, network: Any, node: str) -> Vm:
    port = conn.network.create_port(network_id=network.id, name=f"{node}-nic")
    trunk = conn.network.create_trunk(port_id=port.id, name=f"{node}-trunk")
    return Vm(node, port.id, port.mac_address, trunk.id)


def _sub_ports(conn: Any, trunk: str) -> dict[str, int]:
    """The trunk's subports: port → VLAN id."""
    return {s["port_id"]: int(s["segmentation_id"]) for s in conn.network.get_trunk(trunk).sub_ports or []}


def _remove_cloud(conn: Any, network: Any, vms: list[Vm]) -> None:
    """The trunks (their subports detached and deleted first), the NICs and the network, whatever is left."""
    for vm in vms:
        with contextlib.suppress(Exception):
            left = list(_sub_ports(conn, vm.trunk))
            if left:
                conn.network.delete_trunk_subports(vm.trunk, [{"port_id": p} for p in left])
            for port in left:
                conn.network.delete_port(port, ignore_missing=True)
        with contextlib.suppress(Exception):
            conn.network.delete_trunk(vm.trunk, ignore_missing=True)
        with contextlib.suppress(Exception):
            conn.network.delete_port(vm.port, ignore_missing=True)
    with contextlib.suppress(Exception):
        conn.network.delete_network(network, ignore_missing=True)


@contextlib.contextmanager
def cloud(datapath: DataPath, tag: str) -> Iterator[tuple[Any, Any, list[Vm]]]:
    """Two VMs' NICs, each the parent of a trunk, on a network of their own; all removed after, even on failure."""
    conn = datapath.connection()
    network, subnet = _vm_network(conn, tag)
    vms: list[Vm] = []
    try:
        vms = [_vm(conn, network, f"nested-{name}-{tag}") for name in ("a", "b")]
        yield conn, subnet, vms
    finally:
        _remove_cloud(conn, network, vms)
        conn.close()


@contextlib.asynccontextmanager
async def nodes(kube: KubeClient, conn: Any, vms: list[Vm]) -> AsyncIterator[None]:
    """A Node per VM: the first with its NIC's address as InternalIP, the second named by annotation; deleted
    after, and then no subport of ours may stay on the trunks (the free ones go with their node)."""
    first, second = vms
    nic = conn.network.get_port(first.port).fixed_ips[0]["ip_address"]
    made = []
    try:
        for vm, address, annotations in (
            (first, nic, {}),
            (second, NOT_A_PARENT, {NODE_TRUNK_ANNOTATION: second.trunk}),
        ):
            meta = {"name": vm.node, "annotations": annotations}
            await kube.request("POST", "/api/v1/nodes", body={"metadata": meta})
            made.append(vm.node)
            status = {"status": {"addresses": [{"type": "InternalIP", "address": address}]}}
            await kube.request("PATCH", f"/api/v1/nodes/{vm.node}/status", body=status, content_type=MERGE_PATCH)
        yield
    finally:
        for name in made:
            with contextlib.suppress(Exception):
                await kube.request("DELETE", f"/api/v1/nodes/{name}")


def attach_is_all_or_none(conn: Any, subnet: Any, trunk: str, tag: str) -> None:
    """The backend's bulk subports: attached with their VLAN ids in one call; an attach Neutron refuses (an id in
    use on the trunk) leaves no port of that request; detached and deleted in one call."""
    backend, cluster, vlan = OpenStackBackend(conn), f"probe-{tag}", PROBE_VLAN
    made = backend.trunks.create_subports(trunk, subnet.network_id, subnet.id, [], [vlan], cluster)
    ours = {p.id for p in conn.network.ports(name=pool_port_name(cluster))}
    assert ours == {made[0].id} and _sub_ports(conn, trunk)[made[0].id] == vlan
    with pytest.raises(BackendError, match="attaching them"):
        backend.trunks.create_subports(trunk, subnet.network_id, subnet.id, [], [vlan + 1, vlan], cluster)
    assert {p.id for p in conn.network.ports(name=pool_port_name(cluster))} == ours, "the refused request's went"
    backend.trunks.delete_subports(trunk, [made[0].id])
    assert not list(conn.network.ports(name=pool_port_name(cluster))) and made[0].id not in _sub_ports(conn, trunk)


def pool_rows(datapath: DataPath) -> dict[str, dict[str, Any]]:
    """Every pooled port's row state in the daemon's database (network/pools.py): port → its state."""
    database = Database(datapath.daemon.database_url)
    try:
        with database.session() as session:
            rows = session.scalars(sa.select(NetworkTranslation).where(NetworkTranslation.kind == POOLED)).all()
            return {row.uid: dict(row.state) for row in rows}
    finally:
        database.dispose()


async def nested_vif(kube: KubeClient, namespace: str, name: str, vm: Vm) -> Vif:
    vif = await vif_of(kube, namespace, name, timeout=45)
    assert (vif.binding, vif.trunk, vif.parent_mac) == (Binding.VLAN, vm.trunk, vm.mac), vif
    return vif


def assert_subports(conn: Any, vm: Vm, vifs: list[Vif], rows: dict[str, dict[str, Any]]) -> None:
    """Each VIF's port is a subport of its VM's trunk with the VIF's VLAN id; no port or VLAN id twice; the
    trunk's subports are those the database records for it, with the same VLAN ids."""
    sub_ports = _sub_ports(conn, vm.trunk)
    assert {vif.port: vif.vlan_id for vif in vifs}.items() <= sub_ports.items(), (vifs, sub_ports)
    assert len({vif.port for vif in vifs}) == len({vif.vlan_id for vif in vifs}) == len(vifs), vifs
    recorded = {port: state["vlan_id"] for port, state in rows.items() if state.get("trunk") == vm.trunk}
    assert recorded == sub_ports, "the database and the trunk agree on every subport and its VLAN id"


async def agreeing(datapath: DataPath, conn: Any, vifs: dict[Vm, list[Vif]]) -> dict[str, dict[str, Any]]:
    """assert_subports() for each VM's pods, once no refill is between Neutron and the database (it attaches
    before it records); the pool rows."""

    def agree() -> dict[str, dict[str, Any]]:
        rows = pool_rows(datapath)
        for vm, its in vifs.items():
            assert_subports(conn, vm, its, rows)
        return rows

    rows: dict[str, dict[str, Any]] = await eventually(agree, timeout=20, interval=0.5, off_loop=True)
    return rows


async def delete_pod(kube: KubeClient, namespace: str, name: str) -> None:
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")


async def test_nested_pods_get_subports_of_their_nodes_trunks_recycled_and_recovered_after_a_sigkill(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str
) -> None:
    started = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    with cloud(datapath, tag) as (conn, subnet, vms):
        a, b = vms
        await asyncio.to_thread(attach_is_all_or_none, conn, subnet, a.trunk, tag)
        async with nodes(dp_kube, conn, vms):
            on_a = [f"a{i}" for i in range(3)]
            for name, vm in [(n, a) for n in on_a] + [("b0", b), ("b1", b)]:
                await bound_pod(dp_kube, dp_namespace, name, vm.node)
            await bound_pod(dp_kube, dp_namespace, "bare", datapath.node)
            vifs = {n: await nested_vif(dp_kube, dp_namespace, n, vm) for n, vm in [(n, a) for n in on_a]}
            vifs |= {n: await nested_vif(dp_kube, dp_namespace, n, b) for n in ("b0", "b1")}
            bare = await vif_of(dp_kube, dp_namespace, "bare", timeout=45)
            assert (bare.binding, bare.trunk, bare.vlan_id) == (Binding.OVS, None, None), "a cluster mixes both"
            await agreeing(datapath, conn, {a: [vifs[n] for n in on_a], b: [vifs["b0"], vifs["b1"]]})

            # A deleted pod's subport goes back to its pool, still attached with its VLAN id.
            gone = vifs.pop("a0")
            await delete_pod(dp_kube, dp_namespace, "a0")
            await eventually(lambda: pool_rows(datapath)[gone.port]["pod"] is None, timeout=20, off_loop=True)
            assert _sub_ports(conn, a.trunk)[gone.port] == gone.vlan_id

            # SIGKILL, restart: the pools come back from Neutron and the database, and new pods take from them.
            before = {p: s.get("vlan_id") for p, s in (await asyncio.to_thread(pool_rows, datapath)).items()}
            datapath.kill_daemon()
            await asyncio.to_thread(datapath.restart_daemon)
            after = await asyncio.to_thread(pool_rows, datapath)
            assert before.items() <= {p: s.get("vlan_id") for p, s in after.items()}.items(), "nothing lost"
            for name, vm in (("a3", a), ("a4", a), ("b2", b)):
                await bound_pod(dp_kube, dp_namespace, name, vm.node)
                vifs[name] = await nested_vif(dp_kube, dp_namespace, name, vm)
            on = {vm: [v for n, v in vifs.items() if n[0] == letter] for vm, letter in ((a, "a"), (b, "b"))}
            rows = await agreeing(datapath, conn, on)
            holders = [state["pod"] for state in rows.values() if state.get("pod")]
            assert len(holders) == len(set(holders)), "no pod holds two ports"
            assert {v.port for v in vifs.values()} <= {p for p, state in rows.items() if state.get("pod")}

            # The namespace goes: no subport on its network is left on either trunk.
            network = vifs["a1"].network
            await dp_kube.request("DELETE", f"/api/v1/namespaces/{dp_namespace}")

            pods_ports = {v.port for v in vifs.values()}

            def detached() -> None:
                on_network = {p.id for p in conn.network.ports(network_id=network)}
                left = {p for vm in vms for p in _sub_ports(conn, vm.trunk)} & (on_network | pods_ports)
                assert not on_network and not left, (on_network, left)

            await eventually(detached, timeout=60, interval=0.5, off_loop=True)
        # The nodes gone, their free subports (other namespaces' pools) go too: the trunks are bare again.
        await eventually(lambda: not any(_sub_ports(conn, vm.trunk) for vm in vms), timeout=30, off_loop=True)
    print(f"nested ports: {time.monotonic() - started:.1f} s")
