"""Which Services get a load balancer, on the embedded backend and on a real Neutron + Octavia: NodePort Services
(their ClusterIP), type changes in both directions, the labels that leave a Service to another proxy or mark it
headless, and Kubernetes' load-balancer-cleanup finalizer, also across a stop of kuberaven.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.model import Database, KubernetesService
from kuberaven.network.annotations import ANNOTATION
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.rules.services import (
    FLOATING_IP_CONDITION,
    HEADLESS_LABEL,
    LOAD_BALANCER_CLEANUP,
    SERVICE_PROXY_NAME_LABEL,
)
from tests.helpers import eventually_off_loop as eventually
from tests.integration.test_network import backend, cluster_name, net_database, owned, translating
from tests.integration.test_network_services import HTTP, patch, svc

__all__ = ["backend", "net_database"]  # the fixtures

WAIT = 60  # seconds a change may take to reach the backend (Octavia on a loaded 2-core machine)


class Observed:
    """One Service as the cluster and the backend hold it."""

    def __init__(self, kube: KubeClient, backend: NetworkBackend, cluster: str, namespace: str, name: str) -> None:
        self.kube, self.backend, self.cluster = kube, backend, cluster
        self.path = f"/api/v1/namespaces/{namespace}/services/{name}"
        self.lb_name = f"{namespace}/{name}"

    async def read(self) -> dict[str, Any]:
        return await self.kube.request("GET", self.path)

    def made(self, uid: str) -> set[str]:
        """The kinds of resource the backend holds for the Service (the translator serves every namespace), but
        the load balancer's VIP port, which the embedded backend makes and tags with it too."""
        return {r.kind for r in owned(self.backend, self.cluster) if r.uid == uid} - {"port"}

    async def state(self) -> tuple[dict[str, Any], set[str], dict[str, Any] | None]:
        """The Service, what the backend holds for it, and its kuberaven.io/network summary (None: none)."""
        found = await self.read()
        said = (found["metadata"].get("annotations") or {}).get(ANNOTATION)
        made = await asyncio.to_thread(self.made, found["metadata"]["uid"])  # a real Neutron's and Octavia's API
        return found, made, json.loads(said) if said else None


def ingress(found: dict[str, Any]) -> list[dict[str, Any]]:
    return list((found["status"].get("loadBalancer") or {}).get("ingress") or [])


def finalizers(found: dict[str, Any]) -> list[str]:
    return list(found["metadata"].get("finalizers") or [])


async def test_node_port_services_get_their_cluster_ip_load_balancer_and_type_changes_leave_nothing_stale(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    """NodePort → LoadBalancer → NodePort → ClusterIP → NodePort: the load balancer on the cluster IP stays
    throughout; the floating IP, the ingress, the FloatingIPAssigned condition and the cleanup finalizer come
    with type LoadBalancer and go with it."""
    cluster = cluster_name()
    service = Observed(kube, backend, cluster, namespace, "np")
    async with translating(kube, net_database, backend, cluster):
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=svc("np", "np", "NodePort", [HTTP]))

        async def cluster_ip_only() -> None:
            found, made, said = await service.state()
            assert made == {"load_balancer"}, made
            assert said is not None and said["vip_address"] == found["spec"]["clusterIP"], said
            assert said["listeners"] == [f"{service.lb_name}:TCP:80"] and said["floating_address"] is None, said
            assert not ingress(found) and LOAD_BALANCER_CLEANUP not in finalizers(found), found["metadata"]
            conditions = [c["type"] for c in found["status"].get("conditions") or []]
            assert FLOATING_IP_CONDITION not in conditions, conditions

        await eventually(cluster_ip_only, timeout=WAIT)
        load_balancer = (await service.state())[2]["load_balancer"]  # type: ignore[index]
        await patch(kube, service.path, {"spec": {"type": "LoadBalancer"}})

        async def external() -> None:
            found, made, said = await service.state()
            assert made == {"load_balancer", "floating_ip"}, made
            assert said is not None and ingress(found) == [{"ip": said["floating_address"]}], (said, found["status"])
            assert finalizers(found) == [LOAD_BALANCER_CLEANUP], found["metadata"]

        await eventually(external, timeout=WAIT)
        for kind in ("NodePort", "ClusterIP", "NodePort"):
            ports = [{**HTTP, "nodePort": None}] if kind == "ClusterIP" else [HTTP]
            await patch(kube, service.path, {"spec": {"type": kind, "externalTrafficPolicy": None, "ports": ports}})
            await eventually(cluster_ip_only, timeout=WAIT)
            assert (await service.state())[2]["load_balancer"] == load_balancer  # type: ignore[index]


async def test_services_left_to_another_proxy_or_labelled_headless_lose_their_load_balancer_and_annotation(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    """service.kubernetes.io/service-proxy-name naming another proxy, or service.kubernetes.io/headless: no load
    balancer (a LoadBalancer Service's floating IP, ingress and finalizer go too); the label taken off brings it
    back; a service-proxy-name naming kuberaven (the setting network_service_proxy_name) is served."""
    cluster = cluster_name()
    service = Observed(kube, backend, cluster, namespace, "proxied")
    async with translating(kube, net_database, backend, cluster):
        body = svc("proxied", "proxied", "LoadBalancer", [HTTP])
        body["metadata"]["labels"] = {SERVICE_PROXY_NAME_LABEL: "foo-bar"}
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=body)

        async def served(expected: bool) -> None:
            found, made, said = await service.state()
            if expected:
                assert made == {"load_balancer", "floating_ip"} and said is not None, (made, said)
                assert ingress(found) and finalizers(found) == [LOAD_BALANCER_CLEANUP], found
            else:
                assert made == set() and said is None, (made, said)
                assert not ingress(found) and finalizers(found) == [], found
                assert not found["status"].get("conditions"), found["status"]

        await eventually(lambda: served(False), timeout=WAIT)
        for labels, expected in (
            ({SERVICE_PROXY_NAME_LABEL: None}, True),
            ({HEADLESS_LABEL: ""}, False),
            ({HEADLESS_LABEL: None, SERVICE_PROXY_NAME_LABEL: "kuberaven"}, True),
            ({SERVICE_PROXY_NAME_LABEL: "foo-bar"}, False),
        ):
            await patch(kube, service.path, {"metadata": {"labels": labels}})
            await eventually(lambda: served(expected), timeout=WAIT)  # noqa: B023 (awaited at once)


async def test_the_cleanup_finalizer_keeps_a_service_deleted_while_kuberaven_is_stopped_until_it_cleaned_up(
    kube: KubeClient, namespace: str, net_database: Database, backend: NetworkBackend
) -> None:
    """A LoadBalancer Service deleted while kuberaven runs goes once its load balancer and floating IP are gone;
    one deleted while kuberaven is stopped stays, terminating, and goes at the next start (its informer resumes
    from the stored position, so the deletion comes as a watch event), with its load balancer and floating IP."""
    cluster = cluster_name()
    with net_database.session() as session:  # a cluster of the data model: its watch positions are stored
        session.add(KubernetesService(name=cluster))
        session.commit()
    live, stopped = (Observed(kube, backend, cluster, namespace, name) for name in ("live", "stopped"))
    uids = {}
    async with translating(kube, net_database, backend, cluster):
        for each in (live, stopped):
            name = each.path.rpartition("/")[2]
            created = await kube.request(
                "POST", f"/api/v1/namespaces/{namespace}/services", body=svc(name, name, "LoadBalancer", [HTTP])
            )
            uids[name] = created["metadata"]["uid"]
        for each in (live, stopped):

            async def external(each: Observed = each) -> None:
                found, made, _ = await each.state()
                assert made == {"load_balancer", "floating_ip"} and finalizers(found) == [LOAD_BALANCER_CLEANUP]

            await eventually(external, timeout=WAIT)
        await kube.request("DELETE", live.path)
        await eventually(lambda: gone(live, uids["live"]), timeout=WAIT)
    await kube.request("DELETE", stopped.path)
    found = await stopped.read()  # held by the finalizer while nobody cleans up
    assert found["metadata"].get("deletionTimestamp") and finalizers(found) == [LOAD_BALANCER_CLEANUP], found
    assert stopped.made(uids["stopped"]) == {"load_balancer", "floating_ip"}
    async with translating(kube, net_database, backend, cluster):
        await eventually(lambda: gone(stopped, uids["stopped"]), timeout=WAIT)


async def gone(service: Observed, uid: str) -> None:
    """The Service is gone from the cluster, and what the backend held for it before."""
    try:
        found = await service.read()
    except NotFound:
        assert await asyncio.to_thread(service.made, uid) == set()
        return
    raise AssertionError(f"still there: {found['metadata']}")
