"""What a Service's options become on its load balancer (network/rules/services.py), from recorded-shape objects."""

from __future__ import annotations

import copy
from typing import Any

from kuberaven.network.drivers.load_balancers import SOURCE_IP, HealthMonitor, ListenerOptions, Persistence
from kuberaven.network.rules.services import (
    FLOATING_IP_CONDITION,
    HEADLESS_LABEL,
    SERVICE_PROXY_NAME_LABEL,
    endpoint_pods,
    endpoint_ports,
    floating_ip_condition,
    readiness_check,
    service_load_balancer,
    translated,
    wants_cleanup_finalizer,
)
from kuberaven.network.service_status import service_events


def service(kind: str = "LoadBalancer", **spec: Any) -> dict[str, Any]:
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
    if kind != "LoadBalancer":  # Kubernetes 1.20 refuses mixed protocols in a LoadBalancer Service
        ports.append({"name": "dns", "port": 53, "protocol": "UDP"})
    return {
        "metadata": {"namespace": "shop", "name": "web", "uid": "s-1"},
        "spec": {"type": kind, "clusterIP": "10.0.0.20", "ports": ports, **spec},
    }


# As the endpoints controller writes them: nodeName on pods' addresses; a hand-made address has none.
ENDPOINTS = {
    "metadata": {"namespace": "shop", "name": "web"},
    "subsets": [
        {
            "addresses": [
                {"ip": "10.128.0.7", "nodeName": "node-1", "targetRef": {"kind": "Pod", "name": "web-1", "uid": "p-1"}},
                {"ip": "10.129.0.3", "nodeName": "node-2", "targetRef": {"kind": "Pod", "name": "web-2", "uid": "p-2"}},
                {"ip": "192.0.2.10"},
            ],
            "notReadyAddresses": [{"ip": "10.128.0.9", "targetRef": {"kind": "Pod", "name": "web-0", "uid": "p-0"}}],
            "ports": [
                {"name": "http", "port": 8080, "protocol": "TCP"},
                {"name": "dns", "port": 5353, "protocol": "UDP"},
            ],
        }
    ],
}


def options(spec: Any) -> dict[tuple[str, int], ListenerOptions]:
    assert spec is not None
    return {listener.key: listener.options for listener in spec.listeners}


def test_client_ip_affinity_is_source_ip_persistence_with_its_timeout_on_udp_pools_only() -> None:
    affine = service(
        "ClusterIP", sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}}
    )
    found = options(service_load_balancer(affine, ENDPOINTS))
    # Octavia (Zed) refuses persistence_timeout on TCP pools: the pool's timeout is not carried there; OVN's
    # affinity_timeout takes the Service's on every protocol (client_timeout).
    assert found[("TCP", 80)].persistence == Persistence(SOURCE_IP, client_timeout=600)
    assert found[("UDP", 53)].persistence == Persistence(SOURCE_IP, 600, client_timeout=600)
    default_timeout = options(service_load_balancer(service("ClusterIP", sessionAffinity="ClientIP"), ENDPOINTS))
    assert default_timeout[("UDP", 53)].persistence == Persistence(SOURCE_IP, 10800, client_timeout=10800)
    assert default_timeout[("TCP", 80)].persistence == Persistence(SOURCE_IP, client_timeout=10800)
    for none in (service("ClusterIP"), service("ClusterIP", sessionAffinity="None")):
        assert all(o.persistence is None for o in options(service_load_balancer(none, ENDPOINTS)).values())


def test_changing_affinity_changes_the_digest_but_not_the_listeners() -> None:
    plain = service_load_balancer(service(), ENDPOINTS)
    affine = service_load_balancer(service(sessionAffinity="ClientIP"), ENDPOINTS)
    assert plain is not None and affine is not None
    assert plain.digest() != affine.digest()
    assert [listener.key for listener in plain.listeners] == [listener.key for listener in affine.listeners]


def test_source_ranges_become_allowed_cidrs_of_every_listener_of_a_load_balancer_service() -> None:
    ranged = service(loadBalancerSourceRanges=["203.0.113.0/24", " 198.51.100.0/24", "203.0.113.0/24"])
    assert options(service_load_balancer(ranged, ENDPOINTS))[("TCP", 80)].allowed_cidrs == (
        "198.51.100.0/24",
        "203.0.113.0/24",
    )
    assert options(service_load_balancer(service(), ENDPOINTS))[("TCP", 80)].allowed_cidrs == ()
    # Kubernetes applies them to LoadBalancer Services only.
    cluster_ip = service("ClusterIP", loadBalancerSourceRanges=["203.0.113.0/24"])
    assert all(o.allowed_cidrs == () for o in options(service_load_balancer(cluster_ip, ENDPOINTS)).values())


def members(spec: Any) -> set[str]:
    assert spec is not None
    return {m.address for listener in spec.listeners for m in listener.members}


def test_local_traffic_policy_keeps_only_addresses_on_a_node() -> None:
    assert members(service_load_balancer(service(), ENDPOINTS)) == {"10.128.0.7", "10.129.0.3", "192.0.2.10"}
    local = service(externalTrafficPolicy="Local")
    assert members(service_load_balancer(local, ENDPOINTS)) == {"10.128.0.7", "10.129.0.3"}
    # Only LoadBalancer Services have an external traffic policy.
    cluster_ip = service("ClusterIP", externalTrafficPolicy="Local")
    assert members(service_load_balancer(cluster_ip, ENDPOINTS)) == {"10.128.0.7", "10.129.0.3", "192.0.2.10"}


def test_headless_and_external_name_services_get_no_load_balancer() -> None:
    assert service_load_balancer(service("ClusterIP", clusterIP="None"), ENDPOINTS) is None
    external = {"metadata": service()["metadata"], "spec": {"type": "ExternalName", "externalName": "db.example"}}
    assert service_load_balancer(external, None) is None


def test_a_node_port_service_gets_the_load_balancer_of_its_cluster_ip_and_no_floating_ip() -> None:
    node_port = service("NodePort")
    node_port["spec"]["ports"][0]["nodePort"] = 30080
    spec = service_load_balancer(node_port, ENDPOINTS)
    assert spec is not None and spec.vip_address == "10.0.0.20" and not spec.floating_ip
    assert sorted(listener.key for listener in spec.listeners) == [("TCP", 80), ("UDP", 53)]
    assert {m.address for m in spec.listeners[0].members} == {"10.128.0.7", "10.129.0.3", "192.0.2.10"}
    assert spec == service_load_balancer(service("ClusterIP"), ENDPOINTS)  # the same load balancer as ClusterIP's


def labelled(body: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "labels": labels}}


def test_services_labelled_for_another_proxy_or_headless_get_none_and_kuberavens_own_name_is_served() -> None:
    other = labelled(service(), **{SERVICE_PROXY_NAME_LABEL: "foo-bar"})
    assert not translated(other) and service_load_balancer(other, ENDPOINTS) is None
    assert not wants_cleanup_finalizer(other)
    assert service_load_balancer(labelled(service(), **{HEADLESS_LABEL: ""}), ENDPOINTS) is None
    ours = labelled(service(), **{SERVICE_PROXY_NAME_LABEL: "kuberaven"})
    assert translated(ours) and service_load_balancer(ours, ENDPOINTS) is not None
    # The name served is a setting: another name, or none at all (every labelled Service is left alone).
    assert translated(other, proxy_name="foo-bar") and not translated(ours, proxy_name="foo-bar")
    assert not translated(ours, proxy_name=None) and translated(service(), proxy_name=None)
    assert not translated(labelled(service(), **{SERVICE_PROXY_NAME_LABEL: ""}), proxy_name="")
    assert translated(labelled(service(), app="web"))  # other labels change nothing


def test_the_cleanup_finalizer_is_wanted_by_load_balancer_services_of_our_class_until_deleted() -> None:
    assert wants_cleanup_finalizer(service())
    assert not wants_cleanup_finalizer(service("ClusterIP")) and not wants_cleanup_finalizer(service("NodePort"))
    assert not wants_cleanup_finalizer(service(loadBalancerClass="example.com/other"))
    assert wants_cleanup_finalizer(service(loadBalancerClass="ours"), load_balancer_class="ours")
    deleting = service()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    assert not wants_cleanup_finalizer(deleting) and service_load_balancer(deleting, ENDPOINTS) is None


def pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": "web-1"}, "spec": {"containers": list(containers)}}


def container(probe: dict[str, Any] | None, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"name": "c", "ports": list(ports), **({"readinessProbe": probe} if probe else {})}


HTTP_PROBE = {
    "httpGet": {"path": "/healthz", "port": "http"},
    "periodSeconds": 5,
    "timeoutSeconds": 2,
    "failureThreshold": 4,
    "successThreshold": 2,
}


def test_an_http_readiness_probe_becomes_an_http_monitor_of_the_named_port() -> None:
    check = readiness_check(pod(container(HTTP_PROBE, {"name": "http", "containerPort": 8080})), {8080})
    assert check is not None and check.port == 8080
    assert check.monitor == HealthMonitor(
        "HTTP", delay=5, timeout=2, max_retries=2, max_retries_down=4, url_path="/healthz"
    )


def test_probe_defaults_bounds_tcp_https_and_the_probes_with_no_monitor() -> None:
    tcp = readiness_check(pod(container({"tcpSocket": {"port": 9090}, "failureThreshold": 30})), {8080})
    # Kubernetes' defaults (10 s, 1 s, 1 success) and Octavia's bound on retries (10).
    assert tcp is not None and tcp.port == 9090
    assert tcp.monitor == HealthMonitor("TCP", delay=10, timeout=1, max_retries=1, max_retries_down=10)
    https = readiness_check(
        pod(container({"httpGet": {"port": 8443, "scheme": "HTTPS"}, "periodSeconds": 3, "timeoutSeconds": 9})), set()
    )
    assert https is not None and https.monitor.type == "HTTPS" and https.monitor.url_path == "/"
    assert https.monitor.timeout == 3  # never longer than the delay between checks
    assert readiness_check(pod(container({"exec": {"command": ["true"]}})), {8080}) is None
    assert readiness_check(pod(container(None, {"containerPort": 8080})), {8080}) is None
    unknown_name = container({"httpGet": {"port": "nope"}}, {"name": "http", "containerPort": 8080})
    assert readiness_check(pod(unknown_name), {8080}) is None


def test_the_container_serving_the_service_gives_the_probe() -> None:
    sidecar = {**container({"tcpSocket": {"port": 15021}}), "name": "sidecar"}
    app = container(HTTP_PROBE, {"name": "http", "containerPort": 8080})
    check = readiness_check(pod(sidecar, app), {8080})
    assert check is not None and check.monitor.type == "HTTP"


def test_the_monitor_goes_on_every_pool_and_members_are_checked_on_the_probe_port() -> None:
    check = readiness_check(pod(container({"tcpSocket": {"port": 9090}})), {8080})
    spec = service_load_balancer(service("ClusterIP"), ENDPOINTS, check)
    assert spec is not None and check is not None
    assert {listener.options.monitor for listener in spec.listeners} == {check.monitor}
    assert {m.monitor_port for listener in spec.listeners for m in listener.members} == {9090}
    same_port = readiness_check(pod(container({"tcpSocket": {"port": 8080}})), {8080})
    unprobed = service_load_balancer(service("ClusterIP"), ENDPOINTS)
    assert unprobed is not None
    probed_on_8080 = service_load_balancer(service("ClusterIP"), ENDPOINTS, same_port)
    assert probed_on_8080 is not None
    http = next(listener for listener in probed_on_8080.listeners if listener.port == 80)
    assert {m.monitor_port for m in http.members} == {None}  # the member's own port: nothing to say
    # The probe is part of the digest: a changed probe is a changed load balancer.
    assert spec.digest() != probed_on_8080.digest() != unprobed.digest()


def test_the_probe_is_read_from_one_pod_named_by_the_endpoints() -> None:
    assert endpoint_pods(ENDPOINTS) == [("web-0", "p-0"), ("web-1", "p-1"), ("web-2", "p-2")]
    assert endpoint_ports(ENDPOINTS) == {8080, 5353}
    assert endpoint_pods(None) == [] and endpoint_pods({"metadata": {}, "subsets": None}) == []


def test_the_floating_ip_condition_moves_its_transition_time_only_with_its_status() -> None:
    failed = floating_ip_condition([], None, "address 172.24.4.9 is in use", "AddressInUse", "T1")
    assert failed is not None
    assert (failed["type"], failed["status"], failed["reason"], failed["lastTransitionTime"]) == (
        FLOATING_IP_CONDITION,
        "False",
        "AddressInUse",
        "T1",
    )
    assert "172.24.4.9 is in use" in failed["message"]
    assert floating_ip_condition([failed], None, "address 172.24.4.9 is in use", "AddressInUse", "T2") is None
    other_error = floating_ip_condition([failed], None, "refused", "BackendError", "T2")
    assert other_error is not None and other_error["lastTransitionTime"] == "T1"
    assigned = floating_ip_condition([copy.deepcopy(failed)], "172.24.4.9", None, "Assigned", "T3")
    assert assigned is not None and (assigned["status"], assigned["lastTransitionTime"]) == ("True", "T3")


def test_a_translation_s_events_say_what_changed_since_the_last() -> None:
    state: dict[str, Any] = {
        "load_balancer": "lb-1",
        "vip_address": "10.0.0.20",
        "listeners": ["shop/web:TCP:80"],
        "members": 2,
        "floating_address": "172.24.4.9",
        "option_errors": ["lb-method: FASTEST is not one of ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP"],
        "ranges_how": "NotEnforced",
        "ranges_message": "not enforced on the members: web-1: why",
    }
    first = service_events("openstack", None, state)
    assert [(kind, reason) for kind, reason, _ in first] == [
        ("Normal", "LoadBalancerReady"),
        ("Normal", "FloatingIPAssigned"),
        ("Warning", "OptionRefused"),
        ("Warning", "SourceRanges"),
    ]
    assert first[0][2] == "load balancer lb-1 on 10.0.0.20 (openstack): 1 listeners, 2 members"
    # The same again: only the load balancer; a floating IP lost says why.
    assert [reason for _, reason, _ in service_events("openstack", state, state)] == ["LoadBalancerReady"]
    lost = {**state, "floating_address": None, "floating_error": "address 172.24.4.9 is in use"}
    assert service_events("openstack", state, lost)[1] == (
        "Warning",
        "Failed",
        "no floating IP: address 172.24.4.9 is in use",
    )
