"""`kuberaven testenv restart apiserver` on a running environment (testing/restart.py, testing/env.py): the API
server is killed and started again by the environment's supervisor, which does not take it for a death; what
etcd holds is still there, watches resume, and the other servers keep running. Bad input is refused."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.reflector import ReflectorOptions
from kuberaven.testing.env import (
    DIED,
    PLANNED_RESTART,
    SUPERVISOR_LOG,
    EnvError,
    TestEnv,
    down,
    server_died,
    up,
)
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.processes import running
from kuberaven.testing.restart import ANSWER_TIMEOUT, RESTARTABLE
from kuberaven.watch.watcher import Watcher, WatchTarget
from tests.helpers import Recorder, configmap, kuberaven
from tests.helpers import running as watching

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
STOP_WITHIN = 60.0  # seconds a supervisor may take to stop once a server died


def servers(supervisor: int) -> dict[str, int]:
    """The control plane's processes under ``supervisor``, by program name: their pids."""
    children = subprocess.run(["pgrep", "-P", str(supervisor)], capture_output=True, text=True).stdout.split()
    found = {}
    for child in children:
        try:
            program = Path(Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0].decode()).name
        except OSError:
            continue  # gone meanwhile
        if program in CONTROL_PLANE:
            found[program] = int(child)
    return found


def restart_through_the_cli(directory: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kuberaven", "testenv", "restart", "apiserver", "--dir", str(directory)]
    return subprocess.run(command, capture_output=True, text=True, timeout=ANSWER_TIMEOUT + 30)


async def test_restarting_the_apiserver_keeps_objects_watches_and_the_other_servers(tmp_path: Path) -> None:
    """A ConfigMap made and watched before the restart: still there after it, and the watch (kuberaven's engine)
    delivers what is made after it; etcd, the controller-manager and the scheduler keep their processes. A later
    death of the new API server still stops the environment."""
    directory = tmp_path / "env"
    try:
        env = up(directory, nodes=1)
        before = servers(env["pid"])
        assert set(before) == set(CONTROL_PLANE), before
        kube = KubeClient.from_kubeconfig(env["kubeconfig"])
        try:
            await _restart_under_a_watch(kube, directory)
        finally:
            await kube.close()
        after = servers(env["pid"])
        assert after["kube-apiserver"] != before["kube-apiserver"] and not running(before["kube-apiserver"])
        assert {k: v for k, v in after.items() if k != "kube-apiserver"} == {
            k: v for k, v in before.items() if k != "kube-apiserver"
        }
        assert running(env["pid"]) and server_died(directory) is None, server_died(directory)
        log = (directory / SUPERVISOR_LOG).read_text().splitlines()
        planned = [line for line in log if line.startswith(PLANNED_RESTART)]
        assert len(planned) == 1 and f"pid={after['kube-apiserver']}" in planned[0], planned
        _a_death_still_stops_the_environment(env["pid"], after["kube-apiserver"], directory)
    finally:
        down(directory)


async def _restart_under_a_watch(kube: KubeClient, directory: Path) -> None:
    namespace = f"restart-{uuid.uuid4().hex[:6]}"
    await create_namespace(kube, namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    await kube.request("POST", path, body=configmap("before", namespace, v="1"))
    recorder = Recorder()
    watcher = Watcher(WatchTarget("v1", "ConfigMap", namespace=namespace), recorder, name=f"restart-{namespace}")
    options = ReflectorOptions(backoff_initial=0.2, backoff_max=1.0)
    async with watching(kube, [watcher], reflector=options) as engine:
        await engine.wait_synced(timeout=30)
        await recorder.wait_for(lambda events: bool(recorder.of(f"{namespace}/before")))
        started = time.monotonic()
        result = await asyncio.to_thread(restart_through_the_cli, directory)
        took = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        restarted = json.loads(result.stdout)
        assert restarted["component"] == "apiserver" and restarted["pid"] != restarted["previous_pid"]
        assert 0 < restarted["down_seconds"] < took, (restarted, took)
        readyz = await kube.http.get("/readyz")  # ready when the command returns, not some time later
        assert (readyz.status_code, readyz.text) == (200, "ok")
        assert (await kube.request("GET", f"{path}/before"))["data"] == {"v": "1"}
        await kube.request("POST", path, body=configmap("after", namespace, v="2"))
        await recorder.wait_for(lambda events: bool(recorder.of(f"{namespace}/after")), timeout=60)
    assert [e.type for e in recorder.of(f"{namespace}/after")] == ["ADDED"]


def _a_death_still_stops_the_environment(supervisor: int, apiserver: int, directory: Path) -> None:
    """The restarted API server is watched as the first one was: its death (not asked for) stops everything."""
    os.kill(apiserver, signal.SIGKILL)
    deadline = time.monotonic() + STOP_WITHIN
    while running(supervisor) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(supervisor)
    died = server_died(directory)
    assert died is not None and died.startswith(f"kube-apiserver {DIED} (exit status {-signal.SIGKILL})"), died


def test_the_in_process_environment_restarts_its_apiserver_from_its_own_thread(testenv: TestEnv) -> None:
    """TestEnv.restart() (pytest's session environment) does what the supervisor does for the command; from
    another thread it refuses, as the new API server would die with that thread."""
    plane = testenv.control_plane
    assert plane.apiserver is not None
    previous, others = plane.apiserver.pid, [(p, p.pid) for p in plane.processes() if p is not plane.apiserver]
    restarted = testenv.restart("apiserver")
    assert plane.apiserver is not None and restarted.pid == plane.apiserver.pid != previous
    assert restarted.previous_pid == previous and restarted.down_seconds > 0
    assert plane.readyz() and not running(previous)
    assert all(p.alive() and p.pid == pid for p, pid in others)
    with ThreadPoolExecutor(1) as elsewhere, pytest.raises(EnvError, match="from the thread that started"):
        elsewhere.submit(testenv.restart_apiserver).result()
    assert plane.apiserver.pid == restarted.pid


def test_restart_refuses_an_unknown_component_naming_those_there_are(tmp_path: Path) -> None:
    result = kuberaven("testenv", "restart", "etcd-typo", "--dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr == f"error: cannot restart 'etcd-typo': what can be restarted is {', '.join(RESTARTABLE)}\n"
    assert list(tmp_path.iterdir()) == [], "nothing was asked"


def test_restart_without_an_environment_says_none_runs(tmp_path: Path) -> None:
    result = kuberaven("testenv", "restart", "apiserver", "--dir", str(tmp_path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: no test environment running in {tmp_path}\n"
