"""The data path's chassis beyond the first, as planned before anything starts (testing/chassis.py, env.py): the
tunnels' addresses, the veth's names, the peers' namespaces, and the node counts `testenv up --openstack` takes."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path

import pytest

from kuberaven.testing.chassis import TUNNEL_CIDR, link_names, max_chassis, tunnel_addresses
from kuberaven.testing.env import OPENSTACK_DIR, STATE_FILE, EnvError, _check_shape, _peers, down
from kuberaven.testing.nested import VM_CIDR
from kuberaven.testing.openstack import OVN_DIR
from kuberaven.testing.ovn import namespaces, peer_netns

EXTERNAL_CIDR = "172.24.4.0/24"  # LocalOVN's default external network


def test_a_lone_chassis_tunnels_nowhere_and_two_get_the_ranges_first_addresses() -> None:
    assert tunnel_addresses(1) == []
    assert [str(a) for a in tunnel_addresses(2)] == ["192.168.254.1/30", "192.168.254.2/30"]
    assert [str(a) for a in tunnel_addresses(3, "10.9.0.0/29")] == ["10.9.0.1/29", "10.9.0.2/29", "10.9.0.3/29"]


@pytest.mark.parametrize(
    ("chassis", "cidr", "refusal"),
    [
        (3, TUNNEL_CIDR, "holds 2 chassis, not 3"),
        (0, TUNNEL_CIDR, "at least one chassis, not 0"),
        (2, "10.9.0.7/32", "holds 1 chassis, not 2"),
    ],
)
def test_more_chassis_than_the_range_holds_are_refused(chassis: int, cidr: str, refusal: str) -> None:
    with pytest.raises(ValueError, match=refusal):
        tunnel_addresses(chassis, cidr)


def test_the_range_bounds_the_chassis_and_shares_no_address_with_the_other_networks() -> None:
    assert max_chassis() == 2
    tunnels = ipaddress.ip_network(TUNNEL_CIDR)
    for other in (VM_CIDR, EXTERNAL_CIDR):
        assert not tunnels.overlaps(ipaddress.ip_network(other)), other


def test_each_peer_has_its_own_end_on_the_first_chassis() -> None:
    assert link_names(1) == ("phy1", "phy0")
    assert link_names(2) == ("phy2", "phy0")
    with pytest.raises(ValueError, match="from 1, not 0"):
        link_names(0)


def test_a_peers_netns_is_named_after_the_first_chassis(tmp_path: Path) -> None:
    node = namespaces(tmp_path / "a")[0]
    assert peer_netns(tmp_path / "a", 1) == f"{node}1"
    assert peer_netns(tmp_path / "a", 1) != peer_netns(tmp_path / "b", 1)


@pytest.mark.parametrize("nodes", [0, 3])
def test_the_data_path_takes_one_or_two_nodes(nodes: int) -> None:
    with pytest.raises(EnvError, match=f"a chassis per node, 1 to 2: not {nodes}"):
        _check_shape(nodes, openstack=True, nested=0)
    _check_shape(nodes, openstack=False, nested=0)  # without the data path, any number of fake nodes


def test_the_nodes_beyond_the_first_get_the_peer_chassis() -> None:
    _check_shape(2, openstack=True, nested=2)  # VMs sit on the first chassis
    assert _peers(1) == ()
    assert _peers(2) == ("kuberaven-node-1",)


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_down_removes_the_peers_namespace_of_a_supervisor_that_died(tmp_path: Path) -> None:
    """A supervisor killed before its own stop leaves the second chassis' netns: `down` finds it from the
    directory alone, and leaves another environment's and a name that merely starts alike."""
    directory, other = tmp_path / "env", tmp_path / "other"
    directory.mkdir()
    (directory / STATE_FILE).write_text(json.dumps({"pid": 2**22 + 1}))  # no such process
    chassis = directory / OPENSTACK_DIR / OVN_DIR
    mine = [peer_netns(chassis, 1)]
    theirs = [peer_netns(other / OPENSTACK_DIR / OVN_DIR, 1), f"{namespaces(chassis)[0]}-x"]
    try:
        for name in [*mine, *theirs]:
            subprocess.run(["ip", "netns", "add", name], check=True)
        assert down(directory)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        assert [name for name in [*mine, *theirs] if name in listed.split()] == theirs
    finally:
        for name in [*mine, *theirs]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
