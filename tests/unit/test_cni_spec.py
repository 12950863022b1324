"""The CNI specification's rules as kuberaven-cni applies them (cni/spec.py), from plain data."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kuberaven.cni.handover import netns_target
from kuberaven.cni.spec import (
    IFNAME_MAX,
    KUBELET_SANDBOX_TIMEOUT,
    WIRING_MARGIN,
    Attachment,
    CniError,
    ErrorCode,
    attachment_key,
    bridge_name,
    expired,
    host_ifname,
    invocation,
    parked_ifname,
    parse_config,
    result,
    stale,
)
from kuberaven.network.vif import Vif

CONFIG = json.dumps({"cniVersion": "1.0.0", "name": "kuberaven", "type": "kuberaven-cni", "socket": "/s"})
ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "ctr",
    "CNI_NETNS": "/var/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-1;K8S_POD_UID=u-1",
}


def refused(code: ErrorCode, call: Any, *args: Any) -> str:
    with pytest.raises(CniError) as caught:
        call(*args)
    assert caught.value.code == code, caught.value.msg
    error = json.loads(caught.value.to_json("1.0.0"))
    assert (error["cniVersion"], error["code"]) == ("1.0.0", int(code))
    return caught.value.msg


def test_an_add_names_the_pod_the_sandbox_and_the_bound() -> None:
    call = invocation(ENV, parse_config(CONFIG))
    assert (call.command, call.container_id, call.netns, call.ifname) == ("ADD", "ctr", "/var/run/netns/x", "eth0")
    assert (call.pod_namespace, call.pod_name, call.pod_uid, call.pod) == ("shop", "web-1", "u-1", "shop/web-1")
    assert call.timeout == 170.0 and call.version == "1.0.0"
    # OVS: the agent's bridge, a minute for the port to be ready.
    assert (call.ovs_bridge, call.active_timeout) == (None, 60.0)
    # Both waits, and the wiring, within the 4 minutes a kubelet gives a sandbox's start (the ADD in it).
    assert call.timeout + call.active_timeout + WIRING_MARGIN <= KUBELET_SANDBOX_TIMEOUT == 240.0


def test_a_config_may_name_its_bridge_and_its_bounds() -> None:
    config = {**json.loads(CONFIG), "cniVersion": "1.1.0", "ovsBridge": "br-pods", "activeTimeout": 2.5}
    call = invocation(ENV, parse_config(json.dumps(config)))
    assert (call.version, call.ovs_bridge, call.active_timeout) == ("1.1.0", "br-pods", 2.5)


@pytest.mark.parametrize(
    ("config", "code", "problem"),
    [
        ("{", ErrorCode.DECODE_FAILURE, "not JSON"),
        ("[1]", ErrorCode.DECODE_FAILURE, "not a JSON object"),
        ('{"cniVersion": "0.4.0", "name": "n"}', ErrorCode.INCOMPATIBLE_VERSION, "'0.4.0' is not supported"),
        ('{"cniVersion": "1.2.0", "name": "n"}', ErrorCode.INCOMPATIBLE_VERSION, "(supported: 1.0.0, 1.1.0)"),
        ('{"cniVersion": "1.0.0"}', ErrorCode.INVALID_CONFIG, "has no name"),
        ('{"cniVersion": "1.0.0", "name": "n", "annotationTimeout": 0}', ErrorCode.INVALID_CONFIG, "annotationTimeout"),
        (
            '{"cniVersion": "1.0.0", "name": "n", "annotationTimeout": "5"}',
            ErrorCode.INVALID_CONFIG,
            "annotationTimeout",
        ),
        (
            '{"cniVersion": "1.0.0", "name": "n", "activeTimeout": -1}',
            ErrorCode.INVALID_CONFIG,
            "activeTimeout must be",
        ),
        (
            '{"cniVersion": "1.0.0", "name": "n", "activeTimeout": true}',
            ErrorCode.INVALID_CONFIG,
            "activeTimeout must be",
        ),
        ('{"cniVersion": "1.0.0", "name": "n", "socket": ""}', ErrorCode.INVALID_CONFIG, "socket must be a non-empty"),
        ('{"cniVersion": "1.0.0", "name": "n", "ovsBridge": null}', ErrorCode.INVALID_CONFIG, "ovsBridge must be"),
    ],
)
def test_a_bad_network_config_gets_the_specs_code(config: str, code: ErrorCode, problem: str) -> None:
    assert problem in refused(code, parse_config, config)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"CNI_COMMAND": "FROB"}, "'FROB' is not one of ADD, CHECK, DEL, STATUS, GC"),
        ({"CNI_NETNS": ""}, "ADD needs CNI_NETNS"),
        ({"CNI_ARGS": "IgnoreUnknown=1"}, "lacks K8S_POD_NAMESPACE"),
        ({"CNI_ARGS": "K8S_POD_NAME"}, "not K=V"),
        ({"CNI_IFNAME": "x" * (IFNAME_MAX + 1)}, "not a valid interface name"),
    ],
)
def test_a_bad_environment_is_invalid_environment(change: dict[str, str], problem: str) -> None:
    assert problem in refused(ErrorCode.INVALID_ENVIRONMENT, invocation, {**ENV, **change}, parse_config(CONFIG))


def test_del_needs_neither_the_sandbox_nor_the_pod() -> None:
    call = invocation({"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "ctr", "CNI_IFNAME": "eth0"}, parse_config(CONFIG))
    assert call.netns is None and call.pod_name is None


def test_names_fit_linux_and_are_found_again() -> None:
    assert len(host_ifname("c" * 64, "eth0")) <= IFNAME_MAX and len(bridge_name("12345")) <= IFNAME_MAX
    assert host_ifname("ctr", "eth0") == host_ifname("ctr", "eth0") != host_ifname("ctr", "eth1")
    assert bridge_name("1") != bridge_name("2")
    parked = parked_ifname(host_ifname("c" * 64, "eth0"))
    assert len(parked) <= IFNAME_MAX and parked.startswith("krp") and not stale([parked], [])


def test_the_add_result_has_both_interfaces_the_address_and_the_default_route() -> None:
    vif = Vif(
        port="7",
        network="2",
        subnet="3",
        cidr="10.64.0.0/24",
        gateway="10.64.0.1",
        mac="fa:16:3e:00:00:07",
        ip="10.64.0.5",
        node="n",
    )
    answer = result(vif, invocation(ENV, parse_config(CONFIG)), "krvabc", "aa:bb:cc:dd:ee:ff")
    assert answer["cniVersion"] == "1.0.0"  # the config's
    newer = parse_config(json.dumps({**json.loads(CONFIG), "cniVersion": "1.1.0"}))
    assert result(vif, invocation(ENV, newer), "krvabc", "aa:bb:cc:dd:ee:ff")["cniVersion"] == "1.1.0"
    assert answer["interfaces"][1] == {"name": "eth0", "mac": "fa:16:3e:00:00:07", "sandbox": "/var/run/netns/x"}
    assert answer["ips"] == [{"address": "10.64.0.5/24", "gateway": "10.64.0.1", "interface": 1}]
    assert answer["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.64.0.1"}]


GC_CONFIG = {"cniVersion": "1.1.0", "name": "kuberaven", "type": "kuberaven-cni"}


def test_status_and_gc_need_no_container() -> None:
    status = invocation({"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}, GC_CONFIG)
    assert (status.command, status.container_id, status.netns, status.valid_attachments) == ("STATUS", "", None, ())
    valid = [{"containerID": "c1", "ifname": "eth0"}, {"containerID": "c2", "ifname": "net1"}]
    gc = invocation({"CNI_COMMAND": "GC"}, {**GC_CONFIG, "cni.dev/valid-attachments": valid})
    assert gc.valid_attachments == (Attachment("c1", "eth0"), Attachment("c2", "net1"))
    # libcni's older spelling of the key.
    older = invocation({"CNI_COMMAND": "GC"}, {**GC_CONFIG, "cni.dev/attachments": valid[:1]})
    assert older.valid_attachments == (Attachment("c1", "eth0"),)


@pytest.mark.parametrize(
    ("attachments", "problem"),
    [({"c": 1}, "is not a list"), ([{"ifname": "eth0"}], "has no containerID"), ([{"containerID": "c"}], "no ifname")],
)
def test_a_malformed_gc_list_is_an_invalid_config(attachments: Any, problem: str) -> None:
    config = {**GC_CONFIG, "cni.dev/valid-attachments": attachments}
    assert problem in refused(ErrorCode.INVALID_CONFIG, invocation, {"CNI_COMMAND": "GC"}, config)


def test_gc_removes_only_our_host_ends_that_no_valid_attachment_or_call_in_flight_holds() -> None:
    kept, gone, busy = host_ifname("c1", "eth0"), host_ifname("c2", "eth0"), host_ifname("c3", "eth0")
    names = [kept, gone, busy, bridge_name("7"), "eth0", "lo", "br-int", "krvother", "krv0123456789abc", gone]
    assert stale(names, [Attachment("c1", "eth0"), Attachment("c9", "eth0")], busy={busy}) == [gone]
    # Another interface of a valid container is not valid: the runtime lists each (container, ifname).
    assert stale([host_ifname("c1", "net1")], [Attachment("c1", "eth0")]) == [host_ifname("c1", "net1")]
    assert stale(names, []) == sorted({kept, gone, busy})


def test_gc_keeps_a_host_end_handed_to_a_valid_pod_under_its_first_pods_name() -> None:
    first, second = host_ifname("c1", "eth0"), host_ifname("c2", "eth0")
    serving = {first: attachment_key("c3", "eth0"), second: attachment_key("c2", "eth0")}
    # first serves c3 now: kept while c3 is valid, though c1 (whose name it has) is not.
    assert stale([first, second], [Attachment("c3", "eth0")], serving=serving) == [second]
    assert stale([first, second], [Attachment("c2", "eth0")], serving=serving) == [first]


def test_a_pair_is_expired_once_parked_for_park_for_seconds() -> None:
    parked = {"krv0": 100.0, "krv1": 130.0, "krv2": 159.5}
    assert expired(parked, now=160.0, park_for=30) == ["krv0", "krv1"]
    assert expired(parked, now=160.0, park_for=61) == []


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/run/netns/cni-1234", "cni-1234"),  # containerd's, CRI-O's
        ("/var/run/netns/cni-1234", "cni-1234"),
        ("/proc/4242/ns/net", "4242"),  # dockershim's
        ("/proc/self/ns/net", None),
        ("/tmp/netns/x", None),  # nothing ip can name: DEL unwires, ADD wires a pair of its own
    ],
)
def test_a_netns_is_named_to_ip_link_set_netns_by_name_or_process(path: str, target: str | None) -> None:
    assert netns_target(path) == target
