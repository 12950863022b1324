"""Two OVN chassis: pods of the environment's two nodes, each wired by its own node's agent into its own chassis'
br-int, talk across the Geneve tunnel between the chassis, and a ClusterIP Service with a member on each chassis
answers a client on each with both members; the second node's agent, killed, is started again and wires its pods.

Against the package's data path (conftest.py here: `kuberaven testenv up --openstack --nodes 2`). That the
packets crossed the tunnel is shown by where the pods' ports are (each pod's interface on its own chassis' br-int
and not on the other's, its logical port bound in OVN's southbound database to its node's chassis) and by the
tunnel's veth, whose counters rise both ways with the connections.
"""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from tests.datapath import SERVICES_GROUP, DataPath, Pod, Sandboxes, cni, connect, full_checksums, serving
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

TUNNEL_LINK = "phy0"  # the second chassis' end of the veth that carries the tunnel (testing/chassis.py)
# Packets each side of one TCP connection sends at the least: the client's SYN, ACK and FIN, the server's
# SYN-ACK, answer and FIN.
CONNECTION_PACKETS = 3
TRIES = 20  # connections to the Service's VIP from each client: both members answer among them
AGENT_BACK_WITHIN = 60.0  # seconds for the supervisor (it looks every second) to start a killed agent and it to serve


async def test_pods_on_two_chassis_talk_tcp_across_the_tunnel(
    datapath: DataPath, dp_namespace: str, boxes: Sandboxes
) -> None:
    first, second = datapath.chassis
    a = await _pod(boxes, dp_namespace, "a", first)
    b = await boxes.pod(dp_namespace, "b", chassis=second)  # its checksums left to offload, as a veth leaves them
    for pod, own, other in ((a, first, second), (b, second, first)):
        assert len(_interfaces(own, pod)) == 1, f"{pod.name} not on {own['node']}'s br-int"
        assert _interfaces(other, pod) == [], f"{pod.name} on {other['node']}'s br-int too"
        assert _bound_chassis(datapath, pod.vif.port) == own["node"]
    connection = datapath.connection()

    def active_on_its_node() -> None:
        """Neutron reports the port ACTIVE after OVN installed it (which ADD waited for), bound to b's node."""
        port = connection.network.get_port(b.vif.port)
        assert (port.status, port.binding_host_id) == ("ACTIVE", second["node"])

    await eventually(active_on_its_node, timeout=60, off_loop=True)
    async with serving(b.sandbox, 8080, "b"), serving(a.sandbox, 8080, "a"):
        # a's SYN reaches b, and b's answer, whose TCP checksum is left to offload, is dropped at the tunnel by the
        # second chassis' ovs-vswitchd (tests/datapath.py's full_checksums): once b computes its checksums, it passes.
        drops = _push_header_drops(second)
        assert await connect(a.sandbox, b.ip, 8080) is None
        assert _push_header_drops(second) > drops
        await full_checksums(b.sandbox)
        before = _counters(second)
        assert await connect(a.sandbox, b.ip, 8080) == f"b {a.ip}"  # the source address is the pod's own
        assert await connect(b.sandbox, a.ip, 8080) == f"a {b.ip}"
    after = _counters(second)
    for way in ("rx", "tx"):
        assert after[way] - before[way] >= 2 * CONNECTION_PACKETS, (way, before, after)


async def test_a_cluster_ip_service_with_a_member_on_each_chassis_answers_a_client_on_each(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    on_each = list(enumerate(datapath.chassis, 1))  # a member and a client on each chassis
    members = [await _pod(boxes, dp_namespace, f"web-{i}", chassis, {"app": "web"}) for i, chassis in on_each]
    clients = [await _pod(boxes, dp_namespace, f"client-{i}", chassis) for i, chassis in on_each]
    body = {
        "metadata": {"name": "web"},
        "spec": {"type": "ClusterIP", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    service = await dp_kube.request("POST", f"/api/v1/namespaces/{dp_namespace}/services", body=body)
    vip = service["spec"]["clusterIP"]
    async with serving(members[0].sandbox, 8080, "web-1"), serving(members[1].sandbox, 8080, "web-2"):
        for client in clients:
            await eventually(functools.partial(_answered, client, vip), timeout=120)
            answers = [await _answered(client, vip) for _ in range(TRIES)]
            assert {answer.split()[0] for answer in answers} == {"web-1", "web-2"}, (client.name, answers)
            assert all(answer.endswith(f" {client.ip}") for answer in answers), answers  # OVN keeps the source


async def _pod(
    boxes: Sandboxes, namespace: str, name: str, chassis: dict[str, Any], labels: dict[str, str] | None = None
) -> Pod:
    """A pod on ``chassis``' node, sending full checksums (tests/datapath.py's full_checksums says why)."""
    pod = await boxes.pod(namespace, name, labels, chassis=chassis)
    await full_checksums(pod.sandbox)
    return pod


async def _answered(client: Pod, address: str) -> str:
    answer = await connect(client.sandbox, address, 80)
    assert answer is not None, f"no answer from {address}:80 to {client.name}"
    return answer


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def _interfaces(chassis: dict[str, Any], pod: Pod) -> list[str]:
    """The interfaces of ``chassis``' Open vSwitch plugged for the pod's port (iface-id, as os-vif sets it)."""
    database, iface_id = f"--db={chassis['ovsdb']}", f"external_ids:iface-id={pod.vif.port}"
    return _run("ovs-vsctl", database, "--bare", "--columns=name", "find", "Interface", iface_id).split()


def _bound_chassis(datapath: DataPath, port: str) -> str:
    """The name of the chassis OVN bound the logical port ``port`` to (the southbound database's Port_Binding)."""
    database = f"--db={datapath.sb_connection}"
    chassis = _run("ovn-sbctl", database, "--bare", "--columns=chassis", "find", "Port_Binding", f"logical_port={port}")
    return _run("ovn-sbctl", database, "--bare", "--columns=name", "list", "Chassis", chassis) if chassis else ""


def _push_header_drops(chassis: dict[str, Any]) -> int:
    """How many packets ``chassis``' ovs-vswitchd dropped instead of sending them into a tunnel."""
    run_dir = chassis["ovsdb"].removeprefix("unix:").removesuffix("/db.sock")
    target = f"--target={run_dir}/ovs-vswitchd.{_run('cat', f'{run_dir}/ovs-vswitchd.pid')}.ctl"
    return int(_run("ovs-appctl", target, "coverage/read-counter", "netdev_push_header_drops"))


def _counters(chassis: dict[str, Any]) -> dict[str, int]:
    """Packets received and sent on the chassis' end of the tunnel's veth."""
    link = json.loads(_run("ip", "-n", chassis["node_netns"], "-s", "-j", "link", "show", "dev", TUNNEL_LINK))[0]
    return {way: int(link["stats64"][way]["packets"]) for way in ("rx", "tx")}


async def test_the_second_nodes_agent_sigkilled_is_started_again_and_wires_its_pods(
    datapath: DataPath, dp_namespace: str, boxes: Sandboxes
) -> None:
    """As the kubelet restarts a DaemonSet's pod: the environment starts the second node's agent again, with that
    chassis' Open vSwitch, and a pod bound to the node is wired into that chassis' br-int."""
    first, second = datapath.chassis
    killed = datapath.kill_agent(second)

    async def agent_back() -> None:
        assert datapath.agent_pid(second) != killed
        assert await cni(datapath, "STATUS", "", "", "", second) == (0, None)

    await eventually(agent_back, timeout=AGENT_BACK_WITHIN)
    pod = await boxes.pod(dp_namespace, "after", chassis=second)
    assert len(_interfaces(second, pod)) == 1 and _interfaces(first, pod) == []
    assert _bound_chassis(datapath, pod.vif.port) == second["node"]
