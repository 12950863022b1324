"""Pods bound on the chassis: kuberaven-cni plugs them into br-int, OVN binds them, Neutron says ACTIVE.

Against the package's data path (conftest.py here, tests/datapath.py): `kuberaven testenv up
--openstack` and `kuberaven run --network-backend openstack` configured from
its JSON. The test plays the node's container runtime.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
import sqlalchemy as sa

from kuberaven.cni.spec import Code, host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.vif import PORT_ACTIVE, Binding
from tests.datapath import DataPath, Sandboxes, cni, delete_netns
from tests.helpers import eventually, kuberaven_events, vif_of

pytestmark = [pytest.mark.xdist_group("datapath"), pytest.mark.timeout(900)]


def vsctl(datapath: DataPath, *args: str) -> subprocess.CompletedProcess[str]:
    database = datapath.openstack["cni_config"]["ovsdb"]
    return subprocess.run(["ovs-vsctl", f"--db={database}", *args], capture_output=True, text=True, check=False)


def in_node(datapath: DataPath, link: str) -> bool:
    netns = datapath.openstack["cni_config"]["nodeNetns"].removeprefix("/run/netns/")
    return subprocess.run(["ip", "-n", netns, "link", "show", link], capture_output=True).returncode == 0


def recorded_status(datapath: DataPath, uid: str) -> str | None:
    database = Database(datapath.daemon.database_url)
    try:
        with database.session() as session:
            row = session.scalars(sa.select(NetworkTranslation).where(NetworkTranslation.uid == uid)).first()
            return row.state.get("status") if row is not None else None
    finally:
        database.dispose()


async def test_a_pod_is_bound_to_the_chassis_of_its_node_and_add_returns_once_its_port_is_active(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    pod = await boxes.pod(dp_namespace, "web")
    assert pod.vif.binding == Binding.OVS and pod.vif.status == PORT_ACTIVE, pod.vif
    assert pod.result["ips"][0]["address"].startswith(f"{pod.ip}/")
    # Neutron bound the port to the node's name, which is the chassis' hostname.
    port = datapath.connection().network.get_port(pod.vif.port)
    assert (port.status, port.binding_host_id, port.binding_vif_type) == ("ACTIVE", datapath.node, "ovs")
    assert vsctl(datapath, "get", "open", ".", "external_ids:hostname").stdout.strip().strip('"') == datapath.node
    # Plugged as os-vif plugs it.
    host = host_ifname(f"ctr-{pod.sandbox}", "eth0")
    ids = vsctl(datapath, "get", "Interface", host, "external_ids").stdout
    for key, value in (("iface-id", pod.vif.port), ("attached-mac", pod.vif.mac), ("iface-status", "active")):
        assert f'{key}="{value}"' in ids or f"{key}={value}" in ids, ids
    # The fake kubelet reports the VIF's address, as a kubelet whose runtime ran kuberaven-cni does.
    found = await dp_kube.request("GET", f"/api/v1/namespaces/{dp_namespace}/pods/web")
    assert found["status"]["podIP"] == pod.ip
    # The status is kuberaven's too: in its model and as an Event.
    uid = found["metadata"]["uid"]
    await eventually(lambda: _assert_equal(recorded_status(datapath, uid), PORT_ACTIVE))
    events = await kuberaven_events(dp_kube, dp_namespace, "web")
    assert any(e["reason"] == "PortActive" and pod.vif.port in e["message"] for e in events), events

    assert await cni(datapath, "CHECK", pod.sandbox, dp_namespace, "web") == (0, None)
    assert await cni(datapath, "DEL", pod.sandbox, dp_namespace, "web") == (0, None)
    assert "no port named" in vsctl(datapath, "port-to-br", host).stderr
    assert not in_node(datapath, host)
    assert await cni(datapath, "DEL", pod.sandbox, dp_namespace, "web") == (0, None)  # again: nothing to do
    connection = datapath.connection()
    await eventually(lambda: _assert_equal(connection.network.get_port(pod.vif.port).status, "DOWN"), timeout=60)


async def test_del_removes_the_ovs_port_of_a_sandbox_already_gone(
    datapath: DataPath, dp_namespace: str, boxes: Sandboxes
) -> None:
    """The runtime may delete the pod's netns (and with it the veth pair) before DEL: OVS keeps the record."""
    pod = await boxes.pod(dp_namespace, "gone")
    host = host_ifname(f"ctr-{pod.sandbox}", "eth0")
    delete_netns([pod.sandbox])
    await eventually(lambda: _assert_equal(in_node(datapath, host), False))
    assert vsctl(datapath, "port-to-br", host).stdout.strip() == "br-int"  # the record outlived the interface
    assert await cni(datapath, "DEL", pod.sandbox, dp_namespace, "gone") == (0, None)
    assert "no port named" in vsctl(datapath, "port-to-br", host).stderr


async def test_add_past_its_bound_names_the_port_and_its_status(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Plugged into a bridge OVN does not manage, the port is never bound: ADD gives up after activeTimeout."""
    bridge = f"br-krv{uuid.uuid4().hex[:4]}"
    made = vsctl(datapath, "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev")
    assert made.returncode == 0, made.stderr
    try:
        await dp_kube.request(
            "POST",
            f"/api/v1/namespaces/{dp_namespace}/pods",
            body={
                "metadata": {"name": "stray"},
                "spec": {"nodeName": datapath.node, "containers": [{"name": "c", "image": "pause"}]},
            },
        )
        vif = await vif_of(dp_kube, dp_namespace, "stray", timeout=90)
        sandbox = boxes.new()
        code, answer = await cni(datapath, "ADD", sandbox, dp_namespace, "stray", ovsBridge=bridge, activeTimeout=3)
        assert code == 1 and answer is not None
        assert answer["code"] == Code.TRY_AGAIN_LATER, answer
        assert vif.port in answer["msg"] and "is DOWN, not ACTIVE, after 3 s" in answer["msg"], answer
        # CHECK says where it is; DEL finds it on that bridge.
        code, answer = await cni(datapath, "CHECK", sandbox, dp_namespace, "stray")
        assert (
            code == 1 and answer is not None and f"not a port of OVS bridge br-int (it is on {bridge})" in answer["msg"]
        ), answer
        assert await cni(datapath, "DEL", sandbox, dp_namespace, "stray") == (0, None)
        assert vsctl(datapath, "list-ports", bridge).stdout.strip() == ""
    finally:
        vsctl(datapath, "--if-exists", "del-br", bridge)


def _assert_equal(found: object, expected: object) -> None:
    assert found == expected, found
