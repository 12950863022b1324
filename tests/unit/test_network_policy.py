"""NetworkPolicy ──► security groups (network/rules/policy.py) ──► can-reach (network/rules/reach.py), from plain dicts.

The table is the Kubernetes NetworkPolicy documentation's examples, each
checked through translation and can-reach: what the documentation says the
policy allows is allowed, and what it does not is denied.
"""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.network.drivers.security_groups import SecurityGroupRule
from kuberaven.network.rules.policy import (
    SERVICE_RULE,
    AllowGroups,
    MissingGroup,
    NamedPort,
    PodInfo,
    pod_info,
    policy_directions,
    policy_group,
    policy_groups,
    port_groups,
    remaining_cidrs,
    selects,
)
from kuberaven.network.rules.reach import (
    Endpoint,
    Group,
    Reach,
    ReachError,
    can_reach,
    check_port,
    pod_name,
    protocol_name,
)

SERVICE_CIDR = "10.0.0.0/24"
NAMESPACES = {"default": {}, "myproject": {"project": "myproject"}, "other": {"project": "other"}}
WEB = PodInfo("u-web", "default", "web", {"role": "db"}, "172.17.0.10", (NamedPort("http", "tcp", 8080),))
FRONTEND = PodInfo("u-fe", "default", "frontend", {"role": "frontend"}, "172.17.0.11")
MINE = PodInfo("u-mine", "myproject", "client", {"role": "frontend"}, "172.17.0.12")
MINE_OTHER = PodInfo("u-mine2", "myproject", "batch", {"role": "batch"}, "172.17.0.13")
OTHER = PodInfo("u-other", "other", "client", {"role": "frontend"}, "172.17.1.14")
PODS = [WEB, FRONTEND, MINE, MINE_OTHER, OTHER]
ALLOW = AllowGroups("allow-ingress", "allow-egress")
OUTSIDE = PodInfo("u-out", "other", "outside", {}, "192.168.5.1")


def netpol(name: str, spec: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": f"p-{name}"}, "spec": spec}


DENY_INGRESS = netpol("default-deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]})
ALLOW_ALL_INGRESS = netpol("allow-all-ingress", {"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]})
DENY_EGRESS = netpol("default-deny-egress", {"podSelector": {}, "policyTypes": ["Egress"]})
FROM_NAMESPACE = netpol(
    "from-myproject",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"project": "myproject"}}}]}],
    },
)
AND_SELECTORS = netpol(
    "and",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [
            {
                "from": [
                    {
                        "namespaceSelector": {"matchLabels": {"project": "myproject"}},
                        "podSelector": {"matchLabels": {"role": "frontend"}},
                    }
                ]
            }
        ],
    },
)
OR_SELECTORS = netpol(
    "or",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}},
                ]
            }
        ],
    },
)
IP_BLOCK = netpol(
    "ip-block",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [
            {
                "from": [{"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}}],
                "ports": [{"protocol": "TCP", "port": 6379}],
            }
        ],
    },
)
PORT_RANGE = netpol(
    "multi-port-egress",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"ipBlock": {"cidr": "172.17.0.0/24"}}],
                "ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}],
            }
        ],
    },
)
NAMED_PORT = netpol(
    "named-port",
    {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}], "ports": [{"port": "http"}]}],
    },
)


def evaluate(
    policies: list[dict[str, Any]], source: PodInfo, target: PodInfo, port: int | None, protocol: str = "tcp"
) -> Reach:
    groups: dict[str, Group] = {}
    ids: dict[str, str] = {}
    for index, policy in enumerate(policies):
        group = policy_group(policy, [*PODS, OUTSIDE], NAMESPACES, SERVICE_CIDR)
        ids[group.policy] = f"g{index}"
        groups[f"g{index}"] = Group(f"g{index}", group.policy, frozenset(group.directions), group.rules)

    def endpoint(pod: PodInfo) -> Endpoint:
        mine = [p for p in policies if p["metadata"]["namespace"] == pod.namespace]
        assert pod.ip is not None
        return Endpoint(
            f"{pod.namespace}/{pod.name}", pod.ip, tuple(port_groups(pod, mine, ids, f"ns-{pod.namespace}", ALLOW))
        )

    return can_reach(endpoint(source), endpoint(target), groups, port, protocol)


# (policies, source, target, port, protocol, allowed)
TABLE = [
    pytest.param([], FRONTEND, WEB, 80, "tcp", True, id="no policy: allowed"),
    pytest.param([DENY_INGRESS], FRONTEND, WEB, 80, "tcp", False, id="default deny ingress"),
    pytest.param([DENY_INGRESS], WEB, OTHER, 80, "tcp", True, id="default deny ingress: egress still open"),
    pytest.param([DENY_INGRESS, ALLOW_ALL_INGRESS], FRONTEND, WEB, 80, "udp", True, id="allow all ingress"),
    pytest.param([DENY_EGRESS], WEB, OTHER, 80, "tcp", False, id="default deny egress"),
    pytest.param([DENY_EGRESS], OTHER, WEB, 80, "tcp", True, id="default deny egress: ingress still open"),
    pytest.param([FROM_NAMESPACE], MINE, WEB, 5432, "tcp", True, id="from namespace: in it"),
    pytest.param([FROM_NAMESPACE], OTHER, WEB, 5432, "tcp", False, id="from namespace: another"),
    pytest.param([FROM_NAMESPACE], FRONTEND, WEB, 5432, "tcp", False, id="from namespace: own namespace"),
    pytest.param([FROM_NAMESPACE], WEB, FRONTEND, 80, "tcp", True, id="from namespace: unselected pod"),
    pytest.param([AND_SELECTORS], MINE, WEB, 80, "tcp", True, id="and: both match"),
    pytest.param([AND_SELECTORS], MINE_OTHER, WEB, 80, "tcp", False, id="and: namespace only"),
    pytest.param([AND_SELECTORS], FRONTEND, WEB, 80, "tcp", False, id="and: pod only"),
    pytest.param([OR_SELECTORS], MINE_OTHER, WEB, 80, "tcp", True, id="or: namespace only"),
    pytest.param([OR_SELECTORS], FRONTEND, WEB, 80, "tcp", True, id="or: pod only"),
    pytest.param([OR_SELECTORS], OTHER, WEB, 80, "tcp", False, id="or: neither"),
    pytest.param([IP_BLOCK], MINE, WEB, 6379, "tcp", True, id="ipBlock: inside"),
    pytest.param([IP_BLOCK], OTHER, WEB, 6379, "tcp", False, id="ipBlock: in except"),
    pytest.param([IP_BLOCK], OUTSIDE, WEB, 6379, "tcp", False, id="ipBlock: outside"),
    pytest.param([IP_BLOCK], MINE, WEB, 6380, "tcp", False, id="ipBlock: another port"),
    pytest.param([IP_BLOCK], MINE, WEB, 6379, "udp", False, id="ipBlock: another protocol"),
    pytest.param([PORT_RANGE], WEB, FRONTEND, 32000, "tcp", True, id="endPort: first"),
    pytest.param([PORT_RANGE], WEB, FRONTEND, 32768, "tcp", True, id="endPort: last"),
    pytest.param([PORT_RANGE], WEB, FRONTEND, 32769, "tcp", False, id="endPort: past"),
    pytest.param([PORT_RANGE], WEB, OTHER, 32000, "tcp", False, id="endPort: outside the block"),
    pytest.param([NAMED_PORT], FRONTEND, WEB, 8080, "tcp", True, id="named port"),
    pytest.param([NAMED_PORT], FRONTEND, WEB, 80, "tcp", False, id="named port: another number"),
    pytest.param([NAMED_PORT], MINE_OTHER, WEB, 8080, "tcp", False, id="named port: another pod"),
]


@pytest.mark.parametrize(("policies", "source", "target", "port", "protocol", "allowed"), TABLE)
def test_documented_examples(
    policies: list[dict[str, Any]], source: PodInfo, target: PodInfo, port: int, protocol: str, allowed: bool
) -> None:
    reach = evaluate(policies, source, target, port, protocol)
    assert reach.allowed is allowed, reach.reason


def test_the_deciding_rule_is_named() -> None:
    allowed = evaluate([FROM_NAMESPACE], MINE, WEB, 80)
    assert (allowed.ingress.policy, allowed.ingress.rule) == ("default/from-myproject", "ingress rule 0")
    assert allowed.egress.reason == "no policy selects myproject/client for egress: allowed by default"
    denied = evaluate([FROM_NAMESPACE, DENY_INGRESS], OTHER, WEB, 80)
    assert denied.reason == (
        "default/web is selected by policies default/default-deny-ingress, default/from-myproject for ingress, "
        "no rule allows it"
    )
    assert evaluate([], WEB, FRONTEND, 80).reason.startswith("no policy selects default/web for egress")


def test_without_a_port_some_traffic_counts() -> None:
    assert evaluate([IP_BLOCK], MINE, WEB, None).allowed
    assert not evaluate([IP_BLOCK], MINE, WEB, None, "udp").allowed


def test_rules_of_the_documented_examples() -> None:
    ip_block = policy_group(IP_BLOCK, PODS, NAMESPACES, SERVICE_CIDR)
    assert ip_block.rules == (
        SecurityGroupRule("ingress", "172.17.0.0/24", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.2.0/23", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.4.0/22", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.8.0/21", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.16.0/20", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.32.0/19", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.64.0/18", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", "172.17.128.0/17", "tcp", 6379, 6379, "ingress rule 0"),
        SecurityGroupRule("ingress", SERVICE_CIDR, description=SERVICE_RULE),
    )
    assert ip_block.selected == {"u-web"} and ip_block.name == "policy:default/ip-block"
    # Peers by selector: one rule per matched pod IP; the VIPs always get in.
    by_namespace = policy_group(FROM_NAMESPACE, PODS, NAMESPACES, SERVICE_CIDR)
    assert [r.remote_cidr for r in by_namespace.rules] == ["172.17.0.12/32", "172.17.0.13/32", SERVICE_CIDR]
    deny = policy_group(DENY_EGRESS, PODS, NAMESPACES, SERVICE_CIDR)
    assert deny.rules == () and deny.directions == ("egress",) and deny.selected == {"u-web", "u-fe"}


def test_rules_follow_pods_and_labels() -> None:
    before = policy_group(FROM_NAMESPACE, PODS, NAMESPACES, SERVICE_CIDR)
    moved = PodInfo("u-mine2", "myproject", "batch", {"role": "batch"}, "172.17.0.99")
    after = policy_group(FROM_NAMESPACE, [WEB, MINE, moved], NAMESPACES, SERVICE_CIDR)
    assert "172.17.0.99/32" in {r.remote_cidr for r in after.rules} and before.digest() != after.digest()
    relabelled = {**NAMESPACES, "myproject": {"project": "gone"}}
    assert [r.remote_cidr for r in policy_group(FROM_NAMESPACE, PODS, relabelled, SERVICE_CIDR).rules] == [SERVICE_CIDR]
    unready = PodInfo("u-new", "myproject", "new", {}, None)  # no IP yet: no rule for it
    assert policy_group(FROM_NAMESPACE, [unready], NAMESPACES, SERVICE_CIDR).rules == before.rules[-1:]


def test_egress_named_ports_resolve_on_the_peers() -> None:
    policy = netpol(
        "egress-named",
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"podSelector": {"matchLabels": {"role": "db"}}}],
                    "ports": [{"port": "http", "protocol": "TCP"}],
                }
            ],
        },
    )
    group = policy_group(policy, PODS, NAMESPACES, SERVICE_CIDR)
    assert group.rules == (SecurityGroupRule("egress", "172.17.0.10/32", "tcp", 8080, 8080, "egress rule 0"),)


def test_policy_types_default_as_kubernetes_does() -> None:
    assert policy_directions({"podSelector": {}}) == ("ingress",)
    assert policy_directions({"podSelector": {}, "egress": [{}]}) == ("ingress", "egress")
    assert policy_directions({"policyTypes": ["Egress"], "ingress": [{}]}) == ("egress",)


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["b"]}]}, False),
        ({"matchExpressions": [{"key": "nope", "operator": "NotIn", "values": ["b"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}, False),
    ],
)
def test_label_selectors(selector: dict[str, Any], selected: bool) -> None:
    assert selects(selector, {"app": "web", "tier": "b"}) is selected


def test_ip_block_except() -> None:
    assert remaining_cidrs("10.0.0.0/24", ["10.0.0.0/25"]) == ["10.0.0.128/25"]
    assert remaining_cidrs("10.0.0.0/24", ["10.0.0.0/16"]) == []
    assert remaining_cidrs("10.0.0.0/24", ["192.168.0.0/16", "fd00::/8"]) == ["10.0.0.0/24"]
    assert remaining_cidrs("10.0.0.0/30", ["10.0.0.1/32", "10.0.0.2/32"]) == ["10.0.0.0/32", "10.0.0.3/32"]


def test_port_groups() -> None:
    ids = {"default/default-deny-ingress": "g-in", "default/default-deny-egress": "g-out"}
    assert port_groups(WEB, [], ids, "ns", ALLOW) == ["ns"]
    assert port_groups(WEB, [DENY_INGRESS], ids, "ns", ALLOW) == ["g-in", "allow-egress"]
    assert port_groups(WEB, [DENY_INGRESS, DENY_EGRESS], ids, "ns", ALLOW) == ["g-in", "g-out"]
    assert port_groups(WEB, [FROM_NAMESPACE, DENY_EGRESS], ids | {"default/from-myproject": "g-ns"}, "ns", ALLOW) == [
        "g-ns",
        "g-out",
    ]
    with pytest.raises(MissingGroup, match="default/from-myproject"):
        port_groups(WEB, [FROM_NAMESPACE], ids, "ns", ALLOW)


def test_pod_info_keeps_labels_and_named_ports_only() -> None:
    pod = {
        "metadata": {"namespace": "default", "name": "web", "uid": "u", "labels": {"a": "b"}, "resourceVersion": "42"},
        "spec": {
            "containers": [
                {
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"containerPort": 9090},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    ]
                }
            ]
        },
    }
    info = pod_info(pod, "10.1.2.3")
    assert info.named_ports == (NamedPort("http", "tcp", 8080), NamedPort("dns", "udp", 53))
    assert (info.labels, info.version, info.ip) == ({"a": "b"}, 42, "10.1.2.3")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pod_name("web"), "'web' is not NAMESPACE/POD"),
        (lambda: pod_name("a/b/c"), "'a/b/c' is not NAMESPACE/POD"),
        (lambda: pod_name("/b"), "'/b' is not NAMESPACE/POD"),
        (lambda: protocol_name("icmp"), "protocol 'icmp' is not one of TCP, UDP, SCTP"),
        (lambda: check_port(0), "port 0 is not between 1 and 65535"),
        (lambda: check_port(70000), "port 70000 is not between 1 and 65535"),
    ],
)
def test_bad_questions_are_refused(call: Any, message: str) -> None:
    with pytest.raises(ReachError, match=message):
        call()


def test_policy_groups_are_none_when_no_policy_selects() -> None:
    ids = {"default/default-deny-ingress": "g-in"}
    assert policy_groups(WEB, [], ids, ALLOW) == []
    assert policy_groups(WEB, [FROM_NAMESPACE], {"default/from-myproject": "g"}, ALLOW) == ["g", "allow-egress"]
    assert policy_groups(FRONTEND, [FROM_NAMESPACE], {"default/from-myproject": "g"}, ALLOW) == []
