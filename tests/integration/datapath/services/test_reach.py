"""can-reach against real packets: each answer of the daemon (REST) and of the CLI, about pods, a Service's VIP
and its floating IP, is compared with a TCP connection through Neutron, OVN and Octavia's ovn provider.

Against the package's data path (conftest.py here, tests/datapath.py; as test_traffic.py):
pods are network namespaces wired by kuberaven-cni, the outside is the
external netns. Policies take a moment to reach OVN: each comparison is
made again until the packets agree with the answer, never waited on by time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import httpx2 as httpx
import pytest

from kuberaven.kube.client import KubeClient
from tests.datapath import SERVICES_GROUP, DataPath, Sandboxes, connect, daemon_environment, ingress_address, serving
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

NETPOL = "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"


def _policy(name: str, peers: list[dict[str, Any]]) -> dict[str, Any]:
    ingress = [{"from": peers, "ports": [{"port": 8080}]}]
    spec = {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"], "ingress": ingress}
    return {"metadata": {"name": name}, "spec": spec}


class Compare:
    """Asks the daemon (GET /api/v1/network/can-reach), then makes the connection, and says whether they agree."""

    def __init__(self, datapath: DataPath) -> None:
        self.datapath = datapath
        self.api = httpx.Client(base_url=datapath.daemon.url, timeout=30)

    def ask(self, source: str, target: str, port: int) -> dict[str, Any]:
        found = self.api.get("/api/v1/network/can-reach", params={"from": source, "to": target, "port": port})
        assert found.status_code == 200, found.text
        return found.json()

    async def agree(self, netns: str, address: str, port: int, source: str, target: str, allowed: bool) -> str:
        """The answer is ``allowed``, and a connection from ``netns`` to ``address``:``port`` is made iff it is."""
        answer = self.ask(source, target, port)
        assert answer["allowed"] is allowed, answer
        connected = await connect(netns, address, port)
        assert (connected is not None) is allowed, (connected, answer["reason"])
        return str(answer["reason"])


async def test_can_reach_answers_what_packets_meet(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    ns = dp_namespace
    web = await boxes.pod(ns, "web-1", labels={"app": "web"})
    a = await boxes.pod(ns, "a", labels={"app": "a"})
    c = await boxes.pod(ns, "c", labels={"app": "c"})
    body = {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "selector": {"app": "web"}}}
    body["spec"]["ports"] = [{"port": 80, "targetPort": 8080}]  # type: ignore[index]
    service = await dp_kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=body)
    vip, external = service["spec"]["clusterIP"], datapath.openstack["external_netns"]

    fip = await eventually(lambda: ingress_address(dp_kube, ns, "web"), timeout=120)
    compare, svc = Compare(datapath), f"{ns}/svc/web"
    async with serving(web.sandbox, 8080, "web-1"):
        # The member sees the outside client's own address (OVN only rewrites the destination): ask about it.
        seen = await eventually(lambda: _answer(external, fip, 80), timeout=120)
        outside = seen.split()[1]
        await eventually(lambda: compare.agree(external, fip, 80, outside, svc, True), timeout=60)

        only_a = _policy("only-a", [{"podSelector": {"matchLabels": {"app": "a"}}}])
        await dp_kube.request("POST", NETPOL.format(ns), body=only_a)
        why = await eventually(lambda: compare.agree(c.sandbox, vip, 80, f"{ns}/c", svc, False), timeout=90)
        kept_out = f"{ns}/web-1 is selected by policies {ns}/only-a for ingress, no rule allows it"
        assert why == f"no member lets it in: {kept_out}", why
        await eventually(lambda: compare.agree(a.sandbox, vip, 80, f"{ns}/a", svc, True), timeout=60)
        await eventually(lambda: compare.agree(external, fip, 80, outside, svc, False), timeout=60)
        await eventually(lambda: compare.agree(c.sandbox, web.ip, 8080, f"{ns}/c", f"{ns}/web-1", False), timeout=60)
        await eventually(lambda: compare.agree(a.sandbox, web.ip, 8080, f"{ns}/a", f"{ns}/web-1", True), timeout=60)

        # A policy letting the outside address in: the answer and the packets follow.
        outside_in = _policy("outside-in", [{"ipBlock": {"cidr": f"{outside}/32"}}])
        await dp_kube.request("POST", NETPOL.format(ns), body=outside_in)
        why = await eventually(lambda: compare.agree(external, fip, 80, outside, svc, True), timeout=90)
        assert f"allowed by policy {ns}/outside-in ingress rule 0" in why
        # The CLI, on the daemon's database and cloud, says what the daemon says.
        assert cli_json(datapath, outside, svc, 80) == compare.ask(outside, svc, 80)


async def _answer(netns: str, address: str, port: int) -> str:
    answer = await connect(netns, address, port)
    assert answer is not None, f"no answer from {address}:{port} in {netns}"
    return answer


def cli_json(datapath: DataPath, source: str, target: str, port: int) -> dict[str, Any]:
    env = {**os.environ, **daemon_environment(datapath.env)}
    args = ["net", "can-reach", source, target, "--port", str(port), "-o", "json", "--db", datapath.daemon.database_url]
    done = subprocess.run(
        [sys.executable, "-m", "kuberaven", *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode in (0, 3), done.stderr
    return json.loads(done.stdout)
