"""network/rules/listing.py: translation rows (and the embedded backend's parts) → the rows people read, plain data."""

from __future__ import annotations

import json

import pytest

from kuberaven.network.drivers.load_balancers import MemberSpec
from kuberaven.network.drivers.security_groups import SecurityGroupRule
from kuberaven.network.rules.listing import (
    POOLS,
    Resource,
    Translated,
    describe_rule,
    group_names,
    load_balancer_rows,
    network_rows,
    policy_rows,
    port_rows,
    recorded_pools,
)
from kuberaven.network.rules.services import ListenerSpec

SHOP = Translated(
    "k",
    "Namespace",
    None,
    "shop",
    "embedded",
    {"network": "1", "subnet": "2", "cidr": "10.0.0.0/24", "gateway": "10.0.0.1", "security_group": "3"},
)
POLICY = Translated(
    "k", "NetworkPolicy", "shop", "web-in", "embedded", {"security_group": "9", "directions": ["ingress"], "rules": 2}
)
WEB = Translated(
    "k",
    "Pod",
    "shop",
    "web",
    "embedded",
    {
        "port": "5",
        "address": "10.0.0.5",
        "mac": "fa:16:3e:00:00:05",
        "node": "n1",
        "network": "1",
        "subnet": "2",
        "security_groups": ["3", "9"],
    },
)
CLIENT = Translated("k", "Pod", "shop", "client", "embedded", {"port": "6", "security_groups": ["3"]})
SERVICE = Translated(
    "k",
    "Service",
    "shop",
    "front",
    "embedded",
    {
        "load_balancer": "20",
        "vip_address": "10.96.0.10",
        "floating_address": None,
        "floating_error": "no external network",
        "members": 1,
        "listeners": ["TCP:80"],
    },
)


def test_networks_count_their_ports() -> None:
    [row] = network_rows([SHOP], {("k", "shop"): 2})
    assert row == {
        "cluster": "k",
        "namespace": "shop",
        "backend": "embedded",
        "network": "1",
        "subnet": "2",
        "cidr": "10.0.0.0/24",
        "gateway": "10.0.0.1",
        "security_group": "3",
        "ports": 2,
    }
    assert network_rows([SHOP], {})[0]["ports"] == 0


def test_ports_name_who_made_each_security_group() -> None:
    [row] = port_rows([WEB], group_names([SHOP], [POLICY]))
    assert row["security_groups"] == [{"id": "3", "from": "namespace shop"}, {"id": "9", "from": "policy shop/web-in"}]
    assert (row["pod"], row["address"], row["node"]) == ("web", "10.0.0.5", "n1")
    assert port_rows([WEB], {})[0]["security_groups"][0]["from"] == ""  # a group nobody claims (yet)


def test_load_balancers_nest_listeners_pools_and_members_of_the_embedded_backend() -> None:
    parts = [
        Resource(21, "listener", "TCP:80", 20, {"protocol": "TCP", "port": 80, "allowed_cidrs": ["1.2.3.0/24"]}),
        Resource(22, "pool", "TCP:80", 21, {"protocol": "TCP"}),
        Resource(24, "member", "web", 22, {"address": "10.0.0.5", "port": 8080}),
        Resource(23, "member", "web-2", 22, {"address": "10.0.0.7", "port": 8080}),
        Resource(31, "listener", "TCP:81", 30, {"protocol": "TCP", "port": 81}),  # another load balancer's
    ]
    [row] = load_balancer_rows([SERVICE], parts)
    assert (row["vip_address"], row["floating_ip"]) == ("10.96.0.10", None)
    assert row["floating_error"] == "no external network"
    [listener] = row["listeners"]
    assert (listener["protocol"], listener["port"], listener["allowed_cidrs"]) == ("TCP", 80, ["1.2.3.0/24"])
    assert [m["name"] for m in listener["pool"]["members"]] == ["web-2", "web"]  # in id order


def test_load_balancers_of_another_backend_keep_the_names_the_translation_recorded() -> None:
    """A state written before the translation kept each listener's members: its listener names still list."""
    service = Translated("k", "Service", "shop", "front", "openstack", {**SERVICE.state, "load_balancer": "9a-uuid"})
    [row] = load_balancer_rows([service], [])
    assert row["listeners"] == [{"name": "TCP:80"}] and row["members"] == 1


def test_load_balancers_of_another_backend_point_to_the_members_the_translation_set() -> None:
    """The openstack backend's pools live in Octavia: the row has the members the reconciler set, in the embedded
    rows' shape (listener protocol and port, pool → members), which the picture and `net get` read."""
    web = ListenerSpec(
        "shop/front:TCP:80",
        "TCP",
        80,
        (MemberSpec("shop/web:8080", "10.0.0.5", 8080, 8081), MemberSpec("shop/web-2:8080", "10.0.0.7", 8080)),
        pool_protocol="PROXY",
    )
    dns = ListenerSpec("shop/front:UDP:53", "UDP", 53)  # no endpoint yet
    state = {
        **SERVICE.state,
        "load_balancer": "9a-uuid",
        "listeners": [web.name, dns.name],
        "members": 2,
        POOLS: recorded_pools([web, dns]),
    }
    stored = json.loads(json.dumps(state))  # as the translation row keeps it: JSON
    [row] = load_balancer_rows([Translated("k", "Service", "shop", "front", "openstack", stored)], [])
    assert row["members"] == 2
    assert row["listeners"] == [
        {
            "name": "shop/front:TCP:80",
            "protocol": "TCP",
            "port": 80,
            "pool": {
                "protocol": "PROXY",
                "members": [
                    {"name": "shop/web:8080", "address": "10.0.0.5", "port": 8080},
                    {"name": "shop/web-2:8080", "address": "10.0.0.7", "port": 8080},
                ],
            },
        },
        {"name": "shop/front:UDP:53", "protocol": "UDP", "port": 53, "pool": {"protocol": "UDP", "members": []}},
    ]
    [embedded] = load_balancer_rows(
        [SERVICE],
        [
            Resource(21, "listener", "TCP:80", 20, {"protocol": "TCP", "port": 80}),
            Resource(22, "pool", "TCP:80", 21, {"protocol": "TCP"}),
            Resource(23, "member", "shop/web:8080", 22, {"address": "10.0.0.5", "port": 8080}),
        ],
    )
    # the keys the readers use (protocol, port, pool.members[].name/address/port) are the embedded rows' too
    recorded, made = row["listeners"][0], embedded["listeners"][0]
    assert set(recorded) <= set(made) and set(recorded["pool"]) <= set(made["pool"])
    assert set(recorded["pool"]["members"][0]) == set(made["pool"]["members"][0])


def test_policies_show_their_rules_and_the_pods_that_carry_their_group() -> None:
    rules = {"9": [SecurityGroupRule("ingress", "10.0.0.6/32", "tcp", 8080, 8080, "ingress rule 0 from client")]}
    [row] = policy_rows([POLICY], rules, [WEB, CLIENT])
    assert row["pods"] == ["web"] and row["directions"] == ["ingress"] and row["rule_count"] == 2
    assert row["rules"] == [
        {
            "direction": "ingress",
            "protocol": "tcp",
            "ports": "8080",
            "remote": "10.0.0.6/32",
            "description": "ingress rule 0 from client",
        }
    ]
    other = Translated("k", "NetworkPolicy", "shop", "web-in", "openstack", POLICY.state)
    assert policy_rows([other], rules, [])[0]["rules"] is None  # in Neutron: the count only


@pytest.mark.parametrize(
    ("rule", "protocol", "ports"),
    [
        (SecurityGroupRule("egress", "0.0.0.0/0"), "any", "any"),
        (SecurityGroupRule("ingress", "10.0.0.0/8", "udp"), "udp", "any"),
        (SecurityGroupRule("ingress", "10.0.0.0/8", "tcp", 80, 80), "tcp", "80"),
        (SecurityGroupRule("ingress", "10.0.0.0/8", "tcp", 8000, 8100), "tcp", "8000-8100"),
    ],
)
def test_rules_read_as_protocol_and_port_range(rule: SecurityGroupRule, protocol: str, ports: str) -> None:
    described = describe_rule(rule)
    assert (described["protocol"], described["ports"]) == (protocol, ports)
