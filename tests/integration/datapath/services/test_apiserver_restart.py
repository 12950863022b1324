"""Services through an API server restart, on real packets through Octavia's ovn provider, as Kubernetes' own
disruptive e2e case has it: the environment's kube-apiserver restarted by `kuberaven testenv restart apiserver`
under `kuberaven run`.

Against the package's data path (conftest.py here, tests/datapath.py; as test_kube_proxy.py).
"""

from __future__ import annotations

import contextlib
import json
import sys

import pytest

from kuberaven.kube.client import KubeClient
from tests.datapath import SERVICES_GROUP, DataPath, Sandboxes, run_process, serving
from tests.helpers import eventually
from tests.integration.datapath.services.test_kube_proxy import PORT, WAIT, answered_by, create, service

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

MEMBERS = 2  # pods behind each Service


async def test_services_work_after_restarting_the_apiserver(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """[sig-network] Services should work after restarting apiserver [Disruptive] (Kubernetes 1.20,
    test/e2e/network/service.go): a Service answers from each of its pods before kube-apiserver is restarted
    and after; a Service made after the restart gets another cluster IP and answers from each of its own pods,
    and the first one still does."""
    ns = dp_namespace
    client = await boxes.pod(ns, "client")
    async with contextlib.AsyncExitStack() as servers:

        async def served(name: str) -> tuple[str, set[str]]:
            """A Service ``name`` with MEMBERS pods serving their names on its target port: its cluster IP."""
            pods = [await boxes.pod(ns, f"{name}-{i}", labels={"app": name}) for i in range(MEMBERS)]
            for pod in pods:
                await servers.enter_async_context(serving(pod.sandbox, PORT["targetPort"], pod.name))
            made = await create(dp_kube, ns, "services", service(name, [PORT], {"app": name}))
            return made["spec"]["clusterIP"], {pod.name for pod in pods}

        first, first_pods = await served("restart-apiserver-1")
        await eventually(lambda: answered_by(client.sandbox, first, PORT["port"], first_pods), timeout=WAIT)
        restarted = await _restart_apiserver(datapath)
        assert restarted["pid"] != restarted["previous_pid"], restarted
        await answered_by(client.sandbox, first, PORT["port"], first_pods)
        second, second_pods = await served("restart-apiserver-2")
        assert second != first, "cluster IPs conflict"
        await eventually(lambda: answered_by(client.sandbox, second, PORT["port"], second_pods), timeout=WAIT)
        await answered_by(client.sandbox, first, PORT["port"], first_pods)


async def _restart_apiserver(datapath: DataPath) -> dict[str, int | float | str]:
    """`kuberaven testenv restart apiserver` on the data path's environment, as a user runs it: what it printed."""
    command = [sys.executable, "-m", "kuberaven", "testenv", "restart", "apiserver", "--dir", datapath.env["dir"]]
    code, out, err = await run_process(command)
    assert code == 0, err
    return dict(json.loads(out))
