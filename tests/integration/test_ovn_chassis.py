"""The local OVN chassis (testing/ovn.py): two side by side do not collide, a dead ovn-controller is started
again, a crashed ovs-vswitchd is replaced, and stop() leaves nothing; a second chassis joins the first
(testing/chassis.py) and leaves nothing either."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from kuberaven.testing.chassis import PeerChassis, tunnel_addresses, tunnels
from kuberaven.testing.ovn import INTEGRATION_BRIDGE, UNDERLAY_BRIDGE, LocalOVN, OVNError, installed, peer_netns
from kuberaven.testing.processes import STDLIB_PYTHON, wait_for
from tests.datapath import CLIENT, SERVER, leftovers

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(not installed(), reason="Debian packages openvswitch-switch, ovn-central, ovn-host absent"),
]


def test_two_chassis_side_by_side_then_nothing_left(tmp_path: Path) -> None:
    first, second = LocalOVN(tmp_path / "a", "node-a"), LocalOVN(tmp_path / "b", "node-b")
    try:
        first.start()
        second.start()
        assert first.node_netns != second.node_netns and first.external_netns != second.external_netns
        for chassis in (first, second):
            # Each its own databases, sockets and datapath: one chassis each, br-int in its own node netns.
            names = chassis.ctl(
                "ovn-sbctl", f"--db={chassis.sb_connection}", "--bare", "--columns=hostname", "list", "chassis"
            )
            assert names.split() == [chassis.hostname]
            links = subprocess.run(
                ["ip", "-n", chassis.node_netns, "link", "show", INTEGRATION_BRIDGE], capture_output=True, check=False
            )
            assert links.returncode == 0
        # Nothing in the root netns.
        assert subprocess.run(["ip", "link", "show", INTEGRATION_BRIDGE], capture_output=True).returncode != 0
        # The external host holds the external network's gateway address.
        addresses = subprocess.run(
            ["ip", "-n", first.external_netns, "-4", "-o", "address"], capture_output=True, text=True, check=True
        ).stdout
        assert f"{first.external_gateway}/24" in addresses
        # ovn-controller SIGKILLed: restart_dead() starts it again (as a node's init system would) and says how
        # it ended; it connects to the southbound database again. The other daemons are not restarted.
        controller = next(p for p in first.processes if p.name == "ovn-controller")
        assert first.restart_dead() == []
        os.kill(controller.pid, signal.SIGKILL)
        wait_for(lambda: not controller.alive(), 10, "ovn-controller's death")
        (name, status, _tail), *others = first.restart_dead()
        assert (name, status, others) == ("ovn-controller", -signal.SIGKILL, [])
        connection = ("ovn-appctl", "-t", "ovn-controller", "connection-status")
        wait_for(lambda: first.ctl(*connection) == "connected", 20, "ovn-controller connected again")
        # ovs-vswitchd crashing (SIGABRT, as its userspace conntrack's assertion ends it) is replaced by its
        # --monitor process, which the supervisor sees alive throughout; the bridges come back with it.
        pidfile = first.run_dir / "ovs-vswitchd.pid"
        crashed = int(pidfile.read_text())
        os.kill(crashed, signal.SIGABRT)
        wait_for(lambda: int(pidfile.read_text()) != crashed and first.ctl("ovs-vsctl", "list-br"), 30, "a new switch")
        assert first.ctl("ovs-vsctl", "list-br").split() == ["br-ex", INTEGRATION_BRIDGE]
        assert all(process.alive() for process in first.processes)
    finally:
        first.stop()
        second.stop()
    for chassis in (first, second):
        assert leftovers(chassis.dir, [chassis.node_netns, chassis.external_netns]) == []


def test_a_peer_chassis_tunnels_to_the_first_then_nothing_left(tmp_path: Path) -> None:
    """testing/chassis.py: a second chassis in a netns of its own, registered in the first's southbound database
    under its name and tunnel address, each with a Geneve port to the other over the veth; both stopped, nothing
    is left."""
    first_address, address = tunnel_addresses(2)
    first = LocalOVN(tmp_path / "a", "node-a", encap_ip=str(first_address.ip))
    peer = PeerChassis(first, 1, "node-b", address, first_address)
    try:
        first.start()
        peer.start()
        assert peer.node_netns == peer_netns(first.dir, 1) and peer.ovsdb != first.ovsdb
        encaps = first.ctl("ovn-sbctl", f"--db={first.sb_connection}", "--bare", "--columns=ip", "list", "encap")
        assert sorted(encaps.split()) == [str(first_address.ip), str(address.ip)]
        for chassis, other in ((first, address), (peer, first_address)):
            (tunnel,) = tunnels(chassis)
            remote = chassis.ctl("ovs-vsctl", "get", "interface", tunnel, "options:remote_ip")
            assert remote.strip('"') == str(other.ip)
            assert chassis.ctl("ovs-vsctl", "list-br").split() == sorted(
                [INTEGRATION_BRIDGE, UNDERLAY_BRIDGE, *(["br-ex"] if chassis is first else [])]
            )
        # The underlay carries TCP between the two namespaces (through both switches' br-phy).
        assert _answer(peer.node_netns, first.node_netns, str(first_address.ip)) == f"first {address.ip}"
    finally:
        peer.stop()
        first.stop()
    assert leftovers(first.dir, [first.node_netns, first.external_netns, peer.node_netns]) == []


def test_a_peer_that_fails_to_start_leaves_nothing(tmp_path: Path) -> None:
    """Its first chassis never started: there is no netns to join, and the peer's own netns goes again."""
    first_address, address = tunnel_addresses(2)
    first = LocalOVN(tmp_path / "a", "node-a", encap_ip=str(first_address.ip))
    peer = PeerChassis(first, 1, "node-b", address, first_address)
    with pytest.raises(OVNError, match="link add"):
        peer.start()
    assert leftovers(peer.dir, [peer.node_netns]) == []


def _answer(client: str, server: str, address: str) -> str:
    """What a TCP server in netns ``server`` answered a client in netns ``client`` connecting to ``address``."""
    program = ["ip", "netns", "exec", server, *STDLIB_PYTHON, "-c", SERVER, "8080", "first"]
    with subprocess.Popen(program, stdout=subprocess.PIPE) as listening:
        try:
            assert listening.stdout is not None and listening.stdout.readline() == b"up\n"
            connect = ["ip", "netns", "exec", client, *STDLIB_PYTHON, "-c", CLIENT, address, "8080", "10"]
            return subprocess.run(connect, capture_output=True, text=True, check=True).stdout.strip()
        finally:
            listening.kill()
