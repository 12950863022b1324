"""can-reach to a Service and from outside (network/rules/reach_service.py, reach.py), from plain values.

A load balancer as a backend holds it (views.py), pods' ports and groups as
the translation makes them: each row is a question, its verdict and the hop
that decides it.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kuberaven.network.drivers.security_groups import SecurityGroupRule
from kuberaven.network.rules.reach import Endpoint, Group, ReachError, from_outside, parse_question
from kuberaven.network.rules.reach_service import ServiceAnswer, reach_service
from kuberaven.network.views import ListenerView, LoadBalancerView, MemberView

VIP, FLOATING = "10.0.0.20", "172.24.4.9"
OUTSIDE, PARTNER = "203.0.113.7", "198.51.100.3"
SERVICES_CIDR = SecurityGroupRule("ingress", "10.0.0.0/24", None, None, None, "load balancers (the Services' CIDR)")
GROUPS = {
    "g-ns": Group("g-ns", None, frozenset()),
    "g-allow-egress": Group("g-allow-egress", None, frozenset()),
    "g-allow-ingress": Group("g-allow-ingress", None, frozenset()),
    "g-only-a": Group(
        "g-only-a",
        "shop/only-a",
        frozenset({"ingress"}),
        (SecurityGroupRule("ingress", "10.1.0.5/32", "tcp", 8080, 8080, "ingress rule 0"), SERVICES_CIDR),
    ),
    "g-partner": Group(
        "g-partner",
        "shop/partner",
        frozenset({"ingress"}),
        (SecurityGroupRule("ingress", "198.51.100.0/24", "tcp", 8080, 8080, "ingress rule 0"),),
    ),
    "g-no-egress": Group("g-no-egress", "shop/no-egress", frozenset({"egress"})),
}
A = Endpoint("shop/a", "10.1.0.5", ("g-ns",))
C = Endpoint("shop/c", "10.1.0.7", ("g-ns",))
D = Endpoint("shop/d", "10.1.0.8", ("g-no-egress", "g-allow-ingress"))
WEB1 = Endpoint("shop/web-1", "10.1.0.10", ("g-only-a", "g-allow-egress"))
WEB2 = Endpoint("shop/web-2", "10.1.0.11", ("g-ns",))
PARTNER_WEB = Endpoint("shop/web-3", "10.1.0.12", ("g-partner", "g-allow-egress"))
PODS = {e.address: e for e in (A, C, D, WEB1, WEB2, PARTNER_WEB)}


def member(pod: Endpoint, port: int = 8080) -> MemberView:
    return MemberView(f"{pod.name}:{port}", pod.address, port)


def lb(*members: Endpoint, **changes: object) -> LoadBalancerView:
    listener = ListenerView("shop/web:TCP:80", "TCP", 80, (), tuple(member(m) for m in members))
    made = LoadBalancerView("lb-1", "shop/web", VIP, "ovn", (FLOATING,), (listener,))
    return replace(made, **changes)  # type: ignore[arg-type]  # the table's own changes


def with_ranges(service: LoadBalancerView, *cidrs: str) -> LoadBalancerView:
    return replace(service, listeners=tuple(replace(ls, allowed_cidrs=cidrs) for ls in service.listeners))


OPEN = lb(WEB2)
ONLY_A = lb(WEB1)
BOTH = lb(WEB1, WEB2)
AMPHORA = replace(ONLY_A, provider="amphora")
RANGES = with_ranges(OPEN, "198.51.100.0/24")
TWO_PORTS = replace(
    OPEN, listeners=(*OPEN.listeners, ListenerView("shop/web:TCP:443", "TCP", 443, (), (member(WEB2, 8443),)))
)
HTTP = replace(OPEN, listeners=(replace(OPEN.listeners[0], protocol="HTTP", name="shop/web:HTTP:80"),))

# (source, service, port, protocol, allowed, the deciding hop, what the reason says)
TABLE = [
    pytest.param(OUTSIDE, OPEN, 80, "tcp", True, None, "allowed by default", id="outside: open member"),
    pytest.param(
        OUTSIDE,
        lb(WEB2, floating_addresses=()),
        80,
        "tcp",
        False,
        "floating_ip",
        "has no floating IP",
        id="outside: no floating IP",
    ),
    pytest.param(
        OUTSIDE,
        OPEN,
        443,
        "tcp",
        False,
        "listener",
        "has no listener for TCP port 443 (it has TCP:80)",
        id="outside: no listener on the port",
    ),
    pytest.param(OUTSIDE, OPEN, 80, "udp", False, "listener", "no listener for UDP port 80", id="outside: udp"),
    pytest.param(
        OUTSIDE,
        RANGES,
        80,
        "tcp",
        False,
        "allowed_cidrs",
        "allowed_cidrs of shop/web:TCP:80 (198.51.100.0/24) leave out 203.0.113.7",
        id="outside: ranges",
    ),
    pytest.param(
        PARTNER,
        RANGES,
        80,
        "tcp",
        True,
        None,
        "allowed_cidrs of shop/web:TCP:80 include 198.51.100.3",
        id="outside: in the ranges",
    ),
    pytest.param(
        OUTSIDE,
        ONLY_A,
        80,
        "tcp",
        False,
        "ingress",
        "no member lets it in: shop/web-1 is selected by policies shop/only-a for ingress, no rule allows it",
        id="outside: the member's policy keeps it out",
    ),
    pytest.param(
        PARTNER,
        lb(PARTNER_WEB),
        80,
        "tcp",
        True,
        None,
        "allowed by policy shop/partner ingress rule 0",
        id="outside: the member's ipBlock lets it in",
    ),
    pytest.param(
        OUTSIDE, BOTH, 80, "tcp", False, "ingress", "only 1 of 2 members let it in", id="outside: one member of two"
    ),
    pytest.param(
        OUTSIDE,
        AMPHORA,
        80,
        "tcp",
        True,
        None,
        "load balancers (the Services' CIDR)",
        id="outside: amphora proxies, the member sees the VIP",
    ),
    pytest.param(OUTSIDE, lb(), 80, "tcp", False, None, "has no members", id="outside: no members"),
    pytest.param(
        OUTSIDE,
        HTTP,
        80,
        "tcp",
        True,
        None,
        "listener shop/web:HTTP:80 takes it",
        id="outside: an HTTP listener takes TCP",
    ),
    pytest.param(
        A,
        ONLY_A,
        80,
        "tcp",
        True,
        None,
        "allowed by policy shop/only-a ingress rule 0",
        id="pod: let in by the member's policy",
    ),
    pytest.param(C, ONLY_A, 80, "tcp", False, "ingress", "no rule allows it", id="pod: kept out by it"),
    pytest.param(
        D,
        OPEN,
        80,
        "tcp",
        False,
        "egress",
        "shop/d is selected by policies shop/no-egress for egress, no rule allows it",
        id="pod: no egress",
    ),
    pytest.param(
        WEB1,
        ONLY_A,
        80,
        "tcp",
        True,
        None,
        "load balancers (the Services' CIDR)",
        id="pod: its own Service (hairpin: the VIP is the source)",
    ),
    pytest.param(C, OPEN, None, "tcp", True, None, "listener shop/web:TCP:80 takes it", id="pod: the only port"),
    pytest.param(C, RANGES, 80, "tcp", False, "allowed_cidrs", "leave out 10.1.0.7", id="pod: ranges hold in too"),
    pytest.param(
        C,
        lb(Endpoint("elsewhere/x", "192.0.2.1", ())),
        80,
        "tcp",
        True,
        None,
        "has no port of the cluster's",
        id="pod: a member outside the cluster's ports",
    ),
]


@pytest.mark.parametrize(("source", "service", "port", "protocol", "allowed", "decides", "says"), TABLE)
def test_reach_a_service(
    source: Endpoint | str,
    service: LoadBalancerView,
    port: int | None,
    protocol: str,
    allowed: bool,
    decides: str | None,
    says: str,
) -> None:
    answer = reach_service(source, service, PODS, GROUPS, port, protocol)
    assert answer.allowed is allowed, answer.reason
    assert says in answer.reason, answer.reason
    stopped = [hop.hop for hop in answer.hops if not hop.allowed]
    assert (stopped[0] if stopped else None) == decides, answer.hops


def test_every_hop_is_named_with_its_policy_and_rule() -> None:
    answer = reach_service(A, BOTH, PODS, GROUPS, 80)
    assert [(h.hop, h.at, h.allowed, h.policy, h.rule) for h in answer.hops] == [
        ("egress", "shop/a", True, None, None),
        ("listener", "shop/web:TCP:80", True, None, None),
        ("allowed_cidrs", "shop/web:TCP:80", True, None, None),
        ("ingress", "shop/web-1:8080", True, "shop/only-a", "ingress rule 0"),
        ("ingress", "shop/web-2:8080", True, None, None),
    ]
    document = answer.as_dict()
    assert document["allowed"] is True and document["members"] == {"total": 2, "allowing": 2}
    assert document["hops"][3] == {  # type: ignore[index]
        "hop": "ingress",
        "at": "shop/web-1:8080",
        "allowed": True,
        "reason": "ingress of shop/web-1 allowed by policy shop/only-a ingress rule 0",
        "policy": "shop/only-a",
        "rule": "ingress rule 0",
    }


def test_a_partial_answer_counts_the_members() -> None:
    answer = reach_service(OUTSIDE, BOTH, PODS, GROUPS, 80)
    assert isinstance(answer, ServiceAnswer) and (answer.members, answer.members_allowing) == (2, 1)


def test_source_ranges_the_provider_left_out_are_named() -> None:
    refused = ["allowed CIDRs of shop/web:TCP:80: OVN provider does not support allowed_cidrs option"]
    answer = reach_service(OUTSIDE, OPEN, PODS, GROUPS, 80, refused=refused)
    assert answer.allowed
    ranges = next(h for h in answer.hops if h.hop == "allowed_cidrs")
    assert ranges.reason == (
        "listener shop/web:TCP:80 has no allowed_cidrs (the Service's source ranges were left out: "
        "allowed CIDRs of shop/web:TCP:80: OVN provider does not support allowed_cidrs option)"
    )


def test_a_port_must_be_named_when_the_service_has_several() -> None:
    with pytest.raises(ReachError, match="shop/web listens on TCP ports 80, 443: name one with --port"):
        reach_service(OUTSIDE, TWO_PORTS, PODS, GROUPS, None)
    assert reach_service(OUTSIDE, TWO_PORTS, PODS, GROUPS, 443).hops[1].at == "shop/web:TCP:443"


def test_from_outside_to_a_pod_is_its_ingress() -> None:
    assert from_outside(OUTSIDE, WEB2, GROUPS, 8080).allowed
    denied = from_outside(OUTSIDE, WEB1, GROUPS, 8080)
    assert not denied.allowed and [h.hop for h in denied.hops] == ["ingress"]
    assert from_outside(PARTNER, PARTNER_WEB, GROUPS, 8080).reason.endswith("shop/partner ingress rule 0")


@pytest.mark.parametrize(
    ("source", "target", "address", "service"),
    [
        ("shop/a", "shop/web", False, False),
        ("shop/a", "shop/svc/web", False, True),
        ("203.0.113.7", "shop/service/web", True, True),
        ("2001:db8::7", "shop/web", True, False),
    ],
)
def test_questions(source: str, target: str, address: bool, service: bool) -> None:
    question = parse_question(source, target, 80, "tcp")
    assert (question.source_is_address, question.target_is_service, question.protocol) == (address, service, "tcp")
    assert question.target_name == ("shop", "web")


@pytest.mark.parametrize(
    ("source", "target", "port", "protocol", "message"),
    [
        ("web", "shop/web", None, "TCP", "'web' is not NAMESPACE/POD"),
        ("300.1.2.3", "shop/web", None, "TCP", "'300.1.2.3' is not NAMESPACE/POD"),
        ("shop/a", "203.0.113.7", None, "TCP", "'203.0.113.7' is not NAMESPACE/POD or NAMESPACE/svc/SERVICE"),
        ("shop/a", "shop/svc/", None, "TCP", "'shop/svc/' is not NAMESPACE/POD or NAMESPACE/svc/SERVICE"),
        ("shop/a", "shop/pods/web", None, "TCP", "is not NAMESPACE/POD or NAMESPACE/svc/SERVICE"),
        ("shop/a", "shop/svc/web", 0, "TCP", "port 0 is not between 1 and 65535"),
        ("shop/a", "shop/svc/web", 80, "ICMP", "protocol 'ICMP' is not one of TCP, UDP, SCTP"),
    ],
)
def test_bad_questions(source: str, target: str, port: int | None, protocol: str, message: str) -> None:
    with pytest.raises(ReachError, match=re.escape(message)):
        parse_question(source, target, port, protocol)
