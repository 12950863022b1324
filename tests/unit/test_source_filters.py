"""Source filters (network/rules/source_filters.py): the ACLs that keep pods outside a Service's source ranges
from its ingress address; and OvnNorthbound's set_filters/copy_filters (network/backends/ovn_northbound.py)
against a real OVN northbound ovsdb-server (no northd, no Neutron: switches made as ML2/OVN names them).

The packets are test_ranges.py's (tests/integration/datapath/services/), through the real OVN.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kuberaven.network.backend import BackendError
from kuberaven.network.backends.ovn_northbound import CLUSTER_KEY, OWNER_KEY, OvnNorthbound
from kuberaven.network.drivers.load_balancers import MemberSpec
from kuberaven.network.drivers.source_filters import FROM_PODS, REJECT, SOURCE_FILTER_PRIORITY, SourceFilter
from kuberaven.network.rules.services import ListenerSpec, LoadBalancerSpec
from kuberaven.network.rules.source_filters import ingress_filters, no_endpoint_filters, service_filters
from tests.ovn_nb import nbctl

FIP = "172.24.4.9"
WEB, API = "uid-web", "uid-api"


def test_one_filter_per_listener_refusing_pods_outside_the_ranges_at_the_ingress_address() -> None:
    filters = ingress_filters(FIP, ["198.51.100.0/24", "10.0.0.1"], [("tcp", 80), ("udp", 53), ("tcp", 80)])
    assert filters == (
        SourceFilter(f"ip4.dst == {FIP} && tcp.dst == 80 && ip4.src != {{10.0.0.1/32, 198.51.100.0/24}}"),
        SourceFilter(f"ip4.dst == {FIP} && udp.dst == 53 && ip4.src != {{10.0.0.1/32, 198.51.100.0/24}}"),
    )
    assert {(f.priority, f.direction, f.action) for f in filters} == {(SOURCE_FILTER_PRIORITY, FROM_PODS, REJECT)}


def test_ranges_of_the_other_family_admit_no_one_and_a_range_is_written_as_a_network() -> None:
    assert ingress_filters(FIP, ["2001:db8::/64"], [("tcp", 443)]) == (
        SourceFilter(f"ip4.dst == {FIP} && tcp.dst == 443"),
    )
    assert ingress_filters("2001:db8::9", ["2001:db8:0:0::1/64", "198.51.100.0/24"], [("sctp", 9)]) == (
        SourceFilter("ip6.dst == 2001:db8::9 && sctp.dst == 9 && ip6.src != {2001:db8::/64}"),
    )
    assert ingress_filters(FIP, ["198.51.100.0/24"], []) == ()


def test_listeners_without_a_member_are_refused_to_every_pod_at_the_vip_and_the_floating_ip() -> None:
    member = MemberSpec("shop/web-1:8080", "10.64.1.10", 8080)
    served = ListenerSpec("shop/web:TCP:80", "TCP", 80, (member,))
    empty = ListenerSpec("shop/web:UDP:53", "UDP", 53)
    spec = LoadBalancerSpec("shop/web", "10.0.0.20", (served, empty), True, source_ranges=("198.51.100.0/24",))
    at_ingress, unserved = service_filters(spec, FIP)
    assert at_ingress == ingress_filters(FIP, ["198.51.100.0/24"], [("tcp", 80), ("udp", 53)])
    assert unserved == (
        SourceFilter("ip4.dst == 10.0.0.20 && udp.dst == 53"),
        SourceFilter(f"ip4.dst == {FIP} && udp.dst == 53"),
    )
    # No floating IP (yet, or not a LoadBalancer): no ranges to hold there, the VIP still refused.
    assert service_filters(spec, None) == ((), (SourceFilter("ip4.dst == 10.0.0.20 && udp.dst == 53"),))
    full = replace(spec, listeners=(served,), source_ranges=())
    assert service_filters(full, FIP) == ((), ())
    assert no_endpoint_filters(["10.0.0.20", None], []) == ()


# -- against a real OVN northbound database ------------------------------------------------------------------


def acls(remote: str, network: str) -> dict[str, tuple[str, str]]:
    """The ACLs on ``network``'s switch: match → (owner, action)."""
    found = json.loads(nbctl(remote, "--format=json", "list", "ACL"))
    columns = found["headings"]
    rows = {row[columns.index("_uuid")][1]: dict(zip(columns, row, strict=True)) for row in found["data"]}
    switch = json.loads(nbctl(remote, "--format=json", "find", "Logical_Switch", f"name=neutron-{network}"))
    held = switch["data"][0][switch["headings"].index("acls")]
    uuids = [each[1] for each in held[1]] if held[0] == "set" else [held[1]]
    result = {}
    for uuid in uuids:
        row = rows[uuid]
        ids = dict(row["external_ids"][1])
        result[row["match"]] = (ids.get(OWNER_KEY, ""), row["action"])
    return result


def test_filters_are_set_on_each_network_changed_in_place_and_removed(nb: str) -> None:
    for network in ("a", "b", "c"):
        nbctl(nb, "ls-add", f"neutron-{network}")
    nbctl(nb, "acl-add", "neutron-a", "from-lport", "1001", "ip4", "allow-related")  # not ours: left alone
    web = ingress_filters(FIP, ["198.51.100.0/24"], [("tcp", 80)])
    api = ingress_filters("172.24.4.10", [], [("tcp", 443)])
    client = OvnNorthbound(nb, timeout=5)
    try:
        client.set_filters("c1", WEB, ["a", "b"], web)
        client.set_filters("c1", API, ["a"], api)
        assert acls(nb, "a") == {"ip4": ("", "allow-related"), web[0].match: (WEB, REJECT), api[0].match: (API, REJECT)}
        assert acls(nb, "b") == {web[0].match: (WEB, REJECT)}
        client.set_filters("c1", WEB, ["a", "b"], web)  # again: nothing written twice
        assert len(json.loads(nbctl(nb, "--format=json", "list", "ACL"))["data"]) == 4
        moved = ingress_filters(FIP, ["198.51.100.0/24"], [("tcp", 8080)])
        client.set_filters("c1", WEB, ["b"], moved)  # another port, and network a no longer
        assert acls(nb, "a") == {"ip4": ("", "allow-related"), api[0].match: (API, REJECT)}
        assert acls(nb, "b") == {moved[0].match: (WEB, REJECT)}
        # A network made later gets every filter of its cluster, whoever's.
        client.copy_filters("c1", "c")
        assert acls(nb, "c") == {moved[0].match: (WEB, REJECT), api[0].match: (API, REJECT)}
        client.copy_filters("other-cluster", "c")  # none of that cluster's: nothing changes
        assert len(acls(nb, "c")) == 2
        assert client.filter_owners("c1") == sorted([WEB, API]) and client.filter_owners("other") == []
        client.set_filters("c1", WEB, [], ())  # the Service gone: its filters go from every switch
        assert acls(nb, "b") == {} and acls(nb, "c") == {api[0].match: (API, REJECT)}
        ids = json.loads(nbctl(nb, "--format=json", "find", "ACL", f"match={json.dumps(api[0].match)}"))
        assert all(dict(row[ids["headings"].index("external_ids")][1])[CLUSTER_KEY] == "c1" for row in ids["data"])
    finally:
        client.close()


def test_a_network_whose_switch_is_missing_is_an_error_naming_it(nb: str) -> None:
    client = OvnNorthbound(nb, timeout=5, row_wait=0.3)
    try:
        with pytest.raises(BackendError, match="no Logical_Switch neutron-gone"):
            client.set_filters("c1", WEB, ["gone"], ingress_filters(FIP, [], [("tcp", 80)]))
        client.set_filters("c1", WEB, ["gone"], ())  # nothing to set: nothing to find
    finally:
        client.close()
