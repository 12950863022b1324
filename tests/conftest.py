"""Shared fixtures: one local control plane + broker per session, a namespace per test."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.openstack import LocalOpenStack
from kuberaven.testing.postgres import PostgresServer

OPENSTACK_GROUP = "openstack"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the openstack backend run in one worker: one local OpenStack per session, not one each."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == OPENSTACK_GROUP:
            item.add_marker(pytest.mark.xdist_group(OPENSTACK_GROUP))


@pytest.fixture(scope="session", autouse=True)
def user_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tests' own per-user data directory (default database, local cluster): never the user's."""
    directory = tmp_path_factory.mktemp("xdg-data")
    previous = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(directory)
    yield directory
    if previous is None:
        os.environ.pop("XDG_DATA_HOME", None)
    else:
        os.environ["XDG_DATA_HOME"] = previous


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


@pytest.fixture
async def unserved_node(kube: KubeClient) -> AsyncIterator[str]:
    """A Node no fake kubelet serves: pods bound to it get an IP from no one but our CNI (the test plays it)."""
    name = f"idle-node-{uuid.uuid4().hex[:6]}"
    await kube.request("POST", "/api/v1/nodes", body={"metadata": {"name": name}})
    yield name
    with contextlib.suppress(Exception):
        await kube.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Every test that touches the database runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('db')}/kuberaven.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = Database(database_url)
    db.prepare()
    yield db
    db.dispose()


@pytest.fixture(scope="session")
def openstack() -> Iterator[LocalOpenStack]:
    """A real Neutron + Octavia (MariaDB, RabbitMQ) on loopback, for the openstack network backend."""
    stack = LocalOpenStack()
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()
