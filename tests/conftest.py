"""Shared fixtures: one local control plane + broker per session, a namespace per test."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace


@pytest.fixture(scope="session")
def testenv() -> Iterator[TestEnv]:
    env = TestEnv(nodes=2)
    env.start()
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture
async def kube(testenv: TestEnv) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(testenv.control_plane.kubeconfig)
    yield client
    await client.close()


@pytest.fixture
async def namespace(kube: KubeClient) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await create_namespace(kube, name)
    yield name
    with contextlib.suppress(Exception):
        await kube.request("DELETE", f"/api/v1/namespaces/{name}")
