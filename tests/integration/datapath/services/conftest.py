"""The Services' and traffic tests' data path: two nodes, each its own OVN chassis (test_two_chassis.py), no VMs,
pools of a port or two (tests/datapath.py's LEAN_POOLS), and node ports served by kube-proxy on each node
(test_node_ports.py; idle, it costs next to nothing). The other tests' pods are on the first node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.datapath import LEAN_POOLS, DataPath, environment

NODES = 2  # chassis: the second one's tunnel is what test_two_chassis.py crosses


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=LEAN_POOLS, nodes=NODES, node_ports=True) as made:
        yield made
