"""NetworkPolicies ──► security groups, against the local control plane: the embedded backend (with can-reach
through the CLI and the REST API) and a real Neutron (groups and rules as Neutron lists them)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2 as httpx
import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.model import Database, KubernetesService, NetworkTranslation
from kuberaven.model.network import NetworkResource
from kuberaven.network.backend import NetworkOptions, tags
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.drivers.security_groups import SecurityGroupRule
from kuberaven.network.reconcilers.context import TranslationContext
from kuberaven.network.reconcilers.pods import PodsReconciler
from kuberaven.network.rules.translate import PodPort
from kuberaven.network.state import TranslationStore
from kuberaven.testing.namespaces import create_namespace
from kuberaven.web.app import create_app
from tests.helpers import eventually, kuberaven, serving
from tests.integration.test_network import PAUSE, backend, cluster_name, net_database, owned, translating

__all__ = ["backend", "net_database"]  # the fixtures, shared with test_network.py
TOKEN = "policy-test-token-not-a-secret"
DENIED = 3


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    ports = [{"name": "http", "containerPort": 8080}]
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": PAUSE, "ports": ports}]},
    }


def netpol(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": spec}


DENY_INGRESS = netpol("deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]})
FROM_CLIENTS = netpol(
    "from-clients",
    {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": "http"}]}],
    },
)
FROM_PEERS = netpol(
    "from-peers",
    {
        "podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "peer"}}}]}],
    },
)


@pytest.fixture
async def peer_namespace(kube: KubeClient) -> AsyncIterator[str]:
    name = f"peer-{uuid.uuid4().hex[:6]}"
    await create_namespace(kube, name)
    yield name
    await kube.request("DELETE", f"/api/v1/namespaces/{name}")


Pods = Callable[[str, dict[str, dict[str, str]]], Awaitable[None]]


@pytest.fixture
async def running_pods(kube: KubeClient) -> AsyncIterator[Pods]:
    """Makes pods (name → labels) and waits for their IPs; deletes them at the end and waits until they are
    gone, so that no later test of the session finds their ports (the translator serves the whole cluster)."""
    made: list[str] = []

    async def run(namespace: str, pods: dict[str, dict[str, str]]) -> None:
        for name, labels in pods.items():
            await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod(name, labels))
            made.append(f"/api/v1/namespaces/{namespace}/pods/{name}")

        async def running() -> None:
            for name in pods:
                found = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
                assert found["status"].get("podIP"), found["status"]

        await eventually(running, timeout=60)

    yield run
    for path in made:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", path, body={"gracePeriodSeconds": 0})

    async def gone() -> None:
        for path in made:
            with contextlib.suppress(NotFound):
                await kube.request("GET", path)
                raise AssertionError(f"{path} is still there")

    await eventually(gone, timeout=60)


def can_reach(database: Database, source: str, target: str, *options: str) -> tuple[int, str]:
    done = kuberaven("net", "can-reach", source, target, "--db", database.url.render_as_string(False), *options)
    return done.returncode, (done.stdout + done.stderr).strip()


def answers(database: Database, source: str, target: str, code: int, says: str, *options: str) -> None:
    found = can_reach(database, source, target, *options)
    assert found[0] == code and says in found[1], found


async def relabel(kube: KubeClient, path: str, labels: dict[str, str]) -> None:
    body = {"metadata": {"labels": labels}}
    await kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")


async def create_policy(kube: KubeClient, namespace: str, policy: dict[str, Any]) -> None:
    await kube.request("POST", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies", body=policy)


async def test_policies_decide_what_can_reach_says_through_the_cli_and_the_api(
    kube: KubeClient, namespace: str, peer_namespace: str, net_database: Database, running_pods: Pods
) -> None:
    from kuberaven.network.backends import make_backend

    backend = make_backend("embedded", net_database)
    web, client, peer = f"{namespace}/web", f"{namespace}/client", f"{peer_namespace}/peer"
    await running_pods(namespace, {"web": {"app": "web"}, "client": {"app": "client"}})
    await running_pods(peer_namespace, {"peer": {"app": "peer"}})
    cluster = cluster_name()

    async def expect(source: str, target: str, code: int, says: str, *options: str) -> None:
        await eventually(lambda: answers(net_database, source, target, code, says, *options), timeout=60)

    async with translating(kube, net_database, backend, cluster):
        # Selected by no policy: allowed, by default.
        await expect(client, web, 0, f"no policy selects {web} for ingress: allowed by default", "--port", "8080")
        await create_policy(kube, namespace, DENY_INGRESS)
        selected = f"{web} is selected by policies {namespace}/deny-ingress for ingress, no rule allows it"
        await expect(client, web, DENIED, selected)
        # The named port "http" is the container's 8080: allowed there, nowhere else, and only from the clients.
        await create_policy(kube, namespace, FROM_CLIENTS)
        await expect(client, web, 0, f"allowed by policy {namespace}/from-clients ingress rule 0", "--port", "8080")
        answers(net_database, client, web, DENIED, "no rule allows it", "--port", "9090")
        answers(net_database, client, web, DENIED, "no rule allows it", "--port", "8080", "--protocol", "UDP")
        answers(net_database, peer, web, DENIED, "no rule allows it", "--port", "8080")
        # Namespace labels and pod labels change the rules.
        await create_policy(kube, namespace, FROM_PEERS)
        answers(net_database, peer, web, DENIED, "no rule allows it", "--port", "8080")
        await relabel(kube, f"/api/v1/namespaces/{peer_namespace}", {"team": "peer"})
        await expect(peer, web, 0, f"{namespace}/from-peers ingress rule 0")
        await relabel(kube, f"/api/v1/namespaces/{namespace}/pods/client", {"app": "nobody"})
        await expect(client, web, DENIED, "no rule allows it", "--port", "8080")
        await rest_answers(net_database, peer, web, client)

        # Policies gone: their groups go, and the pods are allowed by default again.
        for name in ("deny-ingress", "from-clients", "from-peers"):
            await kube.request("DELETE", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}")
        await expect(client, web, 0, "allowed by default", "--port", "8080")

        def groups_gone() -> None:
            assert not [r for r in owned(backend, cluster) if r.name.startswith("policy:")]

        await eventually(groups_gone, timeout=30)
    # Bad questions: one line, exit 1.
    assert can_reach(net_database, "web", web) == (1, "error: 'web' is not NAMESPACE/POD")
    assert can_reach(net_database, f"{namespace}/nope", web) == (
        1,
        f"error: pod {namespace}/nope has no port in any cluster (no such pod, or not translated yet)",
    )


async def rest_answers(database: Database, peer: str, web: str, client: str) -> None:
    """GET /api/v1/network/can-reach: the CLI's answer, behind the API's token; bad questions are 4xx."""
    with serving(create_app(database, token=TOKEN)) as url, httpx.Client(base_url=url, timeout=10) as api:
        path = "/api/v1/network/can-reach"
        assert api.get(path, params={"from": peer, "to": web}).status_code == 401
        api.headers["Authorization"] = f"Bearer {TOKEN}"
        allowed = api.get(path, params={"from": peer, "to": web, "port": 8080})
        assert allowed.status_code == 200, allowed.text
        body = allowed.json()
        assert body["allowed"] is True and body["ingress"]["rule"] == "ingress rule 0", body
        assert body["ingress"]["policy"].endswith("/from-peers")
        denied = api.get(path, params={"from": client, "to": web, "port": 8080}).json()
        assert denied["allowed"] is False and "no rule allows it" in denied["reason"], denied
        missing = api.get(path, params={"from": f"{peer}x", "to": web})
        assert missing.status_code == 404 and "has no port" in missing.json()["detail"]
        bad = api.get(path, params={"from": peer, "to": web, "protocol": "ICMP"})
        assert bad.status_code == 422 and "protocol 'ICMP' is not one of TCP, UDP, SCTP" in bad.json()["detail"]
        assert api.get(path, params={"from": peer}).status_code == 422


def neutron_rules(backend: NetworkBackend, group: str) -> set[tuple[Any, ...]]:
    """The rules of a group as Neutron lists them (its own API, not the backend's reading of it)."""
    assert isinstance(backend, OpenStackBackend)
    return {
        (r.direction, r.ether_type, r.protocol, r.port_range_min, r.port_range_max, r.remote_ip_prefix)
        for r in backend.context.net.security_group_rules(security_group_id=group)
    }


async def test_policy_groups_and_rules_in_the_backend(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend, running_pods: Pods
) -> None:
    cluster = cluster_name()
    await running_pods(namespace, {"web": {"app": "web"}, "client": {"app": "client"}})
    client_ip = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/client"))["status"]["podIP"]
    async with translating(kube, net_database, backend, cluster):
        await create_policy(kube, namespace, FROM_CLIENTS)

        def group_made() -> tuple[str, str]:
            groups = {r.name: r.id for r in owned(backend, cluster) if r.kind == "security_group"}
            assert f"policy:{namespace}/from-clients" in groups, groups
            with net_database.session() as session:
                rows = session.query(NetworkTranslation).filter_by(kind="Pod", namespace=namespace)
                ports = {t.name: t.state for t in rows}
            policy_group = groups[f"policy:{namespace}/from-clients"]
            web = ports.get("web")  # its port may be made after the policy's group
            assert web and web["security_groups"][:1] == [policy_group], ports
            return policy_group, web["port"]

        group, web_port = await eventually(group_made, timeout=60)
        expected = {
            SecurityGroupRule("ingress", f"{client_ip}/32", "tcp", 8080, 8080, "ingress rule 0"),
            SecurityGroupRule("ingress", "10.0.0.0/24", None, None, None, "load balancers (the Services' CIDR)"),
        }
        await eventually(lambda: _assert_equal(set(backend.security_group_rules(group)), expected), timeout=30)
        if isinstance(backend, OpenStackBackend):
            # As Neutron lists them: no default egress rules left, the port carries the group.
            assert neutron_rules(backend, group) == {
                ("ingress", "IPv4", "tcp", 8080, 8080, f"{client_ip}/32"),
                ("ingress", "IPv4", None, None, None, "10.0.0.0/24"),
            }
            assert group in backend.context.net.get_port(web_port).security_group_ids
        await kube.request("DELETE", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/from-clients")

        def group_gone() -> None:
            assert not [r for r in owned(backend, cluster) if r.name.startswith("policy:")]

        await eventually(group_gone, timeout=60)


def _assert_equal(found: Any, expected: Any) -> None:
    assert found == expected, json.dumps(sorted(map(str, found)))


async def test_changes_made_while_stopped_are_caught_up_at_restart(
    kube: KubeClient, namespace: str, net_database: Database, running_pods: Pods
) -> None:
    """The informers resume from their stored positions (no list of pods): a policy deleted while kuberaven was
    stopped loses its group and frees its ports; a pod relabelled meanwhile gets the rules it now matches."""
    from kuberaven.network.backends import make_backend

    backend = make_backend("embedded", net_database)
    cluster = cluster_name()
    with net_database.session() as session:  # a cluster of the data model: its watch positions are stored
        session.add(KubernetesService(name=cluster))
        session.commit()
    web, client = f"{namespace}/web", f"{namespace}/client"
    await running_pods(namespace, {"web": {"app": "web"}, "client": {"app": "nobody"}})
    async with translating(kube, net_database, backend, cluster):
        await create_policy(kube, namespace, DENY_INGRESS)
        await create_policy(kube, namespace, FROM_CLIENTS)
        await eventually(
            lambda: answers(net_database, client, web, DENIED, "no rule allows it", "--port", "8080"), timeout=60
        )
    await relabel(kube, f"/api/v1/namespaces/{namespace}/pods/client", {"app": "client"})
    await kube.request("DELETE", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/deny-ingress")
    async with translating(kube, net_database, backend, cluster):
        await eventually(
            lambda: answers(net_database, client, web, 0, "from-clients ingress rule 0", "--port", "8080"), timeout=60
        )

        def deny_group_gone() -> None:
            names = {r.name for r in owned(backend, cluster) if r.kind == "security_group"}
            assert f"policy:{namespace}/deny-ingress" not in names and f"policy:{namespace}/from-clients" in names

        await eventually(deny_group_gone, timeout=30)
        # The client is selected by no policy: back on its namespace's group alone.
        answers(net_database, web, client, 0, f"no policy selects {client} for ingress: allowed by default")


def test_a_new_port_starts_with_the_groups_of_the_policies_selecting_its_pod(net_database: Database) -> None:
    """pods.py makes a port with the groups policies give (not its namespace's first: that would leave a new pod of
    a default-deny namespace open until its groups are set), and its namespace's when given none."""
    from kuberaven.network.backends import make_backend

    backend, cluster = make_backend("embedded", net_database), cluster_name()
    store = TranslationStore(net_database, cluster, backend)
    made = tags(cluster, "ns-uid")
    network = backend.ensure_network("shop", made)
    subnet = backend.ensure_subnet(network, "shop", made, cidr="10.9.0.0/24")
    group = backend.ensure_security_group("namespace-shop", made)
    store.save(
        "Namespace",
        "ns-uid",
        None,
        "shop",
        {
            "network": network,
            "subnet": subnet.id,
            "cidr": subnet.cidr,
            "gateway": subnet.gateway,
            "security_group": group,
        },
    )
    no_io = TranslationContext(None, store, backend, NetworkOptions(), cluster, None, None, None, None)  # type: ignore[arg-type]  # no I/O here
    pods = PodsReconciler(no_io)
    selected = PodPort("shop/web", "10.9.0.5", "u-web", "shop", "web", None, ("g-policy", "g-allow-egress"))
    unselected = PodPort("shop/client", "10.9.0.6", "u-client", "shop", "client")
    ported = pods._ensure_ports([selected, unselected])
    assert [list(p.network.security_groups) for p in ported] == [["g-policy", "g-allow-egress"], [group]]  # type: ignore[union-attr]
    with net_database.session() as session:
        rows = session.query(NetworkResource).filter_by(kind="port", cluster=cluster)
        assert {r.name: r.attrs["security_groups"] for r in rows} == {
            "shop/web": ["g-policy", "g-allow-egress"],
            "shop/client": [group],
        }
