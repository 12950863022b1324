"""The Services' and traffic tests' data path: two nodes, each its own OVN chassis (test_two_chassis.py), no VMs,
pools of a port or two (tests/datapath.py's LEAN_POOLS), and node ports served by kube-proxy on each node
(test_node_ports.py; idle, it costs next to nothing). The other tests' pods are on the first node.

A test's namespace is one an earlier test emptied, where there is one (tests/datapath_namespaces.py): the
package then makes a few namespaces' networks instead of one per test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from tests.datapath import LEAN_POOLS, DataPath, environment
from tests.datapath_namespaces import emptied, fresh_namespace

NODES = 2  # chassis: the second one's tunnel is what test_two_chassis.py crosses


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    with environment(nested=0, pools=LEAN_POOLS, nodes=NODES, node_ports=True) as made:
        yield made


@pytest.fixture(scope="package")
def emptied_namespaces() -> list[str]:
    """Namespaces that tests left empty, for the next tests."""
    return []


@pytest.fixture
async def dp_namespace(datapath: DataPath, dp_kube: KubeClient, emptied_namespaces: list[str]) -> AsyncIterator[str]:
    name = emptied_namespaces.pop() if emptied_namespaces else await fresh_namespace(dp_kube)
    yield name
    if await emptied(dp_kube, datapath, name):
        emptied_namespaces.append(name)
    else:
        with contextlib.suppress(NotFound):  # a test may have deleted it itself
            await dp_kube.request("DELETE", f"/api/v1/namespaces/{name}")
