"""cloud-provider-openstack's Service annotations read into load balancer options (network/rules/lb_annotations.py),
and what service_load_balancer() makes of them: tables of recorded Services, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.network.drivers.load_balancers import HealthMonitor, Timeouts
from kuberaven.network.rules import lb_annotations as a
from kuberaven.network.rules.services import ReadinessCheck, health_monitor, service_load_balancer

ENDPOINTS = {
    "metadata": {"namespace": "shop", "name": "web"},
    "subsets": [
        {
            "addresses": [{"ip": "10.1.0.5", "targetRef": {"kind": "Pod", "name": "web-1"}}],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        }
    ],
}


def service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "web", "annotations": annotations or {}},
        "spec": {
            "type": "LoadBalancer",
            "clusterIP": "10.0.0.20",
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("annotations", "field", "expected"),
    [
        ({a.LB_METHOD: "least_connections"}, "lb_method", "LEAST_CONNECTIONS"),
        ({a.CONNECTION_LIMIT: "-1"}, "connection_limit", -1),
        ({a.CONNECTION_LIMIT: "500"}, "connection_limit", 500),
        (
            {a.TIMEOUT_CLIENT_DATA: "60000", a.TIMEOUT_TCP_INSPECT: "0"},
            "timeouts",
            Timeouts(client_data=60000, tcp_inspect=0),
        ),
        ({a.PROXY_PROTOCOL: "true"}, "proxy_protocol", True),
        ({a.X_FORWARDED_FOR: "True"}, "x_forwarded_for", True),
        ({a.FLAVOR_ID: "f-1", a.AVAILABILITY_ZONE: "az1"}, "flavor_id", "f-1"),
        ({a.FLAVOR_ID: "f-1", a.AVAILABILITY_ZONE: "az1"}, "availability_zone", "az1"),
        ({a.INTERNAL: "true"}, "internal", True),
        ({a.KEEP_FLOATING_IP: "true"}, "keep_floating_ip", True),
        ({a.FLOATING_NETWORK_ID: "ext-2", a.FLOATING_SUBNET_ID: "ext-2-b"}, "floating_subnet_id", "ext-2-b"),
        ({a.MEMBER_SUBNET_ID: "s-9"}, "member_subnet_id", "s-9"),
        ({a.ENABLE_HEALTH_MONITOR: "false"}, "monitor", a.MonitorOverrides(enabled=False)),
        (
            {
                a.MONITOR_DELAY: "10s",
                a.MONITOR_TIMEOUT: "4",
                a.MONITOR_MAX_RETRIES: "2",
                a.MONITOR_MAX_RETRIES_DOWN: "5",
            },
            "monitor",
            a.MonitorOverrides(None, 10, 4, 2, 5),
        ),
        ({}, "errors", ()),
    ],
)
def test_each_annotation_is_read_as_cloud_provider_openstack_means_it(
    annotations: dict[str, str], field: str, expected: Any
) -> None:
    found = a.load_balancer_annotations(service(annotations))
    assert getattr(found, field) == expected
    assert found.errors == ()


@pytest.mark.parametrize(
    ("annotations", "bad", "why"),
    [
        ({a.LB_METHOD: "FASTEST"}, a.LB_METHOD, "not one of ROUND_ROBIN"),
        ({a.CONNECTION_LIMIT: "many"}, a.CONNECTION_LIMIT, "not an integer"),
        ({a.CONNECTION_LIMIT: "-5"}, a.CONNECTION_LIMIT, "between -1 and"),
        ({a.TIMEOUT_MEMBER_DATA: "-1"}, a.TIMEOUT_MEMBER_DATA, "between 0 and"),
        ({a.PROXY_PROTOCOL: "maybe"}, a.PROXY_PROTOCOL, "not a boolean"),
        ({a.MONITOR_MAX_RETRIES: "11"}, a.MONITOR_MAX_RETRIES, "between 1 and 10"),
        ({a.MONITOR_DELAY: "500ms"}, a.MONITOR_DELAY, "whole number of seconds"),
        ({a.FLAVOR_ID: " "}, a.FLAVOR_ID, "empty"),
        ({a.PROXY_PROTOCOL: "true", a.X_FORWARDED_FOR: "true"}, a.X_FORWARDED_FOR, "proxy-protocol"),
    ],
)
def test_a_value_that_cannot_be_read_is_named_with_why_and_only_it_is_left_out(
    annotations: dict[str, str], bad: str, why: str
) -> None:
    beside = {a.LB_METHOD: annotations.get(a.LB_METHOD, "SOURCE_IP")}
    found = a.load_balancer_annotations(service({**annotations, **beside}))
    assert [key for key, _ in found.errors] == [bad]
    assert why in found.errors[0][1]
    if bad != a.LB_METHOD:
        assert found.lb_method == "SOURCE_IP"  # the readable annotations beside it still count


def test_the_load_balancer_carries_what_the_annotations_ask() -> None:
    spec = service(
        {
            a.LB_METHOD: "SOURCE_IP_PORT",
            a.CONNECTION_LIMIT: "100",
            a.TIMEOUT_MEMBER_CONNECT: "3000",
            a.FLAVOR_ID: "small",
            a.KEEP_FLOATING_IP: "true",
            a.FLOATING_NETWORK_ID: "public-2",
            a.MEMBER_SUBNET_ID: "pods-b",
        }
    )
    lb = service_load_balancer(spec, ENDPOINTS)
    assert lb is not None
    (listener,) = lb.listeners
    assert (listener.options.lb_method, listener.options.connection_limit) == ("SOURCE_IP_PORT", 100)
    assert listener.options.timeouts.fields() == {"timeout_member_connect": 3000}
    assert (lb.flavor_id, lb.keep_floating_ip, lb.floating_network, lb.member_subnet) == (
        "small",
        True,
        "public-2",
        "pods-b",
    )
    assert lb.floating_ip and lb.option_errors == ()


def test_proxy_protocol_makes_proxy_pools_and_x_forwarded_for_http_listeners_of_tcp_ports_only() -> None:
    ports = [{"port": 80, "targetPort": 8080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]
    proxied = service_load_balancer(service({a.PROXY_PROTOCOL: "true"}, ports=ports), ENDPOINTS)
    forwarded = service_load_balancer(service({a.X_FORWARDED_FOR: "true"}, ports=ports), ENDPOINTS)
    assert proxied is not None and forwarded is not None
    assert [(li.protocol, li.pool_protocol) for li in proxied.listeners] == [("TCP", "PROXY"), ("UDP", None)]
    assert [(li.protocol, li.options.x_forwarded_for) for li in forwarded.listeners] == [("HTTP", True), ("UDP", False)]


@pytest.mark.parametrize(
    ("annotations", "spec", "floating"),
    [
        ({}, {}, True),
        ({a.INTERNAL: "true"}, {}, False),
        ({a.INTERNAL: "false"}, {}, True),
        ({}, {"loadBalancerClass": "example.com/other"}, False),
        ({}, {"loadBalancerClass": "kuberaven.io/openstack"}, True),
        ({}, {"type": "ClusterIP"}, False),
    ],
)
def test_a_floating_ip_only_for_an_external_load_balancer_of_our_class(
    annotations: dict[str, str], spec: dict[str, Any], floating: bool
) -> None:
    lb = service_load_balancer(service(annotations, **spec), ENDPOINTS, load_balancer_class="kuberaven.io/openstack")
    assert lb is not None  # the VIP load balancer is made whatever its class: pods reach the Service through it
    assert lb.floating_ip is floating


PROBE = HealthMonitor("HTTP", delay=10, timeout=1, max_retries=1, max_retries_down=3, url_path="/ready")


@pytest.mark.parametrize(
    ("check", "asked", "expected"),
    [
        (None, a.MonitorOverrides(), None),
        (ReadinessCheck(PROBE, 8081), a.MonitorOverrides(), PROBE),
        (ReadinessCheck(PROBE, 8081), a.MonitorOverrides(enabled=False), None),
        (None, a.MonitorOverrides(enabled=True), HealthMonitor("TCP", 5, 3, 1, 3)),
        (None, a.MonitorOverrides(True, delay=2), HealthMonitor("TCP", 2, 2, 1, 3)),
        (
            ReadinessCheck(PROBE, 8081),
            a.MonitorOverrides(None, 20, 5, 2, 4),
            HealthMonitor("HTTP", 20, 5, 2, 4, "/ready"),
        ),
    ],
)
def test_health_monitor_follows_the_probe_as_the_annotations_change_it(
    check: ReadinessCheck | None, asked: a.MonitorOverrides, expected: HealthMonitor | None
) -> None:
    assert health_monitor(check, asked) == expected


def test_every_annotation_read_is_one_the_services_store_keeps() -> None:
    """The translation's Service store keeps only the annotation keys declared: a key read but not kept
    would never be seen."""
    read = {
        value
        for name, value in vars(a).items()
        if name.isupper()
        and isinstance(value, str)
        and (value.startswith(a.PREFIX) or value == a.INTERNAL)
        and value != a.PREFIX
    }
    assert read == set(a.ANNOTATIONS)
