"""Network translation against the local control plane, on the embedded backend and on a real Neutron + Octavia."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import Conflict
from kuberaven.model import Database, KubernetesService, NetworkTranslation
from kuberaven.model import NetworkResource as NetworkResourceRow
from kuberaven.network.backend import INFRASTRUCTURE, BackendError, NetworkOptions
from kuberaven.network.backends import make_backend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.endpointslices import members_target
from kuberaven.network.listing_store import list_network
from kuberaven.network.translator import ANNOTATION, NetworkTranslator
from tests.helpers import component_running, kuberaven_events, metric

# Their checks call the backend (a real Neutron + Octavia on the openstack one): off the loop.
from tests.helpers import eventually_off_loop as eventually

PAUSE = "registry.local:5000/library/pause:3.2"


@pytest.fixture
def net_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """The translator's own database (SQLite: the IPAM on PostgreSQL is covered by test_network_ipam)."""
    database = Database(f"sqlite:///{tmp_path_factory.mktemp('net')}/kuberaven.db")
    database.prepare()
    yield database
    database.dispose()


@pytest.fixture(params=["embedded", "openstack"])
def backend(request: pytest.FixtureRequest, net_database: Database) -> Iterator[NetworkBackend]:
    """The same scenarios on both backends: kuberaven's tables, and a real local Neutron + Octavia."""
    if request.param == "embedded":
        made = make_backend("embedded", net_database)
    else:
        made = request.getfixturevalue("openstack").backend()
    yield made
    made.close()


@contextlib.asynccontextmanager
async def translating(
    kube: KubeClient, database: Database, backend: NetworkBackend, cluster: str, **options: Any
) -> AsyncIterator[NetworkTranslator]:
    # Members from what the cluster serves, as the daemon decides it (1.20: EndpointSlice v1beta1).
    translator = NetworkTranslator(
        kube, database, cluster, backend, NetworkOptions(**options), gc_period=3600, members=await members_target(kube)
    )
    async with component_running(translator):
        await asyncio.wait_for(translator.collected.wait(), 60)
        yield translator


def free_external_addresses(request: pytest.FixtureRequest, backend: NetworkBackend, count: int) -> list[str]:
    """``count`` addresses of the external network that nothing holds now, from its top.

    On the openstack backend every test shares the session's one Neutron, whose routers and floating IPs
    take external addresses at random: an address fixed in a test could be some other test's already."""
    taken: set[str] = set()
    if backend.name == "openstack":
        connection = request.getfixturevalue("openstack").connection()
        taken = {fixed["ip_address"] for port in connection.network.ports() for fixed in port.fixed_ips}
    hosts = (str(address) for address in reversed(list(ipaddress.ip_network(NetworkOptions().external_cidr).hosts())))
    return [address for address in hosts if address not in taken][:count]


def cluster_name() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


def owned(backend: NetworkBackend, cluster: str) -> list[Any]:
    return [r for r in backend.owned(cluster) if r.uid != INFRASTRUCTURE]


async def owned_for(kube: KubeClient, backend: NetworkBackend, cluster: str, namespace: str) -> list[Any]:
    """What the backend holds for objects of ``namespace`` (the translator serves the whole cluster)."""
    elsewhere = set()
    for path in ("/api/v1/namespaces", "/api/v1/pods", "/api/v1/services"):
        async for item in kube.list_objects(path):
            meta = item["metadata"]
            if meta.get("namespace", meta["name"]) != namespace:
                elsewhere.add(meta["uid"])
    return [r for r in owned(backend, cluster) if r.uid not in elsewhere]


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": PAUSE}]},
            },
        },
    }


def service(name: str, kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    # Kubernetes 1.20 refuses mixed protocols in a LoadBalancer Service.
    second = {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}
    if kind == "LoadBalancer":
        second = {"name": "https", "port": 443, "targetPort": 8443}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "type": kind,
            "selector": {"app": name},
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                second,
            ],
            **spec,
        },
    }


async def pods(kube: KubeClient, namespace: str, app: str) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods"
    return [pod async for pod in kube.list_objects(path, {"labelSelector": f"app={app}"})]


async def ready_ips(kube: KubeClient, namespace: str, app: str, count: int) -> set[str]:
    async def check() -> set[str]:
        ips = {
            p["status"].get("podIP") for p in await pods(kube, namespace, app) if p["status"].get("phase") == "Running"
        }
        ips.discard(None)
        assert len(ips) == count, ips
        return ips

    return await eventually(check, timeout=60)


def load_balancer(backend: NetworkBackend, cluster: str, name: str) -> dict[tuple[str, int], set[str] | None]:
    """The load balancer named ``name``: {(protocol, port): member addresses (None: no pool yet)}."""
    found = [r for r in owned(backend, cluster) if r.kind == "load_balancer" and r.name == name]
    assert len(found) == 1, found
    listeners = backend.listeners(found[0].id)
    return {
        (ls.protocol, ls.port): {m.address for m in backend.members(ls.pool)} if ls.pool else None for ls in listeners
    }


async def scale(kube: KubeClient, namespace: str, name: str, replicas: int) -> None:
    await kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )


async def test_namespaces_pods_and_services_become_networks_ports_and_load_balancers(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend, request: pytest.FixtureRequest
) -> None:
    cluster = cluster_name()
    asked, moved = free_external_addresses(request, backend, 2)
    async with translating(kube, net_database, backend, cluster):
        # The namespace: a network with a subnet and a security group, and the annotation saying so.
        def network_made() -> None:
            kinds = {(r.kind, r.name) for r in owned(backend, cluster)}
            assert ("network", namespace) in kinds and ("security_group", f"namespace-{namespace}") in kinds, kinds

        await eventually(network_made)
        await eventually(lambda: _annotated(kube, f"/api/v1/namespaces/{namespace}"))

        # A Deployment's pods: one port each, with the pod's IP, named namespace/pod.
        await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=deployment("web", 2))
        ips = await ready_ips(kube, namespace, "web", 2)

        def ports_match() -> None:
            # (the translator serves the whole cluster: other tests' pods have ports too)
            ports = {r.name for r in owned(backend, cluster) if r.kind == "port" and r.name.startswith(f"{namespace}/")}
            assert ports == {f"{namespace}/{p['metadata']['name']}" for p in pods_now}, ports

        pods_now = await pods(kube, namespace, "web")
        await eventually(ports_match)

        def rows_hold_the_pods_ips() -> None:
            # The translation row is written once the backend's port is made: just after, not with it.
            with net_database.session() as session:
                rows = session.query(NetworkTranslation).filter_by(kind="Pod", namespace=namespace)
                addresses = {r.state["address"] for r in rows}
            assert addresses == ips, addresses

        await eventually(rows_hold_the_pods_ips)
        # Pods keep their CNI's IP and get no annotation: nothing on the node reads one.
        pod_now = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pods_now[0]['metadata']['name']}")
        assert ANNOTATION not in (pod_now["metadata"].get("annotations") or {})

        # A Service with two ports: a load balancer, VIP = clusterIP, two listeners, members = ready endpoints.
        created = await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service("web"))
        lb_name = f"{namespace}/web"

        def members_are(expected: set[str]) -> None:
            listeners = load_balancer(backend, cluster, lb_name)
            assert listeners == {("TCP", 80): expected, ("UDP", 53): expected}, listeners

        await eventually(lambda: members_are(ips), timeout=60)
        state = await eventually(lambda: _annotated(kube, f"/api/v1/namespaces/{namespace}/services/web"))
        assert state["vip_address"] == created["spec"]["clusterIP"]
        assert state["listeners"] == [f"{lb_name}:TCP:80", f"{lb_name}:UDP:53"]

        # Members follow the endpoints as the Deployment scales up and down.
        await scale(kube, namespace, "web", 3)
        ips3 = await ready_ips(kube, namespace, "web", 3)
        await eventually(lambda: members_are(ips3), timeout=60)
        await scale(kube, namespace, "web", 1)
        ips1 = await ready_ips(kube, namespace, "web", 1)
        await eventually(lambda: members_are(ips1), timeout=60)
        # The listing (the Network tab's picture, `kuberaven net get`) points each listener to those members on
        # either backend: the embedded one from its tables, the openstack one from what the translation set.
        await eventually(lambda: listed_members_are(net_database, cluster, namespace, "web", ips1))

        # type LoadBalancer: the floating IP spec.loadBalancerIP asks for, shown in the Service's status.
        await kube.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/services",
            body=service("edge", "LoadBalancer", loadBalancerIP=asked),
        )

        async def external_ip_is(address: str) -> None:
            svc = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/edge")
            ingress = svc["status"].get("loadBalancer", {}).get("ingress") or []
            assert ingress and ingress[0]["ip"] == address, svc["status"]

        await eventually(lambda: external_ip_is(asked), timeout=60)

        # Asking for another address moves the floating IP.
        async def ask_for(address: str) -> None:
            # Kubernetes 1.20 answers a Service patch 409 when another write (here the translator's
            # status or annotation) lands meanwhile: retry as any client must.
            try:
                await kube.request(
                    "PATCH",
                    f"/api/v1/namespaces/{namespace}/services/edge",
                    body={"spec": {"loadBalancerIP": address}},
                    content_type="application/merge-patch+json",
                )
            except Conflict as conflict:
                raise AssertionError(conflict) from conflict

        await eventually(lambda: ask_for(moved))
        await eventually(lambda: external_ip_is(moved), timeout=60)
        fips = [r for r in owned(backend, cluster) if r.kind == "floating_ip"]
        assert len(fips) == 1
        assert set(load_balancer(backend, cluster, f"{namespace}/edge")) == {("TCP", 80), ("TCP", 443)}
        members_are(ips1)  # one Service's load balancer never touches another's

        # Deleting everything leaves nothing of this cluster behind in the backend.
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/services/edge")
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/services/web")
        await kube.request("DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")

        async def nothing_left() -> None:
            assert await owned_for(kube, backend, cluster, namespace) == []

        await eventually(nothing_left, timeout=90)


def listed_members_are(database: Database, cluster: str, namespace: str, name: str, expected: set[str]) -> None:
    """The loadbalancers listing's row of Service ``name``: each of its listeners' members are ``expected``."""
    _, rows = list_network(database, "loadbalancers", cluster=cluster, namespace=namespace)
    found = [r for r in rows if r["service"] == name]
    assert len(found) == 1, rows
    row = found[0]
    listed = {
        (each.get("protocol"), each.get("port")): {m["address"] for m in (each.get("pool") or {}).get("members", [])}
        for each in row["listeners"]
    }
    assert listed == {("TCP", 80): expected, ("UDP", 53): expected}, row["listeners"]


async def _annotated(kube: KubeClient, path: str) -> dict[str, Any]:
    obj = await kube.request("GET", path)
    value = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
    assert value, f"{path} has no {ANNOTATION} annotation yet"
    return dict(json.loads(value))


async def test_resources_leaked_while_stopped_are_removed_at_restart(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    cluster = cluster_name()
    with net_database.session() as session:  # a cluster of the data model: its watch positions are stored
        session.add(KubernetesService(name=cluster))
        session.commit()
    async with translating(kube, net_database, backend, cluster):
        await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=deployment("leak", 1))
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service("leak", "LoadBalancer"))
        await ready_ips(kube, namespace, "leak", 1)

        def translated() -> None:
            kinds = {r.kind for r in owned(backend, cluster)}
            assert {"network", "port", "load_balancer", "floating_ip"} <= kinds, kinds

        await eventually(translated, timeout=60)
    # kuberaven is stopped: the Service and the Deployment's pods go meanwhile.
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/services/leak")
    await kube.request(
        "DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/leak", body={"propagationPolicy": "Foreground"}
    )

    async def pods_gone() -> None:
        assert await pods(kube, namespace, "leak") == []

    await eventually(pods_gone, timeout=60)
    leaked = {r.kind for r in await owned_for(kube, backend, cluster, namespace)}
    assert {"port", "load_balancer", "floating_ip"} <= leaked
    lists = {r: metric("kuberaven_relists_total", resource=r) for r in ("pods", "services", "endpointslices")}
    async with translating(kube, net_database, backend, cluster):
        # Every informer resumed from its stored position: the deletions made while it was stopped come
        # as replayed DELETED events, and what was made for those objects goes; the namespace's own stays.
        async def collected() -> None:
            remaining = await owned_for(kube, backend, cluster, namespace)
            assert {r.kind for r in remaining} == {"network", "security_group"}, remaining
            live_uid = (await kube.request("GET", f"/api/v1/namespaces/{namespace}"))["metadata"]["uid"]
            assert {r.uid for r in remaining} == {live_uid}

        await eventually(collected, timeout=30)
    assert {r: metric("kuberaven_relists_total", resource=r) for r in lists} == lists  # a restart lists nothing


def existing_external_network(backend: NetworkBackend, request: pytest.FixtureRequest, name: str, cidr: str) -> None:
    """An external network someone else made (a cloud's "public"), that kuberaven must use, not make."""
    if backend.name == "embedded":
        network = backend._ensure("network", name, [], external=True)  # type: ignore[attr-defined]
        backend.ensure_subnet(str(network.id), name, [], cidr=cidr)
        return
    connection = request.getfixturevalue("openstack").connection()
    network = connection.network.create_network(name=name, is_router_external=True)
    connection.network.create_subnet(network_id=network.id, name=name, cidr=cidr, ip_version=4)


async def test_floating_ips_come_from_an_existing_external_network(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend, request: pytest.FixtureRequest
) -> None:
    cluster = cluster_name()
    public, cidr = f"public-{cluster}", "198.51.100.0/24"
    existing_external_network(backend, request, public, cidr)
    async with translating(kube, net_database, backend, cluster, external_network=public):
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=service("edge", "LoadBalancer"))

        async def external_ip_from_the_existing_network() -> None:
            svc = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/edge")
            ingress = svc["status"].get("loadBalancer", {}).get("ingress") or []
            assert ingress and ipaddress.ip_address(ingress[0]["ip"]) in ipaddress.ip_network(cidr), svc["status"]

        await eventually(external_ip_from_the_existing_network, timeout=60)

        async def described() -> None:  # what `kubectl describe service edge` lists
            reasons = {e["reason"] for e in await kuberaven_events(kube, namespace, "edge")}
            assert {"LoadBalancerReady", "FloatingIPAssigned"} <= reasons, reasons

        await eventually(described, timeout=30)
    made = {(r.kind, r.name) for r in backend.owned(cluster)}
    assert not any(kind == "network" and "external" in name for kind, name in made), made


def test_a_missing_external_network_is_said_by_name(backend: NetworkBackend) -> None:
    # The translator logs this and retries (someone may be creating it); nothing is made meanwhile.
    with pytest.raises(BackendError, match="external network 'nope' does not exist"):
        backend.ensure_infrastructure(cluster_name(), NetworkOptions(external_network="nope"))


def router_subnets(backend: NetworkBackend, request: pytest.FixtureRequest, router: str) -> set[str]:
    """The subnets attached to ``router``, as the backend itself holds them."""
    if backend.name == "embedded":
        with backend.database.session() as session:  # type: ignore[attr-defined]
            row = session.get(NetworkResourceRow, int(router))
            return set(row.attrs.get("interfaces", [])) if row else set()
    connection = request.getfixturevalue("openstack").connection()
    return {ip["subnet_id"] for port in connection.network.ports(device_id=router) for ip in port.fixed_ips}


def ingress_sources(backend: NetworkBackend, request: pytest.FixtureRequest, group: str) -> set[str]:
    """The CIDRs security group ``group`` lets in (any protocol), as the backend holds them."""
    if backend.name == "embedded":
        with backend.database.session() as session:  # type: ignore[attr-defined]
            row = session.get(NetworkResourceRow, int(group))
            return {r["remote_cidr"] for r in row.attrs.get("rules", [])} if row else set()
    connection = request.getfixturevalue("openstack").connection()
    rules = connection.network.security_group_rules(security_group_id=group, direction="ingress")
    return {r.remote_ip_prefix for r in rules if r.protocol is None and r.remote_ip_prefix}


async def test_namespace_subnets_join_the_cluster_router_and_leave_it_with_their_namespace(
    kube: KubeClient, net_database: Database, backend: NetworkBackend, request: pytest.FixtureRequest
) -> None:
    cluster = cluster_name()
    name = f"routed-{uuid.uuid4().hex[:6]}"
    async with translating(kube, net_database, backend, cluster, subnet_mode="namespace") as translator:
        assert translator.infrastructure is not None
        router = translator.infrastructure.router
        await kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        state = await eventually(lambda: _annotated(kube, f"/api/v1/namespaces/{name}"), timeout=60)
        await eventually(lambda: _assert(state["subnet"] in router_subnets(backend, request, router)), timeout=30)
        # Its pods' security group lets the load balancers in (from the Services' subnet).
        with net_database.session() as session:
            translation = session.query(NetworkTranslation).filter_by(kind="Namespace", name=name).one()
            group = translation.state["security_group"]
        # (and pods that no NetworkPolicy selects, which keep this group, are open to all)
        assert ingress_sources(backend, request, group) == {NetworkOptions.service_cidr, "0.0.0.0/0"}
        await kube.request("DELETE", f"/api/v1/namespaces/{name}")

        def gone() -> None:
            assert not [r for r in owned(backend, cluster) if r.name == name]
            assert state["subnet"] not in router_subnets(backend, request, router)

        await eventually(gone, timeout=90)


def _assert(condition: bool) -> None:
    assert condition
