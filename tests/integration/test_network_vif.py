"""Ports before pods (network_cni=kuberaven), on the embedded backend and on a real Neutron.

A pod bound to a node that no fake kubelet serves stays without an IP, as it
would until our CNI ran: the translator must make its port then, bound to the
node, and write the VIF annotation that the CNI reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from prometheus_client import REGISTRY

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.model.network import NetworkResource
from kuberaven.network.backend import CNI_KUBERAVEN
from kuberaven.network.backends import make_backend
from kuberaven.network.backends.embedded import EmbeddedBackend
from kuberaven.network.backends.embedded_ports import port_of
from kuberaven.network.backends.openstack import OpenStackBackend
from kuberaven.network.drivers import NetworkBackend
from kuberaven.network.vif import VIF_ANNOTATION
from kuberaven.testing.kubelet import FakeKubelet
from tests.helpers import bound_pod, eventually, kuberaven_events, vif_of
from tests.integration.test_network import backend, cluster_name, net_database, owned, translating

__all__ = ["backend", "net_database"]  # the fixtures, shared with test_network.py
# Pools (openstack) only for the pods that ask: the translator serves every other test's namespace too.
NO_PREWARM = {"pool_prewarm_limit": 0, "pool_min": 0, "pool_batch": 1}


def port_as_made(backend: NetworkBackend, database: Database, port: str) -> tuple[str, str, str | None]:
    """(address, MAC, bound host) of a port, as the backend holds it."""
    if isinstance(backend, OpenStackBackend):
        found: Any = backend.context.net.get_port(port)
        return found.fixed_ips[0]["ip_address"], found.mac_address, found.binding_host_id
    assert isinstance(backend, EmbeddedBackend)
    with database.session() as session:
        row = session.get(NetworkResource, int(port))
        assert row is not None
        return row.attrs["address"], port_of(row.id, row.attrs["address"]).mac, row.attrs["host"]


async def test_a_scheduled_pod_gets_a_port_bound_to_its_node_and_a_vif_before_it_has_an_ip(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database, backend: NetworkBackend
) -> None:
    cluster = cluster_name()
    wired = observed("kuberaven_network_pod_wiring_seconds", step="vif")
    posts = observed("kuberaven_openstack_request_seconds", method="POST", route="/v2.0/ports")
    async with translating(kube, net_database, backend, cluster, cni=CNI_KUBERAVEN, **NO_PREWARM):
        await bound_pod(kube, namespace, "web", unserved_node)
        await bound_pod(kube, namespace, "host", unserved_node, hostNetwork=True)
        vif = await vif_of(kube, namespace, "web")

        assert port_as_made(backend, net_database, vif.port) == (vif.ip, vif.mac, unserved_node)
        assert vif.node == unserved_node and vif.mtu > 0 and vif.gateway != vif.ip
        groups = [r.id for r in owned(backend, cluster) if r.kind == "security_group" and r.name.endswith(namespace)]
        assert vif.security_groups == groups
        pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/web")
        assert not pod["status"].get("podIP"), "the port came first"
        ready = await eventually(lambda: described(kube, namespace, "web", "PortReady"), timeout=30)
        assert f"port {vif.port} {vif.ip}" in ready["message"] and ready["type"] == "Normal"
        assert observed("kuberaven_network_pod_wiring_seconds", step="vif") > wired, "the pod's wiring time"
        if isinstance(backend, OpenStackBackend):
            assert observed("kuberaven_openstack_request_seconds", method="POST", route="/v2.0/ports") > posts

        # A hostNetwork pod keeps the node's network: no port, no annotation.
        host = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/host")
        assert VIF_ANNOTATION not in (host["metadata"].get("annotations") or {})
        if isinstance(backend, OpenStackBackend):
            return  # a pooled port, recycled when the pod goes: test_network_pools.py
        ports = {r.name for r in owned(backend, cluster) if r.kind == "port" and r.name.startswith(f"{namespace}/")}
        assert ports == {f"{namespace}/web"}, ports

        # A pod deleted releases its port, and so its address, at once.
        await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/web", body={"gracePeriodSeconds": 0})

        def released() -> None:
            assert not [r for r in owned(backend, cluster) if r.kind == "port" and r.name.startswith(f"{namespace}/")]

        await eventually(released, timeout=30)


def observed(histogram: str, **labels: str) -> float:
    """How many times this process observed ``histogram`` with ``labels`` (its _count sample)."""
    return REGISTRY.get_sample_value(f"{histogram}_count", labels) or 0.0


async def described(kube: KubeClient, namespace: str, pod: str, reason: str) -> dict[str, Any]:
    """The Event of ``reason`` that `kubectl describe pod` lists, recorded by kuberaven."""
    events = [e for e in await kuberaven_events(kube, namespace, pod) if e["reason"] == reason]
    assert events, f"no {reason} event for {pod}"
    return events[0]


async def test_a_port_that_cannot_be_made_is_a_warning_on_its_pod(
    kube: KubeClient, namespace: str, unserved_node: str, net_database: Database
) -> None:
    backend = make_backend("embedded", net_database)
    # A /30 namespace subnet holds the gateway and one port: the second pod's port cannot be made.
    async with translating(
        kube, net_database, backend, cluster_name(), cni=CNI_KUBERAVEN, subnet_mode="namespace", namespace_prefix=30
    ):
        await bound_pod(kube, namespace, "first", unserved_node)
        await vif_of(kube, namespace, "first")
        await bound_pod(kube, namespace, "second", unserved_node)
        failed = await eventually(lambda: described(kube, namespace, "second", "Failed"), timeout=30)
        assert failed["type"] == "Warning" and "no free address" in failed["message"], failed["message"]
        for pod in ("first", "second"):  # no kubelet serves the node: gone at once, not Terminating for long
            await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod}", body={"gracePeriodSeconds": 0})
    backend.close()


async def test_with_a_kubelet_in_the_loop_the_pod_ends_with_its_ports_ip(
    kube: KubeClient, namespace: str, net_database: Database
) -> None:
    """A kubelet whose runtime runs kuberaven-cni: the pod waits for its VIF and reports the port's IP."""
    kubelet = FakeKubelet(kube, 1, prefix=f"vif-node-{uuid.uuid4().hex[:6]}-", vif_wait=True)
    [node] = kubelet.nodes
    await kubelet.start()
    backend = make_backend("embedded", net_database)
    cluster = cluster_name()
    try:
        async with translating(
            kube, net_database, backend, cluster, cni=CNI_KUBERAVEN, subnet_mode="namespace"
        ) as translator:
            await bound_pod(kube, namespace, "web", node)
            await bound_pod(kube, namespace, "host", node, hostNetwork=True)
            vif = await vif_of(kube, namespace, "web")

            async def running(name: str) -> dict[str, Any]:
                pod = await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
                assert pod["status"].get("phase") == "Running", pod["status"]
                return pod

            assert (await eventually(lambda: running("web")))["status"]["podIP"] == vif.ip
            assert (await eventually(lambda: running("host")))["status"]["podIP"] != vif.ip
            # The translator has seen the pods' IPs and reconciled what they brought: the port stays the same.
            pods = translator.pods.pods
            assert pods is not None

            def seen_ips() -> None:
                known = [pods.get(f"{namespace}/{name}") for name in ("web", "host")]
                assert all(pod and pod["status"].get("podIP") for pod in known), known

            await eventually(seen_ips)
            await asyncio.wait_for(translator.engine.controller("network-pods").wait_idle(), 30)
            # (the translator serves the whole cluster: pods of other tests may have ports too)
            ports = [
                (r.id, r.name)
                for r in owned(backend, cluster)
                if r.kind == "port" and r.name.startswith(f"{namespace}/")
            ]
            assert ports == [(vif.port, f"{namespace}/web")], ports
    finally:
        await kubelet.stop()
        backend.close()
        with contextlib.suppress(Exception):
            await kube.request("DELETE", f"/api/v1/nodes/{node}")
