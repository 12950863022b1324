"""Service options on the load balancer, on the embedded backend and on a real Neutron + Octavia.

sessionAffinity, loadBalancerSourceRanges, the pods' readiness probe, loadBalancerIP that cannot be had,
Services that get no load balancer, and a Service changing type — each as the backend itself holds it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import Conflict
from kuberaven.model import Database, KubernetesService
from kuberaven.model.network import NetworkResource
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.rules.lb_annotations import (
    CONNECTION_LIMIT,
    INTERNAL,
    KEEP_FLOATING_IP,
    LB_METHOD,
    TIMEOUT_CLIENT_DATA,
)
from kuberaven.network.rules.services import FLOATING_IP_CONDITION, OPTIONS_CONDITION, SOURCE_RANGES_CONDITION
from kuberaven.network.rules.source_ranges import node_addresses
from kuberaven.watch.watcher import WatchTarget
from tests.helpers import eventually as on_loop

# Their checks call the backend (a real Neutron + Octavia on the openstack one): off the loop.
from tests.helpers import eventually_off_loop as eventually
from tests.helpers import kuberaven_events, metric
from tests.integration.test_network import (
    PAUSE,
    _annotated,
    backend,
    cluster_name,
    free_external_addresses,
    net_database,
    owned,
    ready_ips,
    translating,
)

__all__ = ["backend", "net_database"]  # the fixtures, shared with test_network.py

MERGE, STRATEGIC = "application/merge-patch+json", "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class PoolView:
    """A listener and its pool as the backend holds them, in Octavia's terms."""

    listener: str
    pool: str
    allowed_cidrs: tuple[str, ...]
    persistence: dict[str, Any] | None
    monitor: dict[str, Any] | None
    members: frozenset[tuple[str, int | None]]  # (address, monitor_port)


def pools(
    backend: NetworkBackend, cluster: str, name: str, *wanted: tuple[str, int]
) -> dict[tuple[str, int], PoolView]:
    """The listeners and pools of load balancer ``name`` (at least those ``wanted``: else AssertionError)."""
    found = [r for r in owned(backend, cluster) if r.kind == "load_balancer" and r.name == name]
    assert len(found) == 1, found
    views = {}
    for listener in backend.listeners(found[0].id):
        assert listener.pool is not None
        members = frozenset((m.address, m.monitor_port) for m in backend.members(listener.pool))
        try:
            options = _options(backend, listener.id, listener.pool)
        except LookupError as gone:  # a part being made again (a monitor of another type) while we read
            raise AssertionError(gone) from gone
        views[(listener.protocol, listener.port)] = PoolView(listener.id, listener.pool, *options, members)
    assert set(wanted) <= set(views), views
    return views


def _options(backend: NetworkBackend, listener: str, pool: str) -> tuple[tuple[str, ...], Any, Any]:
    if isinstance(backend, OpenStackBackend):
        try:
            return _octavia_options(backend, listener, pool)
        except backend.context.errors.NotFoundException as gone:
            raise LookupError(gone) from gone
    assert isinstance(backend, EmbeddedBackend)
    with backend.database.session() as session:
        row, pool_row = session.get(NetworkResource, int(listener)), session.get(NetworkResource, int(pool))
        assert row is not None and pool_row is not None
        persistence = pool_row.attrs.get("session_persistence")
        if persistence:
            timeout = persistence.get("timeout")
            persistence = {"type": persistence["type"], **({"persistence_timeout": timeout} if timeout else {})}
        return tuple(row.attrs.get("allowed_cidrs") or []), persistence, pool_row.attrs.get("health_monitor")


def _octavia_options(backend: OpenStackBackend, listener: str, pool: str) -> tuple[tuple[str, ...], Any, Any]:
    """As Octavia shows them, in the embedded backend's terms (what we set of session_persistence)."""
    lbaas = backend.context.lbaas
    found, made = lbaas.get_listener(listener), lbaas.get_pool(pool)
    persistence = made.session_persistence
    if persistence:
        persistence = {k: v for k, v in persistence.items() if k in ("type", "persistence_timeout") and v}
    monitor = None
    if made.health_monitor_id:
        hm = lbaas.get_health_monitor(made.health_monitor_id)
        monitor = {
            "type": hm.type,
            "delay": hm.delay,
            "timeout": hm.timeout,
            "max_retries": hm.max_retries,
            "max_retries_down": hm.max_retries_down,
            "url_path": hm.url_path if hm.type != "TCP" else None,
        }
    return tuple(sorted(found.allowed_cidrs or [])), persistence or None, monitor


def probed(name: str, probe: dict[str, Any], replicas: int = 2) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "c",
        "image": PAUSE,
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": probe,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def svc(name: str, app: str, kind: str, ports: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": kind, "selector": {"app": app}, "ports": ports, **spec},
    }


HTTP = {"name": "http", "port": 80, "targetPort": 8080}
# A Service whose floating IP cannot be had, watched for this long once tried again, is tried at most this often
# (the backoff doubles from 0.2 s; a retry loop makes hundreds).
CALM_STRETCH = 3.0
CALM_TRIES = 6
HTTP_PROBE = {
    "httpGet": {"path": "/ready", "port": "http"},
    "periodSeconds": 7,
    "timeoutSeconds": 2,
    "failureThreshold": 4,
}


async def patch(kube: KubeClient, path: str, body: dict[str, Any], content_type: str = MERGE) -> None:
    """A patch; Kubernetes 1.20 answers 409 when the translator's write lands meanwhile: retried."""

    async def once() -> None:
        try:
            await kube.request("PATCH", path, body=body, content_type=content_type)
        except Conflict as conflict:
            raise AssertionError(conflict) from conflict

    await eventually(once)


async def test_affinity_source_ranges_and_the_readiness_probe_shape_listeners_and_pools_in_place(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    cluster = cluster_name()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    services = f"/api/v1/namespaces/{namespace}/services"
    async with translating(kube, net_database, backend, cluster):
        await kube.request("POST", deployments, body=probed("opts", HTTP_PROBE))
        ips = await ready_ips(kube, namespace, "opts", 2)
        await kube.request(
            "POST",
            services,
            body=svc(
                "edge",
                "opts",
                "LoadBalancer",
                [HTTP],
                sessionAffinity="ClientIP",
                loadBalancerSourceRanges=["203.0.113.0/24"],
            ),
        )
        # Kubernetes 1.20 allows mixed protocols only on ClusterIP: the UDP pool's persistence has a timeout.
        await kube.request(
            "POST",
            services,
            body=svc(
                "inside",
                "opts",
                "ClusterIP",
                [HTTP, {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 8080}],
                sessionAffinity="ClientIP",
                sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}},
            ),
        )
        monitor = {
            "type": "HTTP",
            "delay": 7,
            "timeout": 2,
            "max_retries": 1,
            "max_retries_down": 4,
            "url_path": "/ready",
        }

        def edge_is(cidrs: tuple[str, ...], persistence: dict[str, Any] | None) -> PoolView:
            view = pools(backend, cluster, f"{namespace}/edge", ("TCP", 80))[("TCP", 80)]
            assert (view.allowed_cidrs, view.persistence, view.monitor) == (cidrs, persistence, monitor), view
            assert view.members == {(ip, None) for ip in ips}  # probed on the member's own port
            return view

        # The ranges, and the cluster's own addresses (the default pod and Service CIDRs, the nodes): the
        # cluster's pods and nodes always reach the VIP, as kube-proxy never applies the ranges to them.
        nodes = node_addresses((await kube.request("GET", "/api/v1/nodes", params={"limit": 500}))["items"])
        own = ("10.0.0.0/24", "10.128.0.0/9", *(f"{address}/32" for address in nodes))
        first = await eventually(
            lambda: edge_is(tuple(sorted((*own, "203.0.113.0/24"))), {"type": "SOURCE_IP"}), timeout=90
        )

        async def said_on_the_service() -> None:
            edge = await kube.request("GET", f"{services}/edge")
            found = [c for c in edge["status"].get("conditions") or [] if c["type"] == SOURCE_RANGES_CONDITION]
            assert found and (found[0]["status"], found[0]["reason"]) == ("True", "AllowedCIDRs"), found
            assert found[0]["message"].startswith("allowed_cidrs on the listeners: 203.0.113.0/24, and the cluster's")

        await eventually(said_on_the_service, timeout=30)

        def inside_is() -> None:
            views = pools(backend, cluster, f"{namespace}/inside", ("TCP", 80), ("UDP", 53))
            assert views[("TCP", 80)].persistence == {"type": "SOURCE_IP"}, views
            assert views[("UDP", 53)].persistence == {"type": "SOURCE_IP", "persistence_timeout": 600}, views
            assert views[("UDP", 53)].monitor == monitor

        await eventually(inside_is, timeout=90)

        # Both changed: the listener and its pool stay, changed in place.
        await patch(
            kube,
            f"{services}/edge",
            {"spec": {"sessionAffinity": "None", "loadBalancerSourceRanges": ["198.51.100.0/24", "203.0.113.0/24"]}},
        )
        again = await eventually(
            lambda: edge_is(tuple(sorted((*own, "198.51.100.0/24", "203.0.113.0/24"))), None), timeout=60
        )
        assert (again.listener, again.pool) == (first.listener, first.pool)

        # A TCP probe on another port: the monitor is made again as TCP, members are checked on that port.
        await patch(
            kube,
            f"{deployments}/opts",
            {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "readinessProbe": {
                                        "tcpSocket": {"port": 9090},
                                        "periodSeconds": 5,
                                        "httpGet": None,
                                    },
                                }
                            ]
                        }
                    }
                }
            },
            STRATEGIC,
        )  # containers merged by name
        # (The patch merges into the probe: its timeout and failure threshold stay.)
        monitor = {"type": "TCP", "delay": 5, "timeout": 2, "max_retries": 1, "max_retries_down": 4, "url_path": None}

        async def probed_on_9090() -> None:
            running = await ready_ips(kube, namespace, "opts", 2)
            view = pools(backend, cluster, f"{namespace}/edge", ("TCP", 80))[("TCP", 80)]
            assert view.monitor == monitor and view.members == {(ip, 9090) for ip in running}, view

        await eventually(probed_on_9090, timeout=120)
        # No source ranges any more: every source is let in again.
        await patch(kube, f"{services}/edge", {"spec": {"loadBalancerSourceRanges": None}})

        def open_to_all() -> None:
            assert pools(backend, cluster, f"{namespace}/edge", ("TCP", 80))[("TCP", 80)].allowed_cidrs == ()

        await eventually(open_to_all, timeout=60)

        async def no_ranges_condition() -> None:
            conditions = (await kube.request("GET", f"{services}/edge"))["status"].get("conditions") or []
            assert all(c["type"] != SOURCE_RANGES_CONDITION for c in conditions), conditions

        await eventually(no_ranges_condition, timeout=30)


async def floating_condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    found = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}")
    conditions = [c for c in found["status"].get("conditions") or [] if c["type"] == FLOATING_IP_CONDITION]
    assert conditions, found["status"]
    return dict(conditions[0])


async def warnings(kube: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in await kuberaven_events(kube, namespace, name) if e["type"] == "Warning"]


async def test_a_load_balancer_ip_that_cannot_be_had_is_said_on_the_service_and_retried_calmly(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend, request: pytest.FixtureRequest
) -> None:
    cluster = cluster_name()
    [address] = free_external_addresses(request, backend, 1)
    services = f"/api/v1/namespaces/{namespace}/services"
    async with translating(kube, net_database, backend, cluster) as translator:
        first = await kube.request(
            "POST", services, body=svc("first", "none", "LoadBalancer", [HTTP], loadBalancerIP=address)
        )
        assert (await eventually(lambda: floating_condition(kube, namespace, "first"), timeout=60))["status"] == "True"
        # The same address again: in use.
        second = await kube.request(
            "POST", services, body=svc("second", "none", "LoadBalancer", [HTTP], loadBalancerIP=address)
        )

        async def refused() -> dict[str, Any]:
            condition = await floating_condition(kube, namespace, "second")
            assert (condition["status"], condition["reason"]) == ("False", "AddressInUse"), condition
            assert address in condition["message"]
            assert await warnings(kube, namespace, "second")
            state = await _annotated(kube, f"{services}/second")
            assert state["floating_error"] and state["floating_address"] is None, state
            # The Service's EndpointSlice made: its arrival (late on a loaded machine) is news that is tried at
            # once, not a backoff's retry, so the tries counted below start after it.
            slices = await kube.request(
                "GET",
                f"/apis/discovery.k8s.io/v1beta1/namespaces/{namespace}/endpointslices",
                params={"labelSelector": "kubernetes.io/service-name=second", "limit": 10},
            )
            assert slices["items"], "no EndpointSlice of the Service yet"
            return condition

        await eventually(refused, timeout=60)
        # Asked again with backoff, not in a loop: once it has been tried again, a stretch of CALM_STRETCH s sees
        # a few tries (each waits twice as long as the one before, 0.2 s first; news of the Service or its slice
        # is tried at once), where a loop would make hundreds; and the Service's warnings count a few.
        queue = translator.engine.controller("network-load-balancers").queue
        key = f"{namespace}/second"
        tried = queue.failures(key)
        await on_loop(lambda: queue.failures(key) > tried, timeout=90)
        again = queue.failures(key)
        await asyncio.sleep(CALM_STRETCH)  # a rate is counted over a stretch of time
        tries = queue.failures(key) - again
        assert tries <= CALM_TRIES, f"{tries} tries in {CALM_STRETCH} s"
        attempts = sum(e.get("count", 1) for e in await warnings(kube, namespace, "second"))
        assert 1 <= attempts <= 12, attempts
        # An address outside the external network: said too.
        await patch(kube, f"{services}/second", {"spec": {"loadBalancerIP": "192.0.2.50"}})

        async def outside() -> None:
            condition = await floating_condition(kube, namespace, "second")
            assert condition["status"] == "False" and "192.0.2.50" in condition["message"], condition

        await eventually(outside, timeout=60)
        # Freed: the address is had on a later attempt, and the condition says so.
        await patch(kube, f"{services}/second", {"spec": {"loadBalancerIP": address}})
        await kube.request("DELETE", f"{services}/first")

        async def assigned() -> None:
            condition = await floating_condition(kube, namespace, "second")
            assert condition["status"] == "True" and address in condition["message"], condition
            found = await kube.request("GET", f"{services}/second")
            assert found["status"]["loadBalancer"]["ingress"][0]["ip"] == address

        await eventually(assigned, timeout=60)
        first_and_second = {found["metadata"]["uid"] for found in (first, second)}
        assert len([r for r in owned(backend, cluster) if r.kind == "floating_ip" and r.uid in first_and_second]) == 1


async def test_headless_and_external_name_services_get_nothing_and_a_type_change_releases_its_floating_ip(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend, request: pytest.FixtureRequest
) -> None:
    cluster = cluster_name()
    services = f"/api/v1/namespaces/{namespace}/services"
    async with translating(kube, net_database, backend, cluster):
        await kube.request("POST", services, body=svc("headless", "none", "ClusterIP", [HTTP], clusterIP="None"))
        await kube.request(
            "POST",
            services,
            body={
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "ext"},
                "spec": {"type": "ExternalName", "externalName": "db.example"},
            },
        )
        await kube.request("POST", services, body=svc("flip", "none", "ClusterIP", [HTTP]))
        # Services are synced in order of their events: once the last one has its load balancer, the others
        # were seen.
        await eventually(lambda: pools(backend, cluster, f"{namespace}/flip", ("TCP", 80)), timeout=60)
        names = {r.name for r in owned(backend, cluster) if r.kind == "load_balancer"}
        assert f"{namespace}/headless" not in names and f"{namespace}/ext" not in names, names
        for name in ("headless", "ext"):
            found = await kube.request("GET", f"{services}/{name}")
            assert "kuberaven.io/network" not in (found["metadata"].get("annotations") or {})

        uid = (await kube.request("GET", f"{services}/flip"))["metadata"]["uid"]

        def floating_ips() -> list[Any]:  # the translator serves every namespace: only flip's
            return [r for r in owned(backend, cluster) if r.kind == "floating_ip" and r.uid == uid]

        assert floating_ips() == []
        await patch(kube, f"{services}/flip", {"spec": {"type": "LoadBalancer"}})

        async def external_ip() -> str:
            found = await kube.request("GET", f"{services}/flip")
            ingress = found["status"].get("loadBalancer", {}).get("ingress") or []
            assert ingress and len(floating_ips()) == 1, (found["status"], floating_ips())
            return str(ingress[0]["ip"])

        await eventually(external_ip, timeout=60)
        made = floating_ips()[0].id
        await patch(
            kube,
            f"{services}/flip",
            {"spec": {"type": "ClusterIP", "externalTrafficPolicy": None, "ports": [{**HTTP, "nodePort": None}]}},
        )

        async def released() -> None:
            found = await kube.request("GET", f"{services}/flip")
            assert not (found["status"].get("loadBalancer") or {}).get("ingress"), found["status"]
            conditions = [c["type"] for c in found["status"].get("conditions") or []]
            assert FLOATING_IP_CONDITION not in conditions, conditions
            assert floating_ips() == []
            assert set(pools(backend, cluster, f"{namespace}/flip")) == {("TCP", 80)}  # the load balancer stays

        await eventually(released, timeout=60)
        if isinstance(backend, OpenStackBackend):  # gone from Neutron, not merely untagged or detached (its
            # address may be another's by now: Neutron hands a freed address out again)
            connection = request.getfixturevalue("openstack").connection()
            assert connection.network.find_ip(made) is None


async def test_members_come_from_endpoint_slices_and_a_restart_reads_a_services_slices_without_a_relist(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    cluster = cluster_name()
    with net_database.session() as session:  # a cluster of the data model: its watch positions are stored
        session.add(KubernetesService(name=cluster))
        session.commit()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    name = f"{namespace}/sliced"

    def members_are(ips: set[str]) -> None:
        assert pools(backend, cluster, name, ("TCP", 80))[("TCP", 80)].members == {(ip, None) for ip in ips}

    async with translating(kube, net_database, backend, cluster) as translator:
        # Kubernetes 1.20 serves EndpointSlices as v1beta1 only: API discovery chose them.
        assert translator.load_balancers.members == WatchTarget("discovery.k8s.io/v1beta1", "EndpointSlice")
        await kube.request("POST", deployments, body=probed("sliced", {"exec": {"command": ["true"]}}))
        await kube.request(
            "POST", f"/api/v1/namespaces/{namespace}/services", body=svc("sliced", "sliced", "ClusterIP", [HTTP])
        )
        ips = await ready_ips(kube, namespace, "sliced", 2)
        await eventually(lambda: members_are(ips), timeout=90)
        assert pools(backend, cluster, name)[("TCP", 80)].monitor is None  # an exec probe: no monitor
    # Stopped: the Service changes meanwhile, its slices do not.
    await patch(kube, f"/api/v1/namespaces/{namespace}/services/sliced", {"spec": {"sessionAffinity": "ClientIP"}})
    relists = metric("kuberaven_relists_total", resource="endpointslices")
    async with translating(kube, net_database, backend, cluster):
        # Resumed where it stopped: the Service's change comes as an event, and no slice event with it; its
        # slices are read with one labelled LIST (the informer lists nothing), so its members stay.
        def affine_with_the_same_members() -> None:
            members_are(ips)
            assert pools(backend, cluster, name)[("TCP", 80)].persistence == {"type": "SOURCE_IP"}

        await eventually(affine_with_the_same_members, timeout=90)
    assert metric("kuberaven_relists_total", resource="endpointslices") == relists


async def options_condition(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    found = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}")
    conditions = [c for c in found["status"].get("conditions") or [] if c["type"] == OPTIONS_CONDITION]
    assert conditions, found["status"]
    return dict(conditions[0])


def listener_fields(backend: NetworkBackend, cluster: str, name: str) -> dict[str, Any]:
    """What cloud-provider-openstack's annotations set on the TCP:80 listener and its pool, as the backend holds it."""
    view = pools(backend, cluster, name, ("TCP", 80))[("TCP", 80)]
    if isinstance(backend, OpenStackBackend):
        listener, pool = backend.context.lbaas.get_listener(view.listener), backend.context.lbaas.get_pool(view.pool)
        return {
            "lb_algorithm": pool.lb_algorithm,
            "connection_limit": listener.connection_limit,
            "timeout_client_data": listener.timeout_client_data,
        }
    assert isinstance(backend, EmbeddedBackend)
    with backend.database.session() as session:
        listener_row, pool_row = (
            session.get(NetworkResource, int(view.listener)),
            session.get(NetworkResource, int(view.pool)),
        )
        assert listener_row is not None and pool_row is not None
        return {
            "lb_algorithm": pool_row.attrs["lb_algorithm"],
            "connection_limit": listener_row.attrs["connection_limit"],
            "timeout_client_data": listener_row.attrs.get("timeout_client_data"),
        }


def floating_ips(backend: NetworkBackend) -> set[str]:
    """Every floating IP address the backend holds, kuberaven's or not."""
    if isinstance(backend, OpenStackBackend):
        return {fip.floating_ip_address for fip in backend.context.net.ips()}
    assert isinstance(backend, EmbeddedBackend)
    with backend.database.session() as session:
        rows = session.query(NetworkResource).filter(NetworkResource.kind == "floating_ip")
        return {row.attrs["address"] for row in rows}


async def test_cloud_provider_openstack_annotations_shape_the_load_balancer_and_a_bad_one_is_said(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    cluster = cluster_name()
    services = f"/api/v1/namespaces/{namespace}/services"
    annotations = {
        LB_METHOD: "FASTEST",
        CONNECTION_LIMIT: "200",
        TIMEOUT_CLIENT_DATA: "60000",
        KEEP_FLOATING_IP: "true",
    }
    async with translating(kube, net_database, backend, cluster):
        service = svc("annotated", "none", "LoadBalancer", [HTTP])
        service["metadata"]["annotations"] = annotations
        await kube.request("POST", services, body=service)

        async def unreadable_is_said() -> None:
            condition = await options_condition(kube, namespace, "annotated")
            assert condition["status"] == "False" and LB_METHOD in condition["message"], condition
            assert "FASTEST" in condition["message"]
            said = [e for e in await warnings(kube, namespace, "annotated") if e["reason"] == "OptionRefused"]
            assert said and LB_METHOD in said[0]["message"], said
            # The rest of the load balancer is made as asked.
            fields = listener_fields(backend, cluster, f"{namespace}/annotated")
            assert fields == {"lb_algorithm": "ROUND_ROBIN", "connection_limit": 200, "timeout_client_data": 60000}

        await eventually(unreadable_is_said, timeout=90)
        await patch(kube, f"{services}/annotated", {"metadata": {"annotations": {LB_METHOD: "LEAST_CONNECTIONS"}}})

        async def applied() -> str:
            condition = await options_condition(kube, namespace, "annotated")
            assert (condition["status"], condition["reason"]) == ("True", "Applied"), condition
            fields = listener_fields(backend, cluster, f"{namespace}/annotated")
            assert fields["lb_algorithm"] == "LEAST_CONNECTIONS", fields
            found = await kube.request("GET", f"{services}/annotated")
            ingress = (found["status"].get("loadBalancer") or {}).get("ingress") or []
            assert ingress, found["status"]
            return str(ingress[0]["ip"])

        address = await eventually(applied, timeout=90)
        # keep-floatingip: the Service goes, its floating IP stays, no longer kuberaven's to collect.
        await kube.request("DELETE", f"{services}/annotated")

        def kept() -> None:
            assert not [r for r in owned(backend, cluster) if r.name == f"{namespace}/annotated"]
            assert address in floating_ips(backend)
            assert not [r for r in owned(backend, cluster) if r.kind == "floating_ip" and r.name.endswith(address)]

        await eventually(kept, timeout=90)
        # An internal load balancer gets no floating IP.
        internal = svc("internal", "none", "LoadBalancer", [HTTP])
        internal["metadata"]["annotations"] = {INTERNAL: "true"}
        made = await kube.request("POST", services, body=internal)

        async def no_floating_ip() -> None:
            state = await _annotated(kube, f"{services}/internal")
            assert state["load_balancer"] and state["floating_address"] is None, state
            assert not [
                r for r in owned(backend, cluster) if r.kind == "floating_ip" and r.uid == made["metadata"]["uid"]
            ]

        await eventually(no_floating_ip, timeout=90)
