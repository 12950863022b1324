"""The OVN data path's tests share one environment, started for this package and stopped after it (nested/,
whose tests need VMs, has one of its own).

`kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn provider, the node's OVN chassis) with
`kuberaven run` on it as docs/network.md says. `make test`'s `--dist loadgroup` keeps each of the package's
two groups (tests/datapath.py's SERVICES_GROUP and PORTS_GROUP) in one worker, one test after another, so
the environment is made once per group, and its processes do not stay for the rest of the session.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import DataPath, Sandboxes, environment, sandboxes


@pytest.fixture(scope="package")
def datapath() -> Iterator[DataPath]:
    """The package's data path, without VMs (tests/datapath.py's environment()); nested/ has its own, with."""
    with environment(nested=0) as made:
        yield made


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
