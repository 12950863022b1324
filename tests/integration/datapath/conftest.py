"""The OVN data path's tests share one environment, started for this package and stopped after it.

`kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn provider, the node's OVN chassis) with
`kuberaven run` on it as docs/network.md says. `make test`'s `--dist loadgroup` keeps each of the package's
two groups (tests/datapath.py's SERVICES_GROUP and PORTS_GROUP) in one worker, one test after another, so
the environment is made once per group, and its processes do not stay for the rest of the session.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.testing.env import OPENSTACK_DIR, down, restarts, server_died, up
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.openstack import OVN_DIR, data_path_installed
from kuberaven.testing.ovn import namespaces as chassis_namespaces
from tests.datapath import DataPath, Sandboxes, daemon_environment, leftovers, sandboxes
from tests.helpers import Daemon, daemon_running

# Pools smaller than the defaults (45 free ports per node and namespace): each test's namespace then costs
# Neutron 5 ports made ahead and deleted with it, not 45, which on two cores slowed every other test of the
# session. The pools behave the same; bench/ovn_vif_bench.py measures the defaults.
SMALL_POOLS = {"KUBERAVEN_NETWORK_POOL_MIN": "5", "KUBERAVEN_NETWORK_POOL_MAX": "15"}


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    """`kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn provider, the node's OVN chassis)
    and `kuberaven run` on it as docs/network.md says (with smaller pools); no server of it may die under the
    tests, and `testenv down` must leave nothing behind."""
    if os.geteuid() != 0:
        pytest.skip("the OVN data path needs root (network namespaces, Open vSwitch)")
    if not data_path_installed():
        pytest.skip(
            "Debian packages openvswitch-switch, ovn-central, ovn-host, python3-ovn-octavia-provider are "
            "not installed (make deps installs them)"
        )
    directory = Path(tempfile.mkdtemp(prefix="krv-dp-"))
    try:
        described = up(directory, nodes=1, openstack=True, exit_with=os.getpid())
        with contextlib.ExitStack() as daemons:

            def start() -> Daemon:
                return daemons.enter_context(
                    daemon_running(
                        Path(described["kubeconfig"]),
                        directory,
                        "--network-backend",
                        "openstack",
                        env={**daemon_environment(described), **SMALL_POOLS},
                        ready_within=240,
                    )
                )

            yield DataPath(described, start(), start)
    finally:
        died = server_died(directory)
        for line in restarts(directory):
            warnings.warn(f"the data path's {line}", stacklevel=1)
        down(directory)
        left = leftovers(directory, list(chassis_namespaces(directory / OPENSTACK_DIR / OVN_DIR)))
        shutil.rmtree(directory, ignore_errors=True)
        assert not died, f"a server of the environment died under the tests: {died}"
        assert not left, f"testenv down left: {left}"


@pytest.fixture
async def dp_kube(datapath: DataPath) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
    yield client
    await client.close()


@pytest.fixture
async def dp_namespace(dp_kube: KubeClient) -> AsyncIterator[str]:
    name = f"dp-{uuid.uuid4().hex[:6]}"
    await create_namespace(dp_kube, name)
    yield name
    with contextlib.suppress(NotFound):  # a test may have deleted it itself
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def boxes(datapath: DataPath, dp_kube: KubeClient) -> AsyncIterator[Sandboxes]:
    async with sandboxes(datapath, dp_kube) as made:
        yield made
