"""Pods bound on the chassis: the node agent plugs them into br-int, ADD returns once OVN has installed them
(ovn-installed on the Interface), and Neutron says ACTIVE after.

Against the package's data path (conftest.py here, tests/datapath.py): `kuberaven testenv up
--openstack` (with the node's agent) and `kuberaven run --network-backend openstack` configured from
its JSON. The test plays the node's container runtime.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
import sqlalchemy as sa

from kuberaven.cni.spec import PARKED_AT_KEY, ErrorCode, host_ifname, parked_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.vif import PORT_ACTIVE, Binding
from tests.datapath import (
    PORTS_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    cni,
    connect,
    create_pod,
    delete_netns,
    serving,
    vsctl,
)
from tests.helpers import eventually, kuberaven_events, vif_of

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(900)]

PORT = 8080
ROUNDS = 3  # ADDs repeated: each a new pair, each a first connection


def in_node(datapath: DataPath, link: str) -> bool:
    netns = datapath.openstack["node_netns"]
    return subprocess.run(["ip", "-n", netns, "link", "show", link], capture_output=True).returncode == 0


def recorded_status(datapath: DataPath, uid: str) -> str | None:
    database = Database(datapath.daemon.database_url)
    try:
        with database.session() as session:
            row = session.scalars(sa.select(NetworkTranslation).where(NetworkTranslation.uid == uid)).first()
            return row.state.get("status") if row is not None else None
    finally:
        database.dispose()


def in_netns(netns: str, link: str) -> bool:
    return subprocess.run(["ip", "-n", netns, "link", "show", link], capture_output=True).returncode == 0


def ovn_installed(datapath: DataPath, host: str) -> bool:
    """Whether ovn-controller has marked the Interface installed (external_ids:ovn-installed=true)."""
    found = vsctl(datapath, "--if-exists", "get", "Interface", host, "external_ids:ovn-installed").stdout.strip()
    return found.strip('"') == "true"


async def test_add_returns_once_ovn_has_installed_the_port_and_neutron_says_active_after(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    await create_pod(dp_kube, datapath, dp_namespace, "web")
    vif = await vif_of(dp_kube, dp_namespace, "web", timeout=90)
    sandbox = boxes.new()
    host = host_ifname(f"ctr-{sandbox}", "eth0")
    started = time.monotonic()
    code, answer = await cni(datapath, "ADD", sandbox, dp_namespace, "web")
    took = time.monotonic() - started
    # The moment ADD returns, the node's own Open vSwitch says OVN has installed the port's flows.
    assert ovn_installed(datapath, host), vsctl(datapath, "get", "Interface", host, "external_ids").stdout
    assert code == 0 and answer is not None, answer
    print(f"ADD with the VIF written → ovn-installed, returned: {took:.2f} s")
    boxes.pods.append(Pod(dp_namespace, "web", sandbox, vif, answer))
    assert vif.binding == Binding.OVS and answer["cniVersion"] == "1.1.0"
    assert answer["ips"][0]["address"].startswith(f"{vif.ip}/")
    # Plugged as os-vif plugs it.
    ids = vsctl(datapath, "get", "Interface", host, "external_ids").stdout
    for key, value in (("iface-id", vif.port), ("attached-mac", vif.mac), ("iface-status", "active")):
        assert f'{key}="{value}"' in ids or f"{key}={value}" in ids, ids
    # Neutron bound the port to the node's name, which is the chassis' hostname, and reports it ACTIVE, which
    # kuberaven keeps in the VIF, its model and an Event: off the pod's path now, still visible.
    connection = datapath.connection()
    await eventually(lambda: _assert_equal(connection.network.get_port(vif.port).status, "ACTIVE"), timeout=60)
    port = connection.network.get_port(vif.port)
    assert (port.binding_host_id, port.binding_vif_type) == (datapath.node, "ovs")
    assert vsctl(datapath, "get", "open", ".", "external_ids:hostname").stdout.strip().strip('"') == datapath.node
    found = await dp_kube.request("GET", f"/api/v1/namespaces/{dp_namespace}/pods/web")
    assert found["status"]["podIP"] == vif.ip  # the fake kubelet reports the VIF's address
    uid = found["metadata"]["uid"]
    await eventually(lambda: _assert_equal(recorded_status(datapath, uid), PORT_ACTIVE), timeout=30)

    async def vif_active() -> None:  # written after the row, on its own
        assert (await vif_of(dp_kube, dp_namespace, "web")).status == PORT_ACTIVE

    await eventually(vif_active, timeout=10)

    async def port_active_event() -> None:  # sent after the annotation is written, on its own
        events = await kuberaven_events(dp_kube, dp_namespace, "web")
        assert any(e["reason"] == "PortActive" and vif.port in e["message"] for e in events), events

    await eventually(port_active_event, timeout=10)

    assert await cni(datapath, "CHECK", sandbox, dp_namespace, "web") == (0, None)
    # DEL parks the pair for the port's next pod: the pod end leaves the sandbox for the node's netns, the host
    # end stays on br-int, installed, and the port ACTIVE.
    assert await cni(datapath, "DEL", sandbox, dp_namespace, "web") == (0, None)
    parked = parked_ifname(host)
    assert not in_netns(sandbox, "eth0") and in_node(datapath, parked) and in_node(datapath, host)
    assert vsctl(datapath, "port-to-br", host).stdout.strip() == "br-int" and ovn_installed(datapath, host)
    assert PARKED_AT_KEY in vsctl(datapath, "get", "Interface", host, "external_ids").stdout
    assert await cni(datapath, "DEL", sandbox, dp_namespace, "web") == (0, None)  # again: nothing to do
    assert in_node(datapath, parked)
    assert connection.network.get_port(vif.port).status == "ACTIVE"
    # No pod of the port came within the agent's --park-for (conftest.py): the pair is unwired, the port goes DOWN.
    await eventually(lambda: _assert_equal(in_node(datapath, host) or in_node(datapath, parked), False), timeout=120)
    assert "no port named" in vsctl(datapath, "port-to-br", host).stderr
    await eventually(lambda: _assert_equal(connection.network.get_port(vif.port).status, "DOWN"), timeout=60)


async def test_a_new_sandbox_takes_the_port_from_an_old_one_whose_del_never_came(
    datapath: DataPath, dp_namespace: str, boxes: Sandboxes
) -> None:
    """The same Neutron port plugged again (a pod's sandbox made anew, a port recycled to another pod): the stale
    interface claiming it is removed first, and the new one is the one OVN installs."""
    pod = await boxes.pod(dp_namespace, "again")
    old = host_ifname(f"ctr-{pod.sandbox}", "eth0")
    assert ovn_installed(datapath, old)
    sandbox = boxes.new()
    code, answer = await cni(datapath, "ADD", sandbox, dp_namespace, "again")
    assert code == 0 and answer is not None, answer
    new = host_ifname(f"ctr-{sandbox}", "eth0")
    assert ovn_installed(datapath, new)
    assert "no port named" in vsctl(datapath, "port-to-br", old).stderr and not in_node(datapath, old)
    claimants = vsctl(
        datapath, "--bare", "--columns=name", "find", "Interface", f"external_ids:iface-id={pod.vif.port}"
    )
    assert claimants.stdout.split() == [new]
    boxes.pods.append(Pod(dp_namespace, "again", sandbox, pod.vif, answer))


async def test_an_add_repeated_for_the_same_sandbox_returns_once_its_new_pair_carries_packets(
    datapath: DataPath, dp_namespace: str, boxes: Sandboxes
) -> None:
    """The runtime tries an ADD again when it got no answer (the agent killed mid-call, after it plugged the
    pair): the pair is made anew under the same name, and ADD waits for OVN to install that one, not the
    Interface record the first pair left, which still says ovn-installed."""
    server = await boxes.pod(dp_namespace, "server")
    pod = await boxes.pod(dp_namespace, "again")
    async with serving(server.sandbox, PORT, "server"):
        for _ in range(ROUNDS):
            code, answer = await cni(datapath, "ADD", pod.sandbox, dp_namespace, "again")
            assert code == 0 and answer is not None, answer
            assert await connect(pod.sandbox, server.ip, PORT) == f"server {pod.ip}", "the first connection"


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


async def test_add_past_its_bound_names_the_port_and_what_it_waited_for(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Plugged into a bridge OVN does not manage, the port is never installed: ADD gives up after activeTimeout."""
    bridge = f"br-krv{uuid.uuid4().hex[:4]}"
    made = vsctl(datapath, "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev")
    assert made.returncode == 0, made.stderr
    try:
        await create_pod(dp_kube, datapath, dp_namespace, "stray")
        vif = await vif_of(dp_kube, dp_namespace, "stray", timeout=90)
        sandbox = boxes.new()
        code, answer = await cni(datapath, "ADD", sandbox, dp_namespace, "stray", ovsBridge=bridge, activeTimeout=3)
        assert code == 1 and answer is not None
        assert answer["code"] == ErrorCode.TRY_AGAIN_LATER, answer
        host = host_ifname(f"ctr-{sandbox}", "eth0")
        assert vif.port in answer["msg"] and f"{host} is not ovn-installed after 3 s" in answer["msg"], answer
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
