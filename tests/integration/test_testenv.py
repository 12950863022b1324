"""The local control plane itself: workloads run, endpoints appear, restarts show, CLI contract."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.model import Database
from kuberaven.runtime.leader import LeaderElector, LeaseTimings
from kuberaven.testing.env import DIED, TestEnv, down, server_died, up
from kuberaven.testing.kubelet import crash, restart_container
from kuberaven.testing.processes import pid_alive, running
from tests.helpers import eventually, kuberaven


async def _eventually(check, timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            result = await check()
            if result:
                return result
        except NotFound:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true within {timeout}s")
        await asyncio.sleep(0.2)


async def test_deployment_runs_and_service_gets_endpoints(kube: KubeClient, namespace: str) -> None:
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": labels, "ports": [{"port": 80}]},
    }
    await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=deployment)
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service)

    async def running_pods():  # type: ignore[no-untyped-def]
        pods = [p async for p in kube.list_objects(f"/api/v1/namespaces/{namespace}/pods")]
        running = [p for p in pods if p["status"].get("phase") == "Running" and p["status"].get("podIP")]
        return running if len(running) == 3 else None

    pods = await _eventually(running_pods)
    assert len({p["status"]["podIP"] for p in pods}) == 3  # distinct IPs from the nodes' podCIDRs
    assert all(p["status"]["podIP"].startswith("10.1") for p in pods)

    async def endpoint_addresses():  # type: ignore[no-untyped-def]
        endpoints = await kube.request("GET", f"/api/v1/namespaces/{namespace}/endpoints/web")
        addresses = {a["ip"] for s in endpoints.get("subsets") or [] for a in s.get("addresses", [])}
        return addresses if len(addresses) == 3 else None

    assert await _eventually(endpoint_addresses) == {p["status"]["podIP"] for p in pods}

    # Deleting finalizes for real: the ReplicaSet replaces the pod.
    victim = pods[0]["metadata"]["name"]
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{victim}")

    async def replaced():  # type: ignore[no-untyped-def]
        names = {p["metadata"]["name"] for p in await running_pods() or []}
        return names and victim not in names

    await _eventually(replaced)


async def test_restart_container_and_crash_change_status_like_a_kubelet(
    kube: KubeClient, namespace: str, testenv: TestEnv
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]},
    }
    path = f"/api/v1/namespaces/{namespace}/pods/p"
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    await _eventually(lambda: _phase(kube, path, "Running"))

    await restart_container(kube, namespace, "p", "main")
    status = (await kube.request("GET", path))["status"]
    counts = {c["name"]: c["restartCount"] for c in status["containerStatuses"]}
    assert counts == {"main": 1, "side": 0}

    await crash(kube, namespace, "p")
    status = (await kube.request("GET", path))["status"]
    assert {c["name"]: c["restartCount"] for c in status["containerStatuses"]} == {"main": 2, "side": 1}
    assert all(c["state"]["waiting"]["reason"] == "CrashLoopBackOff" for c in status["containerStatuses"])
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    # The fake kubelet must not "heal" a crashed pod behind the test's back. It has had its chance once a pod made
    # after the crash runs (its watch brought the crash's event first) and it has handled all it received.
    marker = {**pod, "metadata": {"name": "marker"}}
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=marker)
    await _eventually(lambda: _phase(kube, f"/api/v1/namespaces/{namespace}/pods/marker", "Running"))
    await testenv.kubelet_idle()
    assert (await kube.request("GET", path))["status"]["containerStatuses"][0]["ready"] is False


async def _phase(kube: KubeClient, path: str, phase: str) -> bool:
    return (await kube.request("GET", path))["status"].get("phase") == phase


async def test_leader_election_is_active_passive(kube: KubeClient, namespace: str) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    timings = LeaseTimings(lease_duration=2.0, renew_deadline=1.5, retry_period=0.2)
    first = LeaderElector(kube, namespace, name, "replica-a", timings=timings)
    second = LeaderElector(kube, namespace, name, "replica-b", timings=timings)
    await asyncio.wait_for(first.acquire(), 10)
    holding = asyncio.create_task(first.hold())
    standby = asyncio.create_task(second.acquire())
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"

    async def held_past_its_first_term() -> None:
        spec = (await kube.request("GET", lease_path))["spec"]
        held = dt.datetime.fromisoformat(spec["renewTime"]) - dt.datetime.fromisoformat(spec["acquireTime"])
        assert spec["holderIdentity"] == "replica-a" and held.total_seconds() > 2 * timings.lease_duration, spec

    # Renewals keep the standby out: one holder, never handed over, for twice the lease (the standby asks every
    # 0.2 s, and would take a lease left unrenewed for one term).
    await eventually(held_past_its_first_term, timeout=30)
    assert not standby.done() and first.is_leader
    holding.cancel()
    await first.release()
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(standby, 10)
    assert second.is_leader
    assert asyncio.get_running_loop().time() - started < 1.5  # a release hands over at once
    lease = await kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    assert lease["spec"]["holderIdentity"] == "replica-b"
    assert lease["spec"]["leaseTransitions"] >= 1


def test_testenv_cli_up_prints_json_and_down_stops_everything(tmp_path: Path) -> None:
    kuberaven = [sys.executable, "-m", "kuberaven"]
    directory = tmp_path / "env"
    result = subprocess.run(
        [*kuberaven, "testenv", "up", "--dir", str(directory), "--nodes", "2", "--postgres"],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    env = json.loads(result.stdout)
    assert {"kubeconfig", "kafka_bootstrap", "dir"} <= set(env)
    assert Path(env["kubeconfig"]).is_file()
    assert env["nodes"] == ["kuberaven-node-0", "kuberaven-node-1"]
    assert env["openstack"] is None  # only with --openstack
    database = Database(env["database_url"])  # --postgres: a database to share between replicas
    try:
        database.prepare()
    finally:
        database.dispose()
    supervisor = env["pid"]
    assert pid_alive(supervisor)
    children = subprocess.run(["pgrep", "-P", str(supervisor)], capture_output=True, text=True).stdout.split()
    assert len(children) >= 6  # etcd, apiserver, controller-manager, scheduler, tansu, postgres
    subprocess.run([*kuberaven, "testenv", "down", "--dir", str(directory)], check=True, timeout=60)
    assert not running(supervisor)  # a zombie waiting for PID 1 to reap it has stopped
    assert not any(running(int(child)) for child in children)


def test_testenv_up_openstack_has_at_most_two_nodes(tmp_path: Path) -> None:
    """The data path has a chassis per node, and its tunnels' range holds two."""
    result = kuberaven("testenv", "up", "--dir", str(tmp_path), "--openstack", "--nodes", "3")
    assert result.returncode == 1
    assert "the OpenStack data path has a chassis per node, 1 to 2: not 3" in result.stderr
    assert not (tmp_path / "env.json").exists()


def test_an_environment_tied_to_a_process_stops_when_it_is_gone(tmp_path: Path) -> None:
    """A test session's environment (`up(exit_with=…)`): killed sessions leave nothing running."""
    session = subprocess.Popen(["sleep", "600"])
    try:
        env = up(tmp_path / "env", nodes=1, exit_with=session.pid)
        supervisor = env["pid"]
        children = subprocess.run(["pgrep", "-P", str(supervisor)], capture_output=True, text=True).stdout.split()
        assert children, "the control plane runs under the supervisor"
        session.kill()  # as SIGKILL would end a test worker: no teardown
        session.wait()
        deadline = time.monotonic() + 60
        while running(supervisor) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(supervisor)
        assert not any(running(int(child)) for child in children)
        assert not (tmp_path / "env" / "env.json").exists()
    finally:
        session.kill()
        down(tmp_path / "env")


def test_a_server_that_dies_stops_the_environment_and_the_log_names_it(tmp_path: Path) -> None:
    """A dead server fails its environment's tests loudly: the supervisor stops everything, and server_died()
    gives the tests its name and its log's tail instead of a connection refused."""
    directory = tmp_path / "env"
    try:
        supervisor = up(directory, nodes=1)["pid"]
        assert server_died(directory) is None
        children = subprocess.run(["pgrep", "-P", str(supervisor)], capture_output=True, text=True).stdout.split()
        scheduler = next(int(c) for c in children if b"kube-scheduler" in Path(f"/proc/{c}/cmdline").read_bytes())
        os.kill(scheduler, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while running(supervisor) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(supervisor)
        died = server_died(directory)
        assert died is not None and died.startswith(f"kube-scheduler {DIED} (exit status {-signal.SIGKILL})"), died
    finally:
        down(directory)


def test_an_environment_in_a_directory_of_its_own_removes_it_when_stopped(tmp_path: Path) -> None:
    made = TestEnv(nodes=1, broker=False)  # no directory given: a temporary one of its own
    given = TestEnv(tmp_path / "given", nodes=1, broker=False)
    for env in (made, given):
        env.start()
        assert any(env.dir.iterdir()), "the control plane keeps its files there"
        env.stop()
    assert not made.dir.exists()
    assert (tmp_path / "given").is_dir(), "a directory the caller gave is the caller's"
