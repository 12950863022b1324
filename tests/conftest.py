"""Shared fixtures: one local control plane + broker per session, a namespace per test."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.testing.env import TestEnv


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
    await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    # Pods are refused until the token controller has given "default" its token.
    for _ in range(100):
        try:
            account = await kube.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            if account.get("secrets"):
                break
        except NotFound:
            pass
        await asyncio.sleep(0.1)
    yield name
    with contextlib.suppress(Exception):
        await kube.request("DELETE", f"/api/v1/namespaces/{name}")
