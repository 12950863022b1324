"""The bodies the OpenStack backend sends Octavia and its comparison of what Octavia shows (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.network.backend import BackendError
from kuberaven.network.backends.octavia_fields import (
    OCTAVIA_TIMEOUTS,
    OVN_LB_METHOD,
    default_lb_method,
    differs,
    given,
    listener_fields,
    member_body,
    monitor_fields,
    persistence,
    persistence_for,
    persistence_of,
)
from kuberaven.network.drivers.load_balancers import (
    DEFAULT_LB_METHOD,
    HealthMonitor,
    ListenerOptions,
    MemberSpec,
    Persistence,
    Timeouts,
)


@pytest.mark.parametrize(
    ("current", "wanted", "expected"),
    [
        (["10.0.0.0/8", "192.168.0.0/16"], ["192.168.0.0/16", "10.0.0.0/8"], False),  # lists: order is not a change
        (None, None, False),
        ([], None, False),  # no CIDRs shown and none wanted
        (["10.0.0.0/8"], None, True),
        ({"X-Forwarded-For": "True"}, {"X-Forwarded-For": "true"}, False),  # Octavia shows header values its way
        ({}, {"X-Forwarded-For": "true"}, True),
        ({"X-Forwarded-For": "true", "X-Other": "1"}, {}, False),  # only the keys we set are compared
        (-1, -1, False),
        (100, -1, True),
    ],
)
def test_what_octavia_shows_differs_only_where_we_set_something_else(current: Any, wanted: Any, expected: bool) -> None:
    assert differs(current, wanted) is expected


def test_a_listener_without_options_goes_back_to_octavias_defaults() -> None:
    assert listener_fields(ListenerOptions()) == {
        "allowed CIDRs": {"allowed_cidrs": None},
        "connection-limit": {"connection_limit": -1},
        "timeouts": OCTAVIA_TIMEOUTS,
        "x-forwarded-for": {},
    }


def test_a_listeners_options_become_octavias_fields() -> None:
    options = ListenerOptions(
        allowed_cidrs=("10.0.0.0/8",),
        connection_limit=50,
        timeouts=Timeouts(client_data=1000),
        x_forwarded_for=True,
    )
    assert listener_fields(options) == {
        "allowed CIDRs": {"allowed_cidrs": ["10.0.0.0/8"]},
        "connection-limit": {"connection_limit": 50},
        "timeouts": {**OCTAVIA_TIMEOUTS, "timeout_client_data": 1000},
        "x-forwarded-for": {"insert_headers": {"X-Forwarded-For": "true"}},
    }


def test_session_persistence_round_trips_through_what_octavia_shows() -> None:
    assert persistence(None) is None
    assert persistence(Persistence("SOURCE_IP")) == {"type": "SOURCE_IP"}
    wanted = persistence(Persistence("SOURCE_IP", timeout=300))
    assert wanted == {"type": "SOURCE_IP", "persistence_timeout": 300}
    shown = {"type": "SOURCE_IP", "persistence_timeout": 300, "cookie_name": None, "persistence_granularity": None}
    assert persistence_of(shown) == wanted
    assert persistence_of(None) is None
    assert persistence_of({}) is None


def test_the_ovn_provider_is_asked_for_no_session_persistence_and_the_service_is_told_why() -> None:
    """The ovn driver stores a pool's session_persistence and never applies it: a ClientIP Service there would
    show an affinity its packets do not have (test_kube_proxy.py sees one client reach both members)."""
    affinity = Persistence("SOURCE_IP", timeout=300)
    assert persistence_for("amphora", affinity) == ({"type": "SOURCE_IP", "persistence_timeout": 300}, None)
    wanted, why = persistence_for("ovn", affinity)
    assert wanted is None and why is not None and "SOURCE_IP_PORT" in why, why
    assert persistence_for("ovn", None) == (None, None)  # none asked: nothing to say


def test_a_member_needs_a_subnet_and_carries_its_monitor_port_only_when_it_has_one() -> None:
    plain = member_body(MemberSpec("ns/web-1:80", "10.1.0.5", 80), "subnet-1", ["t"])
    assert plain == {
        "name": "ns/web-1:80",
        "address": "10.1.0.5",
        "protocol_port": 80,
        "subnet_id": "subnet-1",
        "tags": ["t"],
    }
    probed = member_body(MemberSpec("ns/web-1:80", "10.1.0.5", 80, monitor_port=8080), "subnet-1", [])
    assert probed["monitor_port"] == 8080
    with pytest.raises(BackendError, match="ns/web-1:80"):
        member_body(MemberSpec("ns/web-1:80", "10.1.0.5", 80), None, [])


def test_the_ovn_provider_gets_the_one_algorithm_it_offers() -> None:
    assert default_lb_method("ovn") == OVN_LB_METHOD
    assert default_lb_method("amphora") == DEFAULT_LB_METHOD
    assert default_lb_method(None) == DEFAULT_LB_METHOD


def test_a_health_monitors_changeable_fields_and_unset_fields_left_out() -> None:
    tcp = HealthMonitor("TCP", delay=5, timeout=3, max_retries=1, max_retries_down=3)
    assert monitor_fields(tcp) == {"delay": 5, "timeout": 3, "max_retries": 1, "max_retries_down": 3}
    http = HealthMonitor("HTTP", delay=5, timeout=3, max_retries=1, max_retries_down=3, url_path="/healthz")
    assert monitor_fields(http)["url_path"] == "/healthz"
    assert given(provider="ovn", flavor_id=None, availability_zone=None) == {"provider": "ovn"}
