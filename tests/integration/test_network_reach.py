"""can-reach to a Service and from outside, against the translation of real Services and NetworkPolicies, on the
embedded backend and on a real Neutron + Octavia (read back from them), through the CLI and the REST API.

The local Octavia runs the ``amphora`` provider (noop drivers): its load
balancers proxy, so members see the load balancer's address, which the
policies' Services' CIDR rule lets in; the embedded model keeps the client's
address (as Octavia's ``ovn`` provider does). Each answer is checked against
what that means for the backend at hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database, NetworkTranslation
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.reach_backends import ReachBackends
from kuberaven.testing.openstack import CLOUD
from kuberaven.web.app import create_app

# Their checks call the backend (a real Neutron + Octavia on the openstack one): off the loop.
from tests.helpers import eventually_off_loop as eventually
from tests.helpers import serving
from tests.integration.test_network import backend, cluster_name, net_database, translating
from tests.integration.test_network_policy import Pods, create_policy, netpol, running_pods
from tests.integration.test_network_services import patch as patch_service

__all__ = ["backend", "net_database", "running_pods"]  # the fixtures, shared with test_network.py
DENIED = 3
OUTSIDE, PARTNER = "203.0.113.7", "198.51.100.3"
ONLY_CLIENTS = netpol(
    "only-clients",
    {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": 8080}]}],
    },
)


def web_service(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}],
            **spec,
        },
    }


class Asker:
    """`kuberaven net can-reach` against the test's database, with the OpenStack cloud when the backend is it."""

    def __init__(self, database: Database, backend: NetworkBackend, cloud_file: str | None) -> None:
        self.database = database
        self.env = {**os.environ, **({"OS_CLIENT_CONFIG_FILE": cloud_file} if cloud_file else {})}
        self.cloud = ["--cloud", CLOUD] if isinstance(backend, OpenStackBackend) else []

    def run(self, source: str, target: str, *options: str) -> tuple[int, str]:
        url = self.database.url.render_as_string(False)
        args = ["net", "can-reach", source, target, "--db", url, *self.cloud, *options]
        done = subprocess.run(
            [sys.executable, "-m", "kuberaven", *args], capture_output=True, text=True, timeout=60, env=self.env
        )
        return done.returncode, (done.stdout + done.stderr).strip()

    def json(self, source: str, target: str, port: int) -> dict[str, Any]:
        code, out = self.run(source, target, "--port", str(port), "-o", "json")
        assert code in (0, DENIED), out  # not yet translated: asked again
        try:
            answer: dict[str, Any] = json.loads(out)
        except ValueError as error:  # a warning on stderr beside the answer (a busy Neutron's retry): ask again
            raise AssertionError(out) from error
        assert code == (0 if answer["allowed"] else DENIED), (code, out)
        return answer


def members_say(answer: dict[str, Any]) -> list[tuple[bool, str | None, str | None]]:
    return [(h["allowed"], h["policy"], h["rule"]) for h in answer["hops"] if h["hop"] == "ingress"]


async def test_reach_a_service_from_pods_and_from_outside(
    kube: KubeClient,
    namespace: str,
    net_database: Database,
    backend: NetworkBackend,
    running_pods: Pods,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxied = isinstance(backend, OpenStackBackend)  # the local Octavia's amphora provider
    cloud_file = str(request.getfixturevalue("openstack").clouds_yaml) if proxied else None
    ask = Asker(net_database, backend, cloud_file)
    web, client, other = f"{namespace}/svc/web", f"{namespace}/client", f"{namespace}/other"
    await running_pods(namespace, {"web-1": {"app": "web"}, "client": {"app": "client"}, "other": {"app": "other"}})
    services = f"/api/v1/namespaces/{namespace}/services"
    async with translating(kube, net_database, backend, cluster_name()):
        await kube.request("POST", services, body=web_service())
        await create_policy(kube, namespace, ONLY_CLIENTS)

        def translated() -> dict[str, Any]:
            answer = ask.json(client, web, 80)
            assert answer["members"]["total"] == 1 and answer["hops"][-1]["policy"], answer
            return answer

        allowed = await eventually(translated, timeout=90)
        # The member's policy decides: the client itself, or (amphora) the load balancer's address.
        rule = "load balancers (the Services' CIDR)" if proxied else "ingress rule 0"
        assert allowed["allowed"] and members_say(allowed) == [(True, f"{namespace}/only-clients", rule)], allowed
        assert [h["hop"] for h in allowed["hops"]] == ["egress", "listener", "allowed_cidrs", "ingress"]
        kept_out = ask.json(other, web, 80)
        assert kept_out["allowed"] is proxied, kept_out
        if not proxied:
            assert kept_out["reason"].startswith("no member lets it in:") and "only-clients" in kept_out["reason"]
        outside = ask.json(OUTSIDE, web, 80)
        assert outside["allowed"] is proxied and outside["hops"][0]["hop"] == "floating_ip", outside
        assert ask.run(OUTSIDE, web, "--port", "443")[0] == DENIED
        assert "has no listener for TCP port 443" in ask.run(OUTSIDE, web, "--port", "443")[1]

        # Source ranges: the listener keeps out the outside addresses they leave out; the cluster's own pods
        # are in its allowed_cidrs too (kube-proxy never applies the ranges to them).
        await patch_service(kube, f"{services}/web", {"spec": {"loadBalancerSourceRanges": ["198.51.100.0/24"]}})

        def ranged() -> None:
            code, out = ask.run(OUTSIDE, web, "--port", "80")
            lines = out.splitlines()
            says = f"allowed_cidrs of {namespace}/web:TCP:80 ("
            assert code == DENIED and lines[0].startswith(f"denied: {says}"), out
            assert lines[0].endswith(f"198.51.100.0/24) leave out {OUTSIDE}") and "10.128.0.0/9" in lines[0], out
            assert lines[3].startswith(f"  ✗ allowed_cidrs {namespace}/web:TCP:80: {says}"), out  # each hop a line

        await eventually(ranged, timeout=60)
        partner = ask.json(PARTNER, web, 80)
        assert partner["allowed"] is proxied and partner["hops"][2]["allowed"], partner
        assert ask.json(client, web, 80)["hops"][2]["allowed"] is True  # a pod of the cluster
        questions = [(PARTNER, web, 80), (client, f"{namespace}/web-1", 8080), (OUTSIDE, f"{namespace}/web-1", 8080)]
        await same_over_rest(net_database, cloud_file, ask, questions, monkeypatch)
    # Bad questions: one line, exit 1.
    nope = f"{namespace}/svc/nope"
    missing = f"error: Service {nope} has no load balancer in any cluster (no such service, or not translated yet)"
    assert ask.run(OUTSIDE, nope) == (1, missing)
    assert ask.run(OUTSIDE, "203.0.113.8") == (1, "error: '203.0.113.8' is not NAMESPACE/POD or NAMESPACE/svc/SERVICE")


async def same_over_rest(
    database: Database,
    cloud_file: str | None,
    ask: Asker,
    questions: list[tuple[str, str, int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GET /api/v1/network/can-reach answers what `-o json` prints, from the same backend."""
    if cloud_file:
        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", cloud_file)
    backends = ReachBackends(database, CLOUD if cloud_file else None)
    try:
        with serving(create_app(database, backends=backends)) as url, httpx.Client(base_url=url, timeout=30) as api:
            for source, target, port in questions:
                answer = api.get("/api/v1/network/can-reach", params={"from": source, "to": target, "port": port})
                assert answer.status_code == 200, answer.text
                assert answer.json() == ask.json(source, target, port)
            gone = api.get("/api/v1/network/can-reach", params={"from": OUTSIDE, "to": "x/svc/nope"})
            assert gone.status_code == 404 and "has no load balancer" in gone.json()["detail"]
    finally:
        backends.close()


def test_a_backend_that_cannot_be_read_is_said(net_database: Database, tmp_path: Path) -> None:
    """Rows an openstack translation left, asked about with no cloud to read: exit 1 and a 502, naming why."""
    with net_database.session() as session:
        states = {"Pod": {"port": "p-1", "address": "10.1.0.10"}, "Service": {"load_balancer": "lb-1"}}
        for kind, name in (("Pod", "web-1"), ("Service", "web")):
            session.add(
                NetworkTranslation(
                    cluster="gone",
                    kind=kind,
                    uid=f"u-{name}",
                    namespace="shop",
                    name=name,
                    backend="openstack",
                    state=states[kind],
                    updated=0.0,
                )
            )
        session.commit()
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text("clouds: {}\n")
    env = {**os.environ, "OS_CLIENT_CONFIG_FILE": str(clouds)}
    url = net_database.url.render_as_string(False)
    args = ["net", "can-reach", OUTSIDE, "shop/svc/web", "--db", url, "--cloud", "nowhere"]
    done = subprocess.run(
        [sys.executable, "-m", "kuberaven", *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1 and done.stderr.startswith("error: openstack backend: "), done.stderr
    assert "nowhere" in done.stderr, done.stderr
    backends = ReachBackends(net_database, "nowhere")
    with serving(create_app(net_database, backends=backends)) as base, httpx.Client(base_url=base, timeout=30) as api:
        answer = api.get("/api/v1/network/can-reach", params={"from": OUTSIDE, "to": "shop/svc/web"})
        assert answer.status_code == 502 and "openstack backend" in answer.json()["detail"], answer.text
