"""What Kubernetes objects become in the network model (network/translate.py), from recorded objects."""

from __future__ import annotations

from typing import Any

from kuberaven.network.backend import NetworkOptions
from kuberaven.network.translate import pod_port, service_load_balancer, translated_namespace


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "web-1", "uid": "u-1"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "podIP": "10.128.0.7", **status},
    }


def service(kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "web", "uid": "s-1"},
        "spec": {
            "type": kind,
            "clusterIP": "10.0.0.20",
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}],
            **spec,
        },
    }


ENDPOINTS = {
    "metadata": {"namespace": "shop", "name": "web"},
    "subsets": [
        {
            "addresses": [
                {"ip": "10.128.0.7", "targetRef": {"kind": "Pod", "name": "web-1"}},
                {"ip": "10.129.0.3", "targetRef": {"kind": "Pod", "name": "web-2"}},
            ],
            "notReadyAddresses": [{"ip": "10.128.0.9", "targetRef": {"kind": "Pod", "name": "web-3"}}],
            "ports": [
                {"name": "http", "port": 8080, "protocol": "TCP"},
                {"name": "dns", "port": 5353, "protocol": "UDP"},
            ],
        }
    ],
}


def test_system_namespaces_are_skipped_unless_asked_for() -> None:
    assert translated_namespace("shop", NetworkOptions()) and translated_namespace("default", NetworkOptions())
    assert not translated_namespace("kube-system", NetworkOptions())
    assert translated_namespace("kube-system", NetworkOptions(include_system_namespaces=True))


def test_a_pod_port_has_its_ip_and_uid_and_waits_for_an_ip() -> None:
    port = pod_port(pod())
    assert port is not None and (port.name, port.address, port.device_id) == ("shop/web-1", "10.128.0.7", "u-1")
    assert pod_port(pod(podIP=None)) is None
    assert pod_port(pod(phase="Succeeded")) is None
    host_network = pod()
    host_network["spec"]["hostNetwork"] = True
    assert pod_port(host_network) is None


def test_every_service_port_becomes_a_listener_with_the_ready_endpoints_as_members() -> None:
    spec = service_load_balancer(service(), ENDPOINTS)
    assert spec is not None and spec.vip_address == "10.0.0.20" and not spec.floating_ip
    http, dns = spec.listeners
    assert (http.name, http.protocol, http.port) == ("shop/web:TCP:80", "TCP", 80)
    assert (dns.name, dns.protocol, dns.port) == ("shop/web:UDP:53", "UDP", 53)
    # Ready addresses only, on the endpoint's (target) port, named namespace/pod:port.
    assert [(m.name, m.address, m.port) for m in http.members] == [
        ("shop/web-1:8080", "10.128.0.7", 8080),
        ("shop/web-2:8080", "10.129.0.3", 8080),
    ]
    assert {m.port for m in dns.members} == {5353}


def test_skipped_services_and_load_balancer_ip() -> None:
    assert service_load_balancer(service(clusterIP="None"), ENDPOINTS) is None  # headless
    assert service_load_balancer(service("NodePort"), ENDPOINTS) is None
    api = service()
    api["metadata"] |= {"namespace": "default", "name": "kubernetes"}
    assert service_load_balancer(api, None) is None
    lb = service_load_balancer(service("LoadBalancer", loadBalancerIP="172.24.4.77"), None)
    assert lb is not None and lb.floating_ip and lb.floating_address == "172.24.4.77"
    assert all(listener.members == () for listener in lb.listeners)


def test_the_digest_changes_with_the_members_only() -> None:
    base = service_load_balancer(service(), ENDPOINTS)
    again = service_load_balancer(service(), ENDPOINTS)
    fewer = service_load_balancer(service(), {**ENDPOINTS, "subsets": []})
    assert base is not None and again is not None and fewer is not None
    assert base.digest() == again.digest() != fewer.digest()
