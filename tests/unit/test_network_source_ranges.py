"""Source ranges as Kubernetes means them (network/rules/source_ranges.py, reach_service.py), from plain values:
outside clients through the external address are admitted only from the ranges, the cluster's own pods and
nodes always; on allowed_cidrs (amphora, embedded) and on the members' groups (ovn), and can-reach agrees.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kuberaven.network.drivers.security_groups import SecurityGroupRule
from kuberaven.network.rules.policy import INGRESS
from kuberaven.network.rules.reach import Endpoint, Group, ReachError, parse_question
from kuberaven.network.rules.reach_service import SourceFilters, reach_service
from kuberaven.network.rules.source_ranges import (
    ALLOWED_CIDRS,
    CLUSTER_GROUP,
    CLUSTER_GROUP_LABEL,
    EXPOSED_PODS,
    MEMBER_GROUPS,
    NOT_ENFORCED,
    PARTLY,
    RANGES_GROUP,
    by_allowed_cidrs,
    by_member_groups,
    cluster_cidrs,
    in_cluster_rules,
    listener_cidrs,
    member_groups,
    node_addresses,
    port_groups_with_ranges,
    ranges_label,
    ranges_rules,
    unselected,
    uses_member_groups,
    with_pods,
)
from kuberaven.network.views import ListenerView, LoadBalancerView, MemberView

RANGES = ("198.51.100.0/24",)
INSIDE, OUTSIDE = "198.51.100.7", "203.0.113.7"
POD_POOL, SERVICES, NODE = "10.64.0.0/12", "10.0.0.0/24", "192.168.1.10"
CLUSTER = cluster_cidrs([POD_POOL], SERVICES, [NODE])
VIP, FLOATING = "10.0.0.20", "172.24.4.9"


def test_the_cluster_s_own_cidrs_are_its_pods_services_and_nodes() -> None:
    nodes: list[dict[str, Any]] = [
        {"status": {"addresses": [{"type": "InternalIP", "address": NODE}, {"type": "Hostname", "address": "n1"}]}},
        {"status": {}},
    ]
    assert node_addresses(nodes) == [NODE]
    assert CLUSTER == ("10.0.0.0/24", "10.64.0.0/12", "192.168.1.10/32")


def test_allowed_cidrs_are_the_ranges_and_the_cluster_s_own_and_none_without_ranges() -> None:
    assert listener_cidrs(RANGES, CLUSTER) == ("10.0.0.0/24", "10.64.0.0/12", "192.168.1.10/32", "198.51.100.0/24")
    assert listener_cidrs((), CLUSTER) == ()  # no ranges: every source, as before


def test_only_the_ovn_provider_holds_the_ranges_on_its_members() -> None:
    assert uses_member_groups("ovn") and uses_member_groups("OVN")
    assert not uses_member_groups("amphora") and not uses_member_groups(None)  # None: the embedded backend


def test_the_groups_rules_let_in_the_cluster_and_the_ranges_on_the_target_ports_only() -> None:
    assert [(r.direction, r.remote_cidr, r.protocol) for r in in_cluster_rules(CLUSTER)] == [
        *((INGRESS, cidr, None) for cidr in CLUSTER),
        ("egress", "0.0.0.0/0", None),
        ("egress", "::/0", None),
    ]
    rules = ranges_rules(RANGES, [("tcp", 8080), ("tcp", 8080), ("udp", 53)])
    assert [(r.remote_cidr, r.protocol, r.port_min, r.port_max) for r in rules] == [
        ("198.51.100.0/24", "tcp", 8080, 8080),
        ("198.51.100.0/24", "udp", 53, 53),
    ]


RANGED = {EXPOSED_PODS: ["web-1", "web-2"], RANGES_GROUP: "g-ranges-web", CLUSTER_GROUP: "g-cluster"}
OTHER_RANGED = {EXPOSED_PODS: ["web-1"], RANGES_GROUP: "g-ranges-api", CLUSTER_GROUP: "g-cluster"}
OPEN = {EXPOSED_PODS: ["web-2"], RANGES_GROUP: None, CLUSTER_GROUP: None}


@pytest.mark.parametrize(
    ("pod", "services", "groups"),
    [
        pytest.param("web-1", [RANGED], ("g-cluster", "g-ranges-web"), id="exposed by a ranged Service"),
        pytest.param("web-1", [RANGED, OTHER_RANGED], ("g-cluster", "g-ranges-api", "g-ranges-web"), id="two"),
        pytest.param("web-2", [RANGED, OPEN], None, id="also exposed by a Service open to all: kept open"),
        pytest.param("client", [RANGED], None, id="not a member"),
        pytest.param("web-1", [{"load_balancer": "lb-1"}], None, id="a ClusterIP Service exposes nothing"),
    ],
)
def test_a_member_s_port_gets_the_ranges_groups_of_the_services_exposing_it(
    pod: str, services: list[dict[str, object]], groups: tuple[str, ...] | None
) -> None:
    assert member_groups(pod, services) == groups


def test_a_port_a_policy_selects_keeps_the_policy_s_groups() -> None:
    ranged = ("g-cluster", "g-ranges-web")
    assert port_groups_with_ranges(["g-ns"], "g-ns", ranged) == list(ranged)
    assert port_groups_with_ranges(["g-ns"], "g-ns", None) == ["g-ns"]
    assert port_groups_with_ranges(["g-policy", "g-allow-egress"], "g-ns", ranged) == ["g-policy", "g-allow-egress"]
    ours = {"g-cluster", "g-ranges-web"}
    assert unselected(["g-ns"], "g-ns", ours) and unselected(list(ranged), "g-ns", ours)
    assert not unselected(["g-policy", "g-allow-egress"], "g-ns", ours) and not unselected([], "g-ns", ours)


def test_the_condition_says_how_the_ranges_hold_and_on_which_members_not() -> None:
    assert by_allowed_cidrs(RANGES, CLUSTER, []).how == ALLOWED_CIDRS
    refused = by_allowed_cidrs(RANGES, CLUSTER, ["allowed CIDRs of shop/web:TCP:80: OVN provider does not support"])
    assert refused.how == NOT_ENFORCED and not refused.enforced
    assert by_member_groups(RANGES, 2, {}).how == MEMBER_GROUPS
    partly = by_member_groups(RANGES, 1, {"web-2": "a NetworkPolicy selects it"})
    assert partly.how == PARTLY and "web-2: a NetworkPolicy selects it" in partly.message and not partly.enforced
    assert by_member_groups(RANGES, 0, {"web-2": "why"}).how == NOT_ENFORCED


# -- can-reach with the ranges where each provider holds them ------------------------------------------------

CLIENT = Endpoint("shop/client", "10.64.1.5", ("g-ns",))
WEB = Endpoint("shop/web-1", "10.64.1.10", ("g-cluster", "g-ranges-web"))  # ovn: its groups hold the ranges
OPEN_WEB = Endpoint("shop/web-1", "10.64.1.10", ("g-ns",))
GROUPS = {
    "g-ns": Group("g-ns", None, frozenset(), (SecurityGroupRule(INGRESS, "0.0.0.0/0"),)),
    "g-cluster": Group("g-cluster", CLUSTER_GROUP_LABEL, frozenset({INGRESS}), tuple(in_cluster_rules(CLUSTER))),
    "g-ranges-web": Group(
        "g-ranges-web",
        ranges_label("shop/web"),
        frozenset({INGRESS}),
        tuple(ranges_rules(RANGES, [("tcp", 8080)])),
    ),
}


def service(provider: str | None, allowed: tuple[str, ...]) -> LoadBalancerView:
    listener = ListenerView("shop/web:TCP:80", "TCP", 80, allowed, (MemberView("shop/web-1:8080", WEB.address, 8080),))
    return LoadBalancerView("lb-1", "shop/web", VIP, provider, (FLOATING,), (listener,))


OVN = service("ovn", ())
AMPHORA = service("amphora", listener_cidrs(RANGES, CLUSTER))
EMBEDDED = replace(AMPHORA, provider=None)


@pytest.mark.parametrize(
    ("view", "member", "source", "allowed", "says"),
    [
        pytest.param(
            OVN,
            WEB,
            INSIDE,
            True,
            "source ranges of Service shop/web from 198.51.100.0/24 to tcp port 8080",
            id="ovn in",
        ),
        pytest.param(
            OVN,
            WEB,
            OUTSIDE,
            False,
            "selected by policies source ranges of Service shop/web, the cluster's own addresses for ingress, no rule",
            id="ovn outside",
        ),
        pytest.param(OVN, WEB, CLIENT, True, "by policy the cluster's own addresses from 10.64.0.0/12", id="ovn pod"),
        pytest.param(AMPHORA, OPEN_WEB, INSIDE, True, "allowed_cidrs of shop/web:TCP:80 include", id="amphora in"),
        pytest.param(AMPHORA, OPEN_WEB, OUTSIDE, False, "leave out 203.0.113.7", id="amphora outside"),
        pytest.param(AMPHORA, OPEN_WEB, CLIENT, True, "include 10.64.1.5", id="amphora pod"),
        pytest.param(EMBEDDED, OPEN_WEB, CLIENT, True, "include 10.64.1.5", id="embedded pod"),
    ],
)
def test_can_reach_admits_outside_clients_only_from_the_ranges_and_pods_always(
    view: LoadBalancerView, member: Endpoint, source: Endpoint | str, allowed: bool, says: str
) -> None:
    on_members = RANGES if view.provider == "ovn" else ()
    answer = reach_service(source, view, {member.address: member}, GROUPS, 80, "tcp", (), on_members)
    assert answer.allowed is allowed, answer.reason
    assert says in answer.reason, answer.reason
    if on_members:
        hop = next(h for h in answer.hops if h.hop == "allowed_cidrs")
        assert "source ranges (198.51.100.0/24) are on the members' security groups" in hop.reason


INSIDE_POD = Endpoint("shop/inside", "198.51.100.20", ("g-ns",))  # a pod whose address the ranges hold


@pytest.mark.parametrize(
    ("view", "member", "source", "filtered", "allowed", "says"),
    [
        pytest.param(OVN, WEB, CLIENT, RANGES, False, "the pods' networks refuse shop/client (10.64.1.5) at", id="ovn"),
        pytest.param(AMPHORA, OPEN_WEB, CLIENT, RANGES, False, "outside the source ranges of shop/web", id="amphora"),
        pytest.param(OVN, WEB, INSIDE_POD, RANGES, True, "198.51.100.20 is in the source ranges", id="ovn in"),
        pytest.param(AMPHORA, OPEN_WEB, CLIENT, None, True, "include 10.64.1.5", id="not filtered"),
    ],
)
def test_through_the_ingress_address_pods_are_held_to_the_ranges_where_the_pods_networks_filter(
    view: LoadBalancerView,
    member: Endpoint,
    source: Endpoint,
    filtered: tuple[str, ...] | None,
    allowed: bool,
    says: str,
) -> None:
    on_members = RANGES if view.provider == "ovn" else ()
    ingress = SourceFilters(True, filtered)
    answer = reach_service(source, view, {member.address: member}, GROUPS, 80, "tcp", (), on_members, ingress)
    assert answer.allowed is allowed, answer.reason
    assert says in answer.reason, answer.reason
    assert [hop.hop for hop in answer.hops][:2] == ["egress", "floating_ip"]
    # The ClusterIP: open to the pods whatever the ranges.
    assert reach_service(source, view, {member.address: member}, GROUPS, 80, "tcp", (), on_members).allowed


def test_the_ingress_way_needs_a_floating_ip_and_a_service() -> None:
    answer = reach_service(
        CLIENT,
        replace(OVN, floating_addresses=()),
        {WEB.address: WEB},
        GROUPS,
        80,
        "tcp",
        (),
        RANGES,
        SourceFilters(True, RANGES),
    )
    assert not answer.allowed and "has no floating IP" in answer.reason
    with pytest.raises(ReachError, match="via ingress: 'shop/web-1' is a pod"):
        parse_question("shop/client", "shop/web-1", via="ingress")
    with pytest.raises(ReachError, match="via 'floating' is not one of cluster-ip, ingress"):
        parse_question("shop/client", "shop/svc/web", via="floating")


def test_the_condition_says_whether_pods_are_held_to_the_ranges_at_the_ingress_address() -> None:
    held = by_member_groups(RANGES, 2, {})
    assert with_pods(held, FLOATING, True, None) == replace(
        held, message=f"{held.message}; pods of the cluster outside them are refused at {FLOATING}"
    )
    assert with_pods(held, FLOATING, False, "that takes X").message == f"{held.message}; that takes X"  # type: ignore[union-attr]
    assert with_pods(held, None, False, None) is held
    assert with_pods(None, FLOATING, True, None) is None
