"""The OVN data path's tests, in three packages with an environment each, started for the package and stopped
after it: services/ (Services and traffic), ports/ (pools and binding) and nested/ (VMs as nested nodes). Each
package's conftest defines ``datapath``; the fixtures here use it.

`kuberaven testenv up --openstack` (Neutron ML2/OVN, Octavia's ovn provider, the node's OVN chassis) with
`kuberaven run` on it as docs/network.md says. `make test`'s `--dist loadgroup` keeps each of the two groups
(tests/datapath.py's SERVICES_GROUP: services/; PORTS_GROUP: ports/ and nested/) in one worker, one test after
another, so each environment is made once, and its processes do not stay for the rest of the session.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from tests.datapath import DataPath, Sandboxes, sandboxes
from tests.datapath_namespaces import fresh_namespace


@pytest.fixture
async def dp_kube(datapath: DataPath) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(datapath.env["kubeconfig"])
    yield client
    await client.close()


@pytest.fixture
async def dp_namespace(dp_kube: KubeClient) -> AsyncIterator[str]:
    name = await fresh_namespace(dp_kube)
    yield name
    with contextlib.suppress(NotFound):  # a test may have deleted it itself
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
async def boxes(datapath: DataPath, dp_kube: KubeClient) -> AsyncIterator[Sandboxes]:
    async with sandboxes(datapath, dp_kube) as made:
        yield made
