"""EndpointSlices merged per Service into the shape services.py reads (network/endpointslices.py)."""

from __future__ import annotations

from typing import Any

from kuberaven.network.endpointslices import as_endpoints, service_key
from kuberaven.network.rules.services import service_load_balancer


def v1beta1_slice(name: str, rv: str, *endpoints: dict[str, Any], service: str | None = "web") -> dict[str, Any]:
    """As Kubernetes 1.20 serves them: the node in topology, ready in conditions."""
    labels = {"kubernetes.io/service-name": service} if service else {}
    return {
        "metadata": {"namespace": "shop", "name": name, "resourceVersion": rv, "labels": labels},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": list(endpoints),
    }


def endpoint(ip: str, pod: str, ready: bool | None = True, node: str = "node-1") -> dict[str, Any]:
    found: dict[str, Any] = {
        "addresses": [ip],
        "topology": {"kubernetes.io/hostname": node},
        "targetRef": {"kind": "Pod", "name": pod, "uid": f"u-{pod}"},
    }
    if ready is not None:
        found["conditions"] = {"ready": ready}
    return found


SERVICE = {
    "metadata": {"namespace": "shop", "name": "web", "uid": "s-1"},
    "spec": {
        "type": "LoadBalancer",
        "clusterIP": "10.0.0.20",
        "ports": [{"name": "http", "port": 80}],
        "externalTrafficPolicy": "Local",
    },
}


def members(endpoints: dict[str, Any] | None) -> set[str]:
    spec = service_load_balancer(SERVICE, endpoints)
    assert spec is not None
    return {m.address for listener in spec.listeners for m in listener.members}


def test_a_services_slices_merge_into_one_endpoints_with_ready_members_on_nodes() -> None:
    one = v1beta1_slice("web-a", "10", endpoint("10.128.0.7", "web-1"), endpoint("10.128.0.8", "web-2", ready=False))
    two = v1beta1_slice("web-b", "11", endpoint("10.129.0.3", "web-3", ready=None, node="node-2"))
    merged = as_endpoints("shop", "web", [one, two])
    assert merged is not None
    assert members(merged) == {"10.128.0.7", "10.129.0.3"}  # unknown readiness counts as ready
    assert merged["subsets"][0]["addresses"][0]["nodeName"] == "node-1"  # the v1beta1 topology, as Endpoints say
    assert merged["subsets"][0]["notReadyAddresses"][0]["targetRef"]["name"] == "web-2"
    v1 = {**one, "endpoints": [{"addresses": ["10.128.0.9"], "nodeName": "node-3", "conditions": {"ready": True}}]}
    assert (as_endpoints("shop", "web", [v1]) or {})["subsets"][0]["addresses"] == [
        {"ip": "10.128.0.9", "nodeName": "node-3"}
    ]
    assert as_endpoints("shop", "web", []) is None
    assert members(as_endpoints("shop", "web", [{**one, "addressType": "IPv6"}])) == set()


def test_slices_belong_to_their_service_by_label() -> None:
    assert service_key(v1beta1_slice("web-a", "1")) == "shop/web"
    assert service_key(v1beta1_slice("loose", "1", service=None)) is None


def test_a_slice_event_queues_the_service_it_belongs_to_before_and_after() -> None:
    from kuberaven.network.reconcilers.loadbalancers import slice_services
    from kuberaven.watch.reconciler import Change

    stub = {"metadata": {"name": "web-a", "namespace": "shop", "uid": "u"}}  # a relisted deletion: no labels
    assert slice_services(Change("DELETED", stub, previous=v1beta1_slice("web-a", "1"), relisted=True)) == {"shop/web"}
    assert slice_services(Change("ADDED", v1beta1_slice("loose", "1", service=None))) == set()
    moved = v1beta1_slice("web-a", "2", service="api")
    assert slice_services(Change("MODIFIED", moved, previous=v1beta1_slice("web-a", "1"))) == {"shop/web", "shop/api"}
