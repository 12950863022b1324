"""Shared fixtures: one local control plane + broker per session, a namespace per test."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.testing.env import TestEnv
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.openstack import LocalOpenStack
from kuberaven.testing.postgres import PostgresServer

OPENSTACK_GROUP = "openstack"
# The openstack backend's tests in two groups of about five minutes each (a worker and a local OpenStack
# each), by module: in one group they would be the suite's longest line, with three workers.
OPENSTACK_SECOND_GROUP = "openstack-lb"
SECOND_GROUP_MODULES = {"test_network_services", "test_network_reach"}  # and test_network_pools, by its mark
# `make test` passes it: a test skipped because the machine lacks root or a package `make deps` installs fails.
REQUIRE_ALL = "--require-all"
# The skip reasons of such tests (the data path's, kuberaven-cni's, the OVN chassis', the node agent's).
MISSING_PREREQUISITE = re.compile(r"\bneeds? root\b|not installed|absent")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        REQUIRE_ALL,
        action="store_true",
        help="fail a test skipped for want of root or of a package `make deps` installs (make test sets it)",
    )


def missing_prerequisite(report: pytest.TestReport) -> str | None:
    """The reason a test was skipped, when it is something this machine lacks (root, a Debian package)."""
    if not (report.skipped and isinstance(report.longrepr, tuple)):
        return None
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    return reason if MISSING_PREREQUISITE.search(reason) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under --require-all such a skip is a failure: a run that could not test the data path is not green."""
    report = yield
    reason = missing_prerequisite(report)
    if reason is not None and item.config.getoption(REQUIRE_ALL):
        report.outcome = "failed"
        report.longrepr = f"not run, which {REQUIRE_ALL} (make test) does not allow: {reason}"
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly, at the end of the run, which tests were skipped for what the machine lacks."""
    reasons = collections.Counter(
        reason for report in terminalreporter.stats.get("skipped", []) if (reason := missing_prerequisite(report))
    )
    if not reasons:
        return
    terminalreporter.section("TESTS NOT RUN: this machine lacks what they need", sep="!", red=True, bold=True)
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count} not run: {reason}", red=True, bold=True)
    terminalreporter.write_line(f"`make test` ({REQUIRE_ALL}) fails on these: run it as root after `make deps`")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the openstack backend run in their group's worker: one local OpenStack per group, not one
    per test. A test that names its group keeps it (xdist joins the names of every group mark into one)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_openstack = callspec is not None and callspec.params.get("backend") == OPENSTACK_GROUP
        if on_openstack and item.get_closest_marker("xdist_group") is None:
            second = item.path.stem in SECOND_GROUP_MODULES
            item.add_marker(pytest.mark.xdist_group(OPENSTACK_SECOND_GROUP if second else OPENSTACK_GROUP))


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
