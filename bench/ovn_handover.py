"""A recycled port's life on the local OVN data path, by hand: what Neutron says of it as one pod's interface goes
and the next pod's comes, handed over three ways.

Runs `kuberaven testenv up --openstack` (no kuberaven on the path), makes a network and a port bound to the node,
plugs it as os-vif does (a veth whose node end joins br-int with the port's iface-id) into a first pod's netns, and
waits for ACTIVE. Then each way a port can pass to the next pod, each followed by a pause for a status change to
reach Neutron:
  unplug, plug   the node end's OVS port deleted with the pair (what DEL does today), then a new pair plugged for
                 the next pod (what its ADD does)
  move iface-id  the old pair's OVS port deleted and the new pair's added in ONE Open vSwitch transaction
  hand over      the pair kept: its pod end moved into the node's netns (down, renamed) and the pod's netns
                 deleted, then that same end moved into the next pod's netns: the OVS interface never changes
Each row: the port's status and revision_number in Neutron (every status change is a port update, which bumps it)
and whether ovn-controller released the port. Everything made is removed, on failure too.

    python bench/ovn_handover.py
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from common import print_table
from kuberaven.testing.env import OPENSTACK_DIR, down, up
from kuberaven.testing.openstack import OVN_DIR

SETTLE = 8.0  # seconds for a status change to reach Neutron (ovn-controller, northd, ML2/OVN's OVN events)
CIDR = "10.77.0.0/24"


def sh(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout.strip()


class Node:
    """The environment's node: its netns (node ends, br-int) and Open vSwitch database."""

    def __init__(self, openstack: dict[str, Any], port: Any, controller_log: Path) -> None:
        self.netns, self.ovsdb, self.port = openstack["node_netns"], openstack["ovsdb"], port
        self.controller_log = controller_log
        self.ip = port.fixed_ips[0]["ip_address"]
        self.prefix = f"krvh{uuid.uuid4().hex[:4]}"

    def vsctl(self, *args: str) -> str:
        return sh("ovs-vsctl", f"--db={self.ovsdb}", "--timeout=30", *args)

    def pod_netns(self, name: str) -> str:
        netns = f"{self.prefix}-{name}"
        sh("ip", "netns", "add", netns)
        return netns

    def veth(self, host: str, netns: str) -> None:
        """A pair: node end ``host`` in the node's netns, pod end eth0 in ``netns`` with the port's MAC and IP."""
        sh("ip", "-n", self.netns, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", netns)
        self.pod_end(netns)
        sh("ip", "-n", self.netns, "link", "set", host, "up")

    def pod_end(self, netns: str) -> None:
        sh("ip", "-n", netns, "link", "set", "eth0", "address", self.port.mac_address, "up")
        sh("ip", "-n", netns, "address", "add", f"{self.ip}/24", "dev", "eth0")

    def plug(self, host: str, *before: str) -> None:
        """``host`` added to br-int with the port's iface-id, after ``before`` in the same transaction."""
        external = (
            f"external-ids:iface-id={self.port.id}",
            f"external-ids:attached-mac={self.port.mac_address}",
            "external-ids:iface-status=active",
        )
        self.vsctl(*before, "--", "add-port", "br-int", host, "--", "set", "Interface", host, *external)
        self.vsctl("wait-until", "Interface", host, "external_ids:ovn-installed=true")

    def unplug(self, host: str) -> None:
        self.vsctl("--if-exists", "del-port", host)
        with contextlib.suppress(RuntimeError):
            sh("ip", "-n", self.netns, "link", "del", host)

    def releases(self) -> int:
        """How many times ovn-controller has released the port (its log)."""
        lines = self.controller_log.read_text().splitlines()
        return sum(1 for line in lines if "Releasing lport" in line and self.port.id in line)


Row = tuple[str, str, str]


def observed(connection: Any, node: Node, step: str, action: Callable[[], None]) -> Row:
    released = node.releases()
    action()
    time.sleep(SETTLE)
    port = connection.network.get_port(node.port.id)
    return (step, f"{port.status}, revision {port.revision_number}", str(node.releases() - released))


def handovers(connection: Any, node: Node) -> list[Row]:
    a = node.pod_netns("a")
    node.veth("krvha", a)
    rows = [observed(connection, node, "first pod plugged (ACTIVE)", lambda: node.plug("krvha"))]
    # unplug, plug: today's DEL, then the next pod's ADD
    b = node.pod_netns("b")
    rows.append(observed(connection, node, "unplug, plug: the DEL", lambda: node.unplug("krvha")))
    node.veth("krvhb", b)
    rows.append(observed(connection, node, "unplug, plug: the next ADD", lambda: node.plug("krvhb")))
    # move iface-id: the next pod's pair added as the old one's port is deleted, in one transaction
    c = node.pod_netns("c")
    node.veth("krvhc", c)
    move = ("--", "del-port", "krvhb")
    rows.append(observed(connection, node, "move iface-id in one transaction", lambda: node.plug("krvhc", *move)))
    sh("ip", "-n", node.netns, "link", "del", "krvhb")

    # hand over: the pair of pod c parked in the node's netns, its netns gone, then given to pod d
    def park() -> None:
        sh("ip", "-n", c, "link", "set", "dev", "eth0", "down", "netns", node.netns, "name", "krphc")
        sh("ip", "netns", "del", c)

    def give() -> None:
        d = node.pod_netns("d")
        sh("ip", "-n", node.netns, "link", "set", "dev", "krphc", "netns", d, "name", "eth0")
        node.pod_end(d)

    rows.append(observed(connection, node, "hand over: parked, its netns deleted", park))
    rows.append(observed(connection, node, "hand over: given to the next pod", give))
    return rows


@contextlib.contextmanager
def environment() -> Iterator[tuple[dict[str, Any], Path]]:
    """`testenv up --openstack` in a directory of its own, and ovn-controller's log in it."""
    directory = Path(tempfile.mkdtemp(prefix="kuberaven-bench-handover-"))
    try:
        yield up(directory, nodes=1, openstack=True), directory / OPENSTACK_DIR / OVN_DIR / "log" / "ovn-controller.log"
    finally:
        down(directory)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("the OVN data path needs root (network namespaces, Open vSwitch)")
    import openstack

    with environment() as (described, controller_log):
        os.environ["OS_CLIENT_CONFIG_FILE"] = described["openstack"]["clouds_yaml"]
        connection = openstack.connect(cloud=described["openstack"]["cloud"])
        network = connection.network.create_network(name=f"handover-{uuid.uuid4().hex[:6]}")
        node: Node | None = None
        try:
            connection.network.create_subnet(network_id=network.id, cidr=CIDR, ip_version=4)
            port = connection.network.create_port(
                network_id=network.id, binding_host_id=described["nodes"][0], device_owner="compute:kuberaven"
            )
            node = Node(described["openstack"], port, controller_log)
            rows = handovers(connection, node)
        finally:
            if node is not None:
                for host in ("krvha", "krvhb", "krvhc"):
                    node.unplug(host)
                for netns in sh("ip", "netns", "list").splitlines():
                    if netns.startswith(node.prefix):
                        sh("ip", "netns", "del", netns.split()[0])
                connection.network.delete_port(node.port.id)
            connection.network.delete_network(network.id)
    print_table(rows, ("step", "Neutron: status, revision", "ovn-controller released it"))


if __name__ == "__main__":
    main()
